package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestMessageLog: an event's attempts, as the recorder stored them, come
// back per subscription with the status of the last one and the response
// samples; a tenant key sees its tenant's events only (another's: 404).
func TestMessageLog(t *testing.T) {
	t.Parallel()
	r, t0 := recordedAgo(t, time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"a1", "evt_1", "order.created", "sub_a", "acme", uint32(1), "retry", "server_error", uint16(503), 12.5, t0, "endpoint answered 503", t0.Add(5 * time.Second), t0, "down"},
			{"a2", "evt_1", "order.created", "sub_a", "acme", uint32(2), "success", "", uint16(200), 3.25, t0.Add(6 * time.Second), "", epoch, t0, "ok"},
			{"b1", "evt_1", "order.created", "sub_b", "acme", uint32(1), "retry", "timeout", uint16(0), 15000.0, t0, "timeout", t0.Add(time.Minute), t0, ""},
			{"c1", "evt_2", "order.created", "sub_c", "globex", uint32(1), "dead", "permanent_4xx", uint16(404), 2.0, t0, "endpoint answered 404", epoch, t0, "nope"},
		}
	})
	var m service.Message
	r.must(http.StatusOK, "GET", "/v1/messages/evt_1", adminKey, nil, &m)
	if m.EventType != "order.created" || m.Tenant != "acme" || len(m.Deliveries) != 2 {
		t.Fatalf("message %+v", m)
	}
	a, b := m.Deliveries[0], m.Deliveries[1]
	if a.SubscriptionID != "sub_a" || a.Status != "delivered" || len(a.Attempts) != 2 || a.Attempts[0].ResponseSample != "down" ||
		a.Attempts[0].HTTPStatus != 503 || a.Attempts[0].NextAttemptAt == nil || a.Attempts[1].ResponseSample != "ok" || a.NextAttemptAt != nil {
		t.Fatalf("sub_a: %+v", a)
	}
	if b.SubscriptionID != "sub_b" || b.Status != "retrying" || b.NextAttemptAt == nil || !b.NextAttemptAt.Equal(t0.Add(time.Minute)) ||
		b.Attempts[0].FailureCategory != "timeout" {
		t.Fatalf("sub_b: %+v", b)
	}
	acme, globex := r.tenantKey("acme"), r.tenantKey("globex")
	r.must(http.StatusOK, "GET", "/v1/messages/evt_1", acme, nil, nil)
	r.must(http.StatusNotFound, "GET", "/v1/messages/evt_1", globex, nil, nil)
	var dead service.Message
	r.must(http.StatusOK, "GET", "/v1/messages/evt_2", globex, nil, &dead)
	if dead.Deliveries[0].Status != "dead" || dead.Deliveries[0].Attempts[0].ResponseSample != "nope" {
		t.Fatalf("evt_2: %+v", dead)
	}
	r.must(http.StatusNotFound, "GET", "/v1/messages/evt_none", adminKey, nil, nil)

	type list struct {
		Data       []service.MessageSummary `json:"data"`
		NextCursor string                   `json:"next_cursor"`
	}
	var all list
	r.must(http.StatusOK, "GET", "/v1/messages", adminKey, nil, &all)
	var got []string
	for _, s := range all.Data {
		got = append(got, s.EventID+"/"+s.SubscriptionID+"/"+s.Status)
	}
	if strings.Join(got, " ") != "evt_1/sub_a/delivered evt_2/sub_c/dead evt_1/sub_b/retrying" {
		t.Fatalf("list: %v", got)
	}
	var paged []string
	cursor := ""
	for range 5 {
		var page list
		r.must(http.StatusOK, "GET", "/v1/messages?limit=1&cursor="+cursor, adminKey, nil, &page)
		for _, s := range page.Data {
			paged = append(paged, s.EventID+"/"+s.SubscriptionID+"/"+s.Status)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(paged, " ") != strings.Join(got, " ") {
		t.Fatalf("pages of one: %v, want %v", paged, got)
	}
	var deadList, acmeOnly list
	r.must(http.StatusOK, "GET", "/v1/messages?status=dead", adminKey, nil, &deadList)
	r.must(http.StatusOK, "GET", "/v1/messages", acme, nil, &acmeOnly)
	if len(deadList.Data) != 1 || deadList.Data[0].EventID != "evt_2" || len(acmeOnly.Data) != 2 {
		t.Fatalf("dead %+v, acme's %+v", deadList.Data, acmeOnly.Data)
	}
	r.must(http.StatusUnprocessableEntity, "GET", "/v1/messages?cursor=nope", adminKey, nil, nil)
}

// TestSubscriptionHealth: success rate, latency and last outcomes come from
// the recorder's views and table; the breaker from Redis (closed without).
func TestSubscriptionHealth(t *testing.T) {
	t.Parallel()
	r, _ := recordedAgo(t, 2*time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"h1", "evt_1", "order.created", "sub_h", "acme", uint32(1), "retry", "server_error", uint16(503), 40.0, t0, "endpoint answered 503", t0.Add(5 * time.Second), t0, ""},
			{"h2", "evt_1", "order.created", "sub_h", "acme", uint32(2), "success", "", uint16(200), 10.0, t0.Add(6 * time.Second), "", epoch, t0, ""},
			{"h3", "evt_2", "order.created", "sub_h", "acme", uint32(1), "success", "", uint16(204), 20.0, t0.Add(7 * time.Second), "", epoch, t0, ""},
			{"h4", "evt_3", "order.created", "sub_other", "acme", uint32(1), "dead", "permanent_4xx", uint16(404), 5.0, t0, "", epoch, t0, ""},
		}
	})
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": "sub_h", "tenant": "acme",
		"url": "https://a.example/", "event_types": []string{"*"}}, nil)
	var h service.Health
	r.must(http.StatusOK, "GET", "/v1/subscriptions/sub_h/health", adminKey, nil, &h)
	if h.Breaker.State != "closed" || !h.Enabled {
		t.Fatalf("breaker %+v", h.Breaker)
	}
	for name, w := range map[string]service.Window{"hour": h.LastHour, "day": h.LastDay} {
		if w.Requests != 3 || w.Succeeded != 2 || w.Retried != 1 || w.Dead != 0 || w.SuccessRate < 0.66 || w.SuccessRate > 0.67 ||
			w.P50MS < 10 || w.P50MS > 40 || w.P99MS < w.P50MS {
			t.Errorf("last %s: %+v", name, w)
		}
	}
	if h.LastSuccess == nil || h.LastSuccess.EventID != "evt_2" || h.LastSuccess.HTTPStatus != 204 {
		t.Errorf("last success %+v", h.LastSuccess)
	}
	if h.LastFailure == nil || h.LastFailure.EventID != "evt_1" || h.LastFailure.FailureCategory != "server_error" {
		t.Errorf("last failure %+v", h.LastFailure)
	}
	globex := r.tenantKey("globex")
	r.must(http.StatusNotFound, "GET", "/v1/subscriptions/sub_h/health", globex, nil, nil)
}

// TestStats: the API's statistics are webhookctl's, limited to a tenant
// key's tenant.
func TestStats(t *testing.T) {
	t.Parallel()
	r, _ := recordedAgo(t, time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"s1", "evt_1", "order.created", "sub_a", "acme", uint32(1), "retry", "timeout", uint16(0), 15000.0, t0, "", epoch, t0, ""},
			{"s2", "evt_1", "order.created", "sub_a", "acme", uint32(2), "success", "", uint16(200), 10.0, t0, "", epoch, t0, ""},
			{"s3", "evt_2", "invoice.paid", "sub_g", "globex", uint32(1), "dead", "permanent_4xx", uint16(404), 5.0, t0, "", epoch, t0, ""},
		}
	})
	type stats struct {
		Rows []struct {
			Key         string            `json:"key"`
			Requests    uint64            `json:"requests"`
			SuccessRate *float64          `json:"success_rate"`
			Failures    map[string]uint64 `json:"failures"`
		} `json:"rows"`
	}
	var all, acme stats
	r.must(http.StatusOK, "GET", "/v1/stats?by=tenant", adminKey, nil, &all)
	if len(all.Rows) != 2 || all.Rows[0].Key != "acme" || all.Rows[0].Requests != 2 || *all.Rows[0].SuccessRate != 0.5 ||
		all.Rows[0].Failures["timeout"] != 1 || all.Rows[1].Failures["permanent_4xx"] != 1 {
		t.Fatalf("by tenant: %+v", all.Rows)
	}
	r.must(http.StatusOK, "GET", "/v1/stats", r.tenantKey("acme"), nil, &acme)
	if len(acme.Rows) != 1 || acme.Rows[0].Key != "sub_a" {
		t.Fatalf("acme's stats: %+v", acme.Rows)
	}
	r.must(http.StatusUnprocessableEntity, "GET", "/v1/stats?by=colour", adminKey, nil, nil)
	var bad problem
	r.must(http.StatusUnprocessableEntity, "GET", "/v1/stats?event_type=a.*.b", adminKey, nil, &bad)
	if len(bad.Errors) != 1 || bad.Errors[0].Location != "query.event_type" {
		t.Fatalf("an invalid type's problem: %+v, want it located at query.event_type", bad)
	}
}

// epoch is the next_attempt_at of an attempt with no retry due.
var epoch = time.Unix(0, 0).UTC()

// recordedAgo is recorded with the rows that rows makes of t0, a whole
// second ago before now (their attempts' time), and t0.
func recordedAgo(t *testing.T, ago time.Duration, rows func(t0 time.Time) [][]any) (*replica, time.Time) {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Second).Add(-ago)
	return recorded(t, rows(t0)), t0
}

// recorded is a replica whose message log reads a fresh ClickHouse
// database holding rows: single deliveries' attempts, the columns of
// schema.AttemptColumns in order but the last, batch_id, left empty.
func recorded(t *testing.T, rows [][]any) *replica {
	t.Helper()
	ch, addr, db := chtest.Database(t)
	ctx := chtest.Ctx(t, 30*time.Second)
	if _, err := schema.Migrate(ctx, ch, db, 0); err != nil {
		t.Fatal(err)
	}
	batch, err := ch.PrepareBatch(ctx, schema.InsertAttempts(db))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if err := batch.Append(append(row, "")...); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	env := maps.Clone(c.env)
	env["WEBHOOKS_CLICKHOUSE_ADDR"], env["WEBHOOKS_CLICKHOUSE_DATABASE"] = addr, db
	c.ch = ch
	return c.replicaWith(env)
}

// TestMessageRetry: a message shows its event as published, found on the
// events topic among others of the same second; retrying it sends a new
// first attempt with the same event id to a subscription it was sent to,
// partitioned as the pipeline partitions; other subscriptions, another
// tenant's key and a disabled subscription are refused, writing nothing.
func TestMessageRetry(t *testing.T) {
	t.Parallel()
	r, t0 := recordedAgo(t, time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"r1", "evt_r", "order.created", "sub_r", "acme", uint32(1), "dead", "permanent_4xx", uint16(400), 2.0, t0.Add(time.Second), "endpoint answered 400", epoch, t0, "no"},
			{"r2", "evt_r", "order.created", "sub_off", "acme", uint32(1), "success", "", uint16(204), 2.0, t0.Add(time.Second), "", epoch, t0, ""},
			{"r3", "evt_gone", "order.created", "sub_r", "acme", uint32(1), "success", "", uint16(204), 2.0, t0.Add(time.Second), "", epoch, t0, ""},
		}
	})
	c := r.c
	var recs []*kgo.Record
	for i := range 50 {
		ev := topics.Event{ID: fmt.Sprintf("evt_noise_%d", i), Type: "order.created", Tenant: "acme", Key: fmt.Sprint(i), Data: []byte(`1`)}
		if i == 30 {
			ev = topics.Event{ID: "evt_r", Type: "order.created", Tenant: "acme", Key: "order/7", Data: []byte(`{"total":7}`)}
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: c.names.Events(), Key: []byte(ev.Key), Value: b, Timestamp: t0.Add(time.Duration(i*30) * time.Millisecond)})
	}
	if err := c.cl.ProduceSync(testkit.Ctx(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sub_r", "sub_off"} {
		r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": id, "tenant": "acme",
			"url": "https://a.example/", "event_types": []string{"*"}}, nil)
	}
	r.must(http.StatusOK, "POST", "/v1/subscriptions/sub_off/disable", adminKey, nil, nil)

	var m service.Message
	r.must(http.StatusOK, "GET", "/v1/messages/evt_r", adminKey, nil, &m)
	if m.Event == nil || string(m.Event.Data) != `{"total":7}` || m.Event.Key != "order/7" || !m.PublishedAt.Equal(t0) {
		t.Fatalf("message %+v, event %+v: want the event as published", m, m.Event)
	}
	var gone service.Message
	r.must(http.StatusOK, "GET", "/v1/messages/evt_gone", adminKey, nil, &gone)
	if gone.Event != nil {
		t.Fatalf("evt_gone was never published, yet shows %+v", gone.Event)
	}

	before := len(c.records(c.names.Deliveries()))
	for _, tc := range []struct {
		name, path, key, sub string
		status               int
	}{
		{"another tenant's", "/v1/messages/evt_r/retry", r.tenantKey("globex"), "sub_r", http.StatusNotFound},
		{"not sent there", "/v1/messages/evt_r/retry", adminKey, "sub_none", http.StatusNotFound},
		{"disabled", "/v1/messages/evt_r/retry", adminKey, "sub_off", http.StatusConflict},
		{"not on the topic", "/v1/messages/evt_gone/retry", adminKey, "sub_r", http.StatusGone},
		{"unknown event", "/v1/messages/evt_none/retry", adminKey, "sub_r", http.StatusNotFound},
	} {
		if a := r.do("POST", tc.path, tc.key, map[string]any{"subscription_id": tc.sub}); a.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.status)
		}
	}
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": "sub_other", "tenant": "acme",
		"url": "https://a.example/", "event_types": []string{"*"}}, nil)
	if a := r.do("POST", "/v1/messages/evt_r/retry", adminKey, map[string]any{"subscription_id": "sub_other"}); a.status != http.StatusUnprocessableEntity {
		t.Errorf("retry to a subscription it was never sent to: %d %s", a.status, a.body)
	}
	if n := len(c.records(c.names.Deliveries())); n != before {
		t.Fatalf("%d deliveries written by refused retries", n-before)
	}

	r.must(http.StatusAccepted, "POST", "/v1/messages/evt_r/retry", r.tenantKey("acme"), map[string]any{"subscription_id": "sub_r"}, nil)
	after := c.records(c.names.Deliveries())[before:]
	if len(after) != 1 {
		t.Fatalf("%d deliveries after the retry, want 1", len(after))
	}
	d, err := topics.DecodeDelivery(after[0].Value)
	if err != nil || d.EventID != "evt_r" || d.SubscriptionID != "sub_r" || d.Attempt != 1 || string(d.Data) != `{"total":7}` {
		t.Fatalf("retried %s (%v)", after[0].Value, err)
	}
	want := int32(topics.Partitioner().ForTopic(c.names.Deliveries()).Partition(&kgo.Record{Key: after[0].Key}, 3))
	if string(after[0].Key) != "sub_r/evt_r" || after[0].Partition != want {
		t.Fatalf("retried with key %q on partition %d, want sub_r/evt_r on %d", after[0].Key, after[0].Partition, want)
	}
}

// TestSeries: the series counts attempts by outcome per step from the
// recorder's views, every step of the window present, one series per
// subscription when asked, a tenant key's own only.
func TestSeries(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	t0 := now.Truncate(time.Minute).Add(-2 * time.Minute)
	r := recorded(t, [][]any{
		{"x1", "evt_1", "order.created", "sub_a", "acme", uint32(1), "retry", "server_error", uint16(503), 40.0, t0, "", epoch, t0, ""},
		{"x2", "evt_1", "order.created", "sub_a", "acme", uint32(2), "success", "", uint16(200), 10.0, t0, "", epoch, t0, ""},
		{"x3", "evt_2", "order.created", "sub_a", "acme", uint32(1), "success", "", uint16(200), 20.0, t0.Add(time.Minute), "", epoch, t0, ""},
		{"x4", "evt_3", "order.created", "sub_g", "globex", uint32(1), "dead", "permanent_4xx", uint16(404), 5.0, t0, "", epoch, t0, ""},
		{"x5", "evt_4", "order.created", "sub_g", "globex", uint32(1), "blocked", "breaker_open", uint16(0), 0.0, t0, "", epoch, t0, ""},
	})
	var out service.SeriesOutput
	r.must(http.StatusOK, "GET", "/v1/stats/series?window=1h", adminKey, nil, &out.Body)
	if len(out.Body.Series) != 1 || len(out.Body.Series[0].Points) != 60 || out.Body.StepSeconds != 60 {
		t.Fatalf("series of 1h: %d series, step %d", len(out.Body.Series), out.Body.StepSeconds)
	}
	var ok, retry, dead, held uint64
	for _, p := range out.Body.Series[0].Points {
		ok, retry, dead, held = ok+p.Success, retry+p.Retry, dead+p.Dead, held+p.HeldBack
		if p.At.Equal(t0) && (p.Success != 1 || p.Retry != 1 || p.P99MS == nil || *p.P99MS < 10) {
			t.Errorf("the minute of %v: %+v", t0, p)
		}
	}
	if ok != 2 || retry != 1 || dead != 1 || held != 1 {
		t.Fatalf("totals success %d retry %d dead %d held back %d", ok, retry, dead, held)
	}
	if se := out.Body.Series[0]; se.P50MS == nil || se.P99MS == nil || *se.P50MS < 5 || *se.P99MS < 30 || *se.P99MS > 40 {
		t.Fatalf("p50 %v, p99 %v over the hour, want from the four requests (5 to 40 ms)", se.P50MS, se.P99MS)
	}
	r.must(http.StatusOK, "GET", "/v1/stats/series?window=7d&by=subscription", r.tenantKey("acme"), nil, &out.Body)
	if len(out.Body.Series) != 1 || out.Body.Series[0].Key != "sub_a" || len(out.Body.Series[0].Points) != 168 {
		t.Fatalf("acme's series by subscription: %d series (%+v)", len(out.Body.Series), out.Body.Series)
	}
	r.must(http.StatusUnprocessableEntity, "GET", "/v1/stats/series?window=2h", adminKey, nil, nil)
}

// TestMessageStatusWithinASecond: with whole-second timestamps, a dead
// attempt and the success of its redrive in the same second read as
// delivered, in the message and in the list.
func TestMessageStatusWithinASecond(t *testing.T) {
	t.Parallel()
	r, _ := recordedAgo(t, time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"s1", "evt_s", "order.created", "sub_a", "acme", uint32(1), "retry", "server_error", uint16(503), 1.0, t0, "", t0.Add(time.Second), t0, ""},
			{"s2", "evt_s", "order.created", "sub_a", "acme", uint32(2), "dead", "exhausted", uint16(503), 1.0, t0.Add(time.Second), "", epoch, t0, ""},
			{"s3", "evt_s", "order.created", "sub_a", "acme", uint32(1), "success", "", uint16(200), 1.0, t0.Add(time.Second), "", epoch, t0, ""},
			{"d1", "evt_d", "order.created", "sub_a", "acme", uint32(1), "retry", "server_error", uint16(503), 1.0, t0, "", t0, t0, ""},
			{"d2", "evt_d", "order.created", "sub_a", "acme", uint32(2), "dead", "exhausted", uint16(503), 1.0, t0, "", epoch, t0, ""},
		}
	})
	for id, want := range map[string]string{"evt_s": "delivered", "evt_d": "dead"} {
		var m service.Message
		r.must(http.StatusOK, "GET", "/v1/messages/"+id, adminKey, nil, &m)
		if got := m.Deliveries[0].Status; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
		var l service.ListMessagesOutput
		r.must(http.StatusOK, "GET", "/v1/messages?status="+want, adminKey, nil, &l.Body)
		if !slices.ContainsFunc(l.Body.Data, func(s service.MessageSummary) bool { return s.EventID == id }) {
			t.Errorf("%s not listed %s", id, want)
		}
	}
}

// TestScheduledStatus: a delivery whose last record is the dispatcher's
// scheduled one is scheduled, due at its next_attempt_at; once the retrier
// records it cancelled (skipped), it is skipped; the list filters by both.
func TestScheduledStatus(t *testing.T) {
	for outcome, want := range map[string]string{topics.OutcomeScheduled: "scheduled", topics.OutcomeSkipped: "skipped",
		topics.OutcomeBlocked: "pending", topics.OutcomeRetry: "retrying"} {
		if got := statusOf(outcome); got != want {
			t.Errorf("statusOf(%s) = %s, want %s", outcome, got, want)
		}
	}
	if !slices.Equal(outcomesOf["scheduled"], []string{topics.OutcomeScheduled}) {
		t.Errorf("status scheduled lists outcomes %q", outcomesOf["scheduled"])
	}
	t.Run("message log", func(t *testing.T) {
		t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
		due := t0.Add(time.Hour)
		r := recorded(t, [][]any{
			{"s1", "evt_later", "order.created", "sub_a", "acme", uint32(1), "scheduled", "", uint16(0), 0.0, t0, "", due, t0, ""},
			{"c1", "evt_off", "order.created", "sub_a", "acme", uint32(1), "scheduled", "", uint16(0), 0.0, t0, "", due, t0, ""},
			{"c2", "evt_off", "order.created", "sub_a", "acme", uint32(1), "skipped", "cancelled", uint16(0), 0.0, t0.Add(time.Second), "cancelled by its tenant", epoch, t0, ""},
		})
		var m service.Message
		r.must(http.StatusOK, "GET", "/v1/messages/evt_later", adminKey, nil, &m)
		if d := m.Deliveries[0]; d.Status != "scheduled" || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(due) {
			t.Fatalf("evt_later: %+v", d)
		}
		r.must(http.StatusOK, "GET", "/v1/messages/evt_off", adminKey, nil, &m)
		if d := m.Deliveries[0]; d.Status != "skipped" || d.Attempts[1].FailureCategory != topics.FailureCancelled {
			t.Fatalf("evt_off: %+v", d)
		}
		var l service.ListMessagesOutput
		r.must(http.StatusOK, "GET", "/v1/messages?status=scheduled", adminKey, nil, &l.Body)
		if len(l.Body.Data) != 1 || l.Body.Data[0].EventID != "evt_later" || l.Body.Data[0].Status != "scheduled" {
			t.Fatalf("scheduled messages: %+v", l.Body.Data)
		}
	})
}
