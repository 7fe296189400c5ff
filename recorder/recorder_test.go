package recorder

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestEveryAttemptLands: every attempt produced is in the attempts table
// once, every column as produced; undecodable records are skipped without
// blocking their partitions; the group commits to the end.
func TestEveryAttemptLands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "50"
	as := attempts(200, "land")
	h.produce(as[:100]...)
	// Undecodable records between good ones, on every partition.
	for p := range partitions {
		sub := fmt.Sprintf("sub_%d", p)
		h.produceRaw(
			&kgo.Record{Topic: h.names.Attempts(), Key: []byte(sub), Value: []byte(`{"attempt_id": `)},
			&kgo.Record{Topic: h.names.Attempts(), Key: []byte(sub), Value: []byte(`{"event_id": "evt_no_ids", "outcome": "success"}`)},
			&kgo.Record{Topic: h.names.Attempts(), Key: []byte(sub), Value: nil},
		)
	}
	h.produce(as[100:]...)
	h.start(h.config())

	h.waitRows(60*time.Second, len(as))
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	if got := h.count(false); got != uint64(len(as)) {
		t.Errorf("count() without FINAL = %d, want %d: a clean run inserts each attempt once", got, len(as))
	}
	checkRows(t, h, as)
}

// checkRows compares the table with the attempts produced, column by
// column, at the precision the server's time columns keep.
func checkRows(t *testing.T, h *harness, as []topics.Attempt) {
	t.Helper()
	ctx := chtest.Ctx(t, 30*time.Second)
	v, err := schema.ServerVersion(ctx, h.ch)
	if err != nil {
		t.Fatal(err)
	}
	precision := time.Second
	if schema.FeaturesOf(v).DateTime64 {
		precision = time.Millisecond
	}
	rows, err := h.ch.Query(ctx, "SELECT attempt_id, event_id, event_type, subscription_id, tenant, attempt, outcome, "+
		"failure_category, http_status, duration_ms, ts, error, next_attempt_at, published_at, response_sample, batch_id FROM "+h.db+".attempts FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]topics.Attempt{}
	for rows.Next() {
		var a topics.Attempt
		var attempt uint32
		var status uint16
		if err := rows.Scan(&a.AttemptID, &a.EventID, &a.EventType, &a.SubscriptionID, &a.Tenant, &attempt, &a.Outcome,
			&a.FailureCategory, &status, &a.DurationMS, &a.TS, &a.Error, &a.NextAttemptAt, &a.PublishedAt, &a.ResponseSample, &a.BatchID); err != nil {
			t.Fatal(err)
		}
		a.Attempt, a.HTTPStatus = int(attempt), int(status)
		got[a.AttemptID] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	norm := func(ts time.Time) time.Time {
		if ts.IsZero() || ts.Unix() == 0 {
			return time.Time{} // absent is stored as the epoch
		}
		return ts.UTC().Truncate(precision)
	}
	for _, want := range as {
		g, ok := got[want.AttemptID]
		if !ok {
			t.Errorf("attempt %s missing", want.AttemptID)
			continue
		}
		want.TS, want.NextAttemptAt, want.PublishedAt = norm(want.TS), norm(want.NextAttemptAt), norm(want.PublishedAt)
		g.TS, g.NextAttemptAt, g.PublishedAt = norm(g.TS), norm(g.NextAttemptAt), norm(g.PublishedAt)
		if g != want {
			t.Errorf("attempt %s stored as\n%+v\nwant\n%+v", want.AttemptID, g, want)
		}
	}
	if len(got) != len(as) {
		t.Errorf("%d rows, want %d", len(got), len(as))
	}
}

// TestViewsAgreeWithRawTable: the per-minute outcome counts and latency
// states equal what the raw table gives for the same groups.
func TestViewsAgreeWithRawTable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "64"
	as := attempts(500, "views")
	h.produce(as...)
	h.start(h.config())
	h.waitRows(60*time.Second, len(as))
	checkViews(t, h)
}

// checkViews compares the aggregate tables with the raw table (FINAL),
// once the views caught up with the last insert (an insert writes the
// table first, then each view).
func checkViews(t *testing.T, h *harness) {
	t.Helper()
	db := h.db
	waitFor(t, 30*time.Second, "the views to count every row", func() bool {
		var rows, requests, perMinute, latency uint64
		err := h.ch.QueryRow(chtest.Ctx(t, 10*time.Second), "SELECT (SELECT count() FROM "+db+".attempts), "+
			"(SELECT countIf(outcome IN ('success', 'retry', 'dead')) FROM "+db+".attempts), "+
			"(SELECT sum(attempts) FROM "+db+".attempts_per_minute), "+
			"(SELECT countMerge(requests) FROM "+db+".latency_per_minute)").Scan(&rows, &requests, &perMinute, &latency)
		return err == nil && perMinute == rows && latency == requests
	})
	counts := func(q string) map[string][2]uint64 {
		rows, err := h.ch.Query(chtest.Ctx(t, 30*time.Second), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		out := map[string][2]uint64{}
		for rows.Next() {
			var tenant, sub, outcome, category string
			var minute time.Time
			var n, first uint64
			if err := rows.Scan(&tenant, &sub, &minute, &outcome, &category, &n, &first); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprint(tenant, "/", sub, "/", minute.Unix(), "/", outcome, "/", category)] = [2]uint64{n, first}
		}
		return out
	}
	view := counts("SELECT tenant, subscription_id, minute, outcome, failure_category, sum(attempts), sum(first_attempts) FROM " +
		db + ".attempts_per_minute GROUP BY tenant, subscription_id, minute, outcome, failure_category")
	raw := counts("SELECT tenant, subscription_id, toStartOfMinute(ts) AS minute, outcome, failure_category, count(), countIf(attempt = 1) FROM " +
		db + ".attempts FINAL GROUP BY tenant, subscription_id, minute, outcome, failure_category")
	if len(raw) == 0 {
		t.Fatal("raw table empty")
	}
	for k, want := range raw {
		if view[k] != want {
			t.Errorf("attempts_per_minute %s = %v, raw table says %v", k, view[k], want)
		}
	}
	if len(view) != len(raw) {
		t.Errorf("attempts_per_minute has %d groups, raw table %d", len(view), len(raw))
	}

	type lat struct {
		n        uint64
		sum, max float64
		q        []float64
	}
	latency := func(q string) map[string]lat {
		rows, err := h.ch.Query(chtest.Ctx(t, 30*time.Second), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		out := map[string]lat{}
		for rows.Next() {
			var tenant, sub string
			var minute time.Time
			var l lat
			if err := rows.Scan(&tenant, &sub, &minute, &l.n, &l.sum, &l.max, &l.q); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprint(tenant, "/", sub, "/", minute.Unix())] = l
		}
		return out
	}
	lview := latency("SELECT tenant, subscription_id, minute, countMerge(requests), sumMerge(duration_ms_sum), maxMerge(duration_ms_max), " +
		"quantilesMerge(" + schema.Quantiles + ")(duration_ms_quantiles) FROM " + db + ".latency_per_minute GROUP BY tenant, subscription_id, minute")
	lraw := latency("SELECT tenant, subscription_id, toStartOfMinute(ts) AS minute, count(), sum(duration_ms), max(duration_ms), " +
		"quantiles(" + schema.Quantiles + ")(duration_ms) FROM " + db + ".attempts FINAL WHERE outcome IN ('success', 'retry', 'dead') " +
		"GROUP BY tenant, subscription_id, minute")
	if len(lraw) == 0 {
		t.Fatal("no HTTP attempts in the raw table")
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }
	for k, want := range lraw {
		got, ok := lview[k]
		if !ok || got.n != want.n || !near(got.sum, want.sum) || got.max != want.max || len(got.q) != len(want.q) {
			t.Errorf("latency_per_minute %s = %+v, raw table says %+v", k, got, want)
			continue
		}
		for i := range want.q {
			if !near(got.q[i], want.q[i]) {
				t.Errorf("latency_per_minute %s quantiles %v, raw table says %v", k, got.q, want.q)
				break
			}
		}
	}
	if len(lview) != len(lraw) {
		t.Errorf("latency_per_minute has %d groups, raw table %d", len(lview), len(lraw))
	}
}

// observed runs a recorder whose polls are watched: the most records it
// held at once and whether it saw ClickHouse down.
type observed struct {
	maxRecords atomic.Int64
	records    atomic.Int64
	sawDown    atomic.Bool
	down       atomic.Bool
}

func (o *observed) hook(records int, down bool) {
	o.records.Store(int64(records))
	for {
		m := o.maxRecords.Load()
		if int64(records) <= m || o.maxRecords.CompareAndSwap(m, int64(records)) {
			break
		}
	}
	o.down.Store(down)
	if down {
		o.sawDown.Store(true)
	}
}

// TestClickHouseOutage: with ClickHouse cut off mid-run, the recorder keeps
// running, holds at most two batches (fetching paused), commits nothing, logs
// the outage once, reports not ready meanwhile, and once ClickHouse is back
// inserts everything, once.
func TestClickHouseOutage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := newProxy(t, h.env[schema.EnvClickHouseAddr])
	h.env[schema.EnvClickHouseAddr] = p.addr()
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "20"
	h.env[config.EnvHTTPAddr] = testkit.FreeAddr(t)
	cfg := h.config()
	var o observed
	cfg.observe = o.hook
	readyz := func() (int, string) { return httpGet(t, "http://"+cfg.HTTPAddr+"/readyz") }
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(testLogger(t).Core(), core))
	run := testkit.Go(t, func(ctx context.Context) error { return Run(ctx, cfg, log) })

	first := attempts(50, "before")
	h.produce(first...)
	h.waitRows(60*time.Second, len(first))
	waitFor(t, 30*time.Second, "the first commits", func() bool { return h.committedAll(topics.GroupRecorder) })
	before := h.committed(topics.GroupRecorder)
	waitFor(t, 30*time.Second, "/readyz 200", func() bool { code, _ := readyz(); return code == http.StatusOK })

	p.setCut(true)
	during := attempts(150, "during") // several batches' worth
	h.produce(during...)
	waitFor(t, 30*time.Second, "the recorder to find ClickHouse down", o.sawDown.Load)
	refused := p.refused.Load()
	waitFor(t, 30*time.Second, "three more retries", func() bool { return p.refused.Load() >= refused+3 })
	if run.Exited() {
		t.Fatalf("Run returned during the outage: %v", run.Err())
	}
	if got := h.committed(topics.GroupRecorder); !mapsEqual(got, before) {
		t.Errorf("committed %v during the outage, want %v unchanged", got, before)
	}
	if m := o.maxRecords.Load(); m > 40 {
		t.Errorf("held %d records at once, want at most two batches of 20", m)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "ClickHouse") {
		t.Errorf("/readyz during the outage: %d %q, want 503 naming ClickHouse", code, body)
	}

	p.setCut(false)
	all := len(first) + len(during)
	h.waitRows(60*time.Second, all)
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	if got := h.count(false); got != uint64(all) {
		t.Errorf("count() without FINAL = %d, want %d", got, all)
	}
	checkRows(t, h, append(first, during...))
	waitFor(t, 30*time.Second, "/readyz 200 again", func() bool { code, _ := readyz(); return code == http.StatusOK })
	if m := o.maxRecords.Load(); m > 40 {
		t.Errorf("held %d records at once, want at most two batches of 20", m)
	}
	if n := logs.FilterMessageSnippet("ClickHouse insert failed").Len(); n != 1 {
		t.Errorf("logged the outage %d times, want once", n)
	}
	if n := logs.FilterMessageSnippet("ClickHouse is back").Len(); n != 1 {
		t.Errorf("logged the recovery %d times, want once", n)
	}
}

// TestSlowClickHouse: inserts that take longer than the insert timeout
// count as failed; the batches are held and retried, nothing is committed
// meanwhile, and once ClickHouse answers again every attempt is there once.
func TestSlowClickHouse(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := newProxy(t, h.env[schema.EnvClickHouseAddr])
	h.env[schema.EnvClickHouseAddr] = p.addr()
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "20"
	h.env["WEBHOOKS_RECORDER_INSERT_TIMEOUT"] = "500ms"
	cfg := h.config()
	var o observed
	cfg.observe = o.hook
	r := h.start(cfg)

	first := attempts(30, "fast")
	h.produce(first...)
	h.waitRows(60*time.Second, len(first))
	waitFor(t, 30*time.Second, "the first commits", func() bool { return h.committedAll(topics.GroupRecorder) })
	before := h.committed(topics.GroupRecorder)

	resume := p.stall()
	t.Cleanup(resume)
	slow := attempts(60, "slow")
	h.produce(slow...)
	waitFor(t, 30*time.Second, "an insert to time out", o.sawDown.Load)
	if got := h.committed(topics.GroupRecorder); !mapsEqual(got, before) {
		t.Errorf("committed %v while inserts time out, want %v unchanged", got, before)
	}
	resume()

	all := append(first, slow...)
	h.waitRows(60*time.Second, len(all))
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	checkRows(t, h, all)
	if r.Exited() {
		t.Fatalf("Run returned: %v", r.Err())
	}
	if m := o.maxRecords.Load(); m > 40 {
		t.Errorf("held %d records at once, want at most two batches of 20", m)
	}
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestWaitsForClickHouseAtStart: with ClickHouse unreachable at start the
// recorder waits (consuming and committing nothing), then creates the
// schema and records.
func TestWaitsForClickHouseAtStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := newProxy(t, h.env[schema.EnvClickHouseAddr])
	p.setCut(true)
	h.env[schema.EnvClickHouseAddr] = p.addr()
	as := attempts(30, "late")
	h.produce(as...)
	r := h.start(h.config())
	waitFor(t, 30*time.Second, "two connection attempts", func() bool { return p.refused.Load() >= 2 })
	if got := h.committed(topics.GroupRecorder); len(got) != 0 {
		t.Errorf("committed %v before ClickHouse was reachable", got)
	}
	p.setCut(false)
	h.waitRows(60*time.Second, len(as))
	if r.Exited() {
		t.Fatalf("Run returned: %v", r.Err())
	}
}

// TestReplayDoesNotDoubleCount: a restarted recorder that reads the whole
// topic again (group offsets reset) leaves count() FINAL unchanged; within
// one batch per partition of the committed offsets it does not even insert
// copies, so plain count() and the views stay exact too.
func TestReplayDoesNotDoubleCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		batchRows string
		n         int
		// exact: replayed rows all fall in the checked window.
		exact bool
	}{
		{"within the checked window", "5000", 90, true},
		{"beyond the checked window", "5", 90, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = tc.batchRows
			as := attempts(tc.n, "replay")
			h.produce(as...)
			r := h.start(h.config())
			h.waitRows(60*time.Second, tc.n)
			waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
			r.StopOK(t)

			// Rewind the group to the start of every partition.
			rewind := kadm.Offsets{}
			for p := range int32(partitions) {
				rewind.Add(kadm.Offset{Topic: h.names.Attempts(), Partition: p, At: 0, LeaderEpoch: -1})
			}
			resp, err := h.adm.CommitOffsets(chtest.Ctx(t, 10*time.Second), topics.GroupRecorder, rewind)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatalf("rewinding the group: %v", err)
			}
			if h.committedAll(topics.GroupRecorder) {
				t.Fatal("the group is still committed to the end after the rewind")
			}

			h.start(h.config())
			waitFor(t, 60*time.Second, "the replay to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
			if got := h.count(true); got != uint64(tc.n) {
				t.Errorf("count() FINAL after the replay = %d, want %d", got, tc.n)
			}
			if tc.exact {
				if got := h.count(false); got != uint64(tc.n) {
					t.Errorf("count() without FINAL after the replay = %d, want %d", got, tc.n)
				}
				checkViews(t, h)
				return
			}
			// OPTIMIZE returns without merging while a background merge
			// holds the parts (a busy server): ask again until it merged.
			var got uint64
			waitFor(t, 60*time.Second, "OPTIMIZE FINAL to merge the copies", func() bool {
				if err := h.ch.Exec(chtest.Ctx(t, 30*time.Second), "OPTIMIZE TABLE "+h.db+".attempts FINAL"); err != nil {
					t.Fatal(err)
				}
				got = h.count(false)
				return got <= uint64(tc.n)
			})
			if got != uint64(tc.n) {
				t.Errorf("count() after OPTIMIZE FINAL = %d, want %d: the copies should have merged", got, tc.n)
			}
		})
	}
}

// TestShutdownInsertsTheBatchInHand: canceling Run inserts and commits the
// records read so far, even long before their batch was due.
func TestShutdownInsertsTheBatchInHand(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env["WEBHOOKS_RECORDER_BATCH_WAIT"] = "10m"
	cfg := h.config()
	var o observed
	cfg.observe = o.hook
	r := h.start(cfg)
	as := attempts(10, "shutdown")
	h.produce(as...)
	waitFor(t, 30*time.Second, "the records in hand", func() bool { return o.records.Load() == int64(len(as)) })
	if got := h.count(true); got != 0 {
		t.Fatalf("%d rows inserted before the batch was due", got)
	}
	r.StopOK(t)
	if got := h.count(true); got != uint64(len(as)) {
		t.Errorf("%d rows after shutdown, want %d", got, len(as))
	}
	if !h.committedAll(topics.GroupRecorder) {
		t.Errorf("offsets not committed at shutdown: %v", h.committed(topics.GroupRecorder))
	}
}

// TestRebalanceLosesNothing: recorders joining and leaving the group hand
// partitions over without losing or copying an attempt.
func TestRebalanceLosesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "25"
	var all []topics.Attempt
	add := func(n int, prefix string) {
		as := attempts(n, prefix)
		h.produce(as...)
		all = append(all, as...)
	}
	a := h.start(h.config())
	add(60, "one")
	h.waitRows(60*time.Second, len(all))
	h.start(h.config())
	add(60, "two")
	h.waitRows(60*time.Second, len(all))
	a.StopOK(t)
	add(60, "three")
	h.waitRows(60*time.Second, len(all))
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	if got := h.count(false); got != uint64(len(all)) {
		t.Errorf("count() without FINAL = %d, want %d", got, len(all))
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n     int
		limit time.Duration
		u     float64
		want  time.Duration
	}{
		{1, 5 * time.Second, 0.5, 100 * time.Millisecond},
		{2, 5 * time.Second, 0.5, 200 * time.Millisecond},
		{6, 5 * time.Second, 0.5, 3200 * time.Millisecond},
		{7, 5 * time.Second, 0.5, 5 * time.Second},
		{1000, 5 * time.Second, 0.5, 5 * time.Second},
		{1, 5 * time.Second, 0, 80 * time.Millisecond},
		{1, 5 * time.Second, 0.999999, 119999960 * time.Nanosecond},
		{3, 300 * time.Millisecond, 0.5, 300 * time.Millisecond},
	} {
		if got := backoff(tc.n, tc.limit, tc.u); got.Round(10*time.Nanosecond) != tc.want {
			t.Errorf("backoff(%d, %v, %v) = %v, want %v", tc.n, tc.limit, tc.u, got, tc.want)
		}
	}
}

func TestConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := LoadConfig(env())
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.Group != topics.GroupRecorder || !slices.Equal(c.ClickHouse, []string{"127.0.0.1:9000"}) || c.Database != "webhooks" ||
		c.User != "default" || c.BatchRows != 20000 || c.BatchWait != time.Second || c.RetentionDays != 90 ||
		c.InsertTimeout != 30*time.Second || c.RetryMax != 5*time.Second || c.ShutdownTimeout != 10*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	c, err = LoadConfig(env(schema.EnvClickHouseAddr, "a:1, b:2", schema.EnvClickHouseDatabase, "wh_2", "WEBHOOKS_RECORDER_BATCH_ROWS", "100",
		"WEBHOOKS_RECORDER_BATCH_WAIT", "250ms", "WEBHOOKS_CLICKHOUSE_RETENTION_DAYS", "0", schema.EnvClickHousePassword, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.ClickHouse, []string{"a:1", "b:2"}) || c.Database != "wh_2" || c.BatchRows != 100 ||
		c.BatchWait != 250*time.Millisecond || c.RetentionDays != 0 || c.Password != "pw" {
		t.Errorf("overrides: %+v", c)
	}
	for _, kv := range [][]string{
		{schema.EnvClickHouseAddr, "nohostport"},
		{schema.EnvClickHouseDatabase, "web-hooks"},
		{schema.EnvClickHouseDatabase, "x; DROP TABLE y"},
		{"WEBHOOKS_RECORDER_BATCH_ROWS", "0"},
		{"WEBHOOKS_RECORDER_BATCH_ROWS", "many"},
		{"WEBHOOKS_RECORDER_BATCH_WAIT", "-1s"},
		{"WEBHOOKS_RECORDER_BATCH_WAIT", "soon"},
		{"WEBHOOKS_RECORDER_INSERT_TIMEOUT", "0s"},
		{"WEBHOOKS_RECORDER_RETRY_MAX", "1ms"},
		{"WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT", "0s"},
		{"WEBHOOKS_CLICKHOUSE_RETENTION_DAYS", "-1"},
		{"WEBHOOKS_RECORDER_GROUP", ""},
	} {
		if kv[1] == "" {
			continue // getenv cannot tell unset from empty
		}
		if _, err := LoadConfig(env(kv...)); err == nil {
			t.Errorf("%s=%q accepted", kv[0], kv[1])
		}
	}
}

// httpGet returns the status and body, or status 0 when nothing answers.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
