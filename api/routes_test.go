package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// TestTenantIsolation: with tenant A's key, every route on tenant B's
// subscription answers 404 (never 403) and changes nothing; lists never
// include B's; admin routes answer 403; A cannot publish or create for B.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	keyA, keyB := r.tenantKey("acme"), r.tenantKey("globex")
	var subA, subB service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", keyA, map[string]any{"url": "https://a.example/hooks", "event_types": []string{"*"}}, &subA)
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", keyB, map[string]any{"url": "https://b.example/hooks", "event_types": []string{"*"}}, &subB)
	if subA.Tenant != "acme" || subB.Tenant != "globex" {
		t.Fatalf("tenant keys created subscriptions of tenants %q and %q", subA.Tenant, subB.Tenant)
	}
	var opB service.Operation
	r.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", keyB, map[string]any{}, &opB)
	before := len(c.records(c.names.Subscriptions()))
	path := "/v1/subscriptions/" + subB.ID
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"GET", path, nil},
		{"PATCH", path, map[string]any{"url": "https://evil.example/"}},
		{"DELETE", path, nil},
		{"POST", path + "/enable", nil},
		{"POST", path + "/disable", map[string]any{"reason": "x"}},
		{"POST", path + "/rotate-secret", nil},
		{"GET", path + "/health", nil},
		{"POST", path + "/breaker", map[string]any{"action": "reset"}},
		{"POST", path + "/test", nil},
		{"POST", "/v1/dlq/redrive", map[string]any{"subscription_id": subB.ID}},
		{"POST", "/v1/replays", map[string]any{"subscription_id": subB.ID, "since": time.Now().Add(-time.Hour)}},
		{"GET", "/v1/operations/" + opB.ID, nil},
	} {
		if a := r.do(tc.method, tc.path, keyA, tc.body); a.status != http.StatusNotFound {
			t.Errorf("%s %s with another tenant's key: %d %s, want 404", tc.method, tc.path, a.status, a.body)
		}
	}
	if n := len(c.records(c.names.Subscriptions())); n != before {
		t.Errorf("%d subscription records written by another tenant's requests", n-before)
	}
	var ops service.ListOperationsOutput
	r.must(http.StatusOK, "GET", "/v1/operations", keyA, nil, &ops.Body)
	if len(ops.Body.Data) != 0 {
		t.Errorf("acme lists %d operations, none of them its own", len(ops.Body.Data))
	}
	r.must(http.StatusOK, "GET", "/v1/operations", adminKey, nil, &ops.Body)
	if len(ops.Body.Data) != 1 || ops.Body.Data[0].ID != opB.ID {
		t.Errorf("operations after another tenant's refused requests: %+v, want globex's alone", ops.Body.Data)
	}
	var list subscriptionsOutputBody
	for q, want := range map[string]int{"": 1, "?tenant=globex": 0, "?event_type=order.created": 1, "?enabled=true": 1} {
		r.must(http.StatusOK, "GET", "/v1/subscriptions"+q, keyA, nil, &list)
		for _, s := range list.Data {
			if s.Tenant != "acme" {
				t.Errorf("list%s with acme's key includes %s of %q", q, s.ID, s.Tenant)
			}
		}
		if len(list.Data) != want {
			t.Errorf("list%s with acme's key: %d subscriptions, want %d (acme's own)", q, len(list.Data), want)
		}
	}
	r.must(http.StatusOK, "GET", "/v1/subscriptions", adminKey, nil, &list)
	if len(list.Data) != 2 {
		t.Errorf("the admin lists %d subscriptions, want both tenants'", len(list.Data))
	}
	for _, tc := range []struct{ method, path string }{{"GET", "/v1/api-keys"}, {"POST", "/v1/api-keys"}, {"DELETE", "/v1/api-keys/key_x"}} {
		if a := r.do(tc.method, tc.path, keyA, map[string]any{}); a.status != http.StatusForbidden {
			t.Errorf("%s %s with a tenant key: %d, want 403", tc.method, tc.path, a.status)
		}
	}
	wantField := func(a answer, status int, loc string) {
		t.Helper()
		var p problem
		a.decode(t, &p)
		if a.status != status || len(p.Errors) == 0 || p.Errors[0].Location != loc {
			t.Errorf("answer %d %s, want %d naming %s", a.status, a.body, status, loc)
		}
	}
	wantField(r.do("POST", "/v1/events", keyA, map[string]any{"type": "a", "tenant": "globex", "data": 1}), 422, "body.tenant")
	wantField(r.do("POST", "/v1/subscriptions", keyA, map[string]any{"url": "https://x.example/", "event_types": []string{"*"}, "tenant": "globex"}), 422, "body.tenant")
	wantField(r.do("PATCH", "/v1/subscriptions/"+subA.ID, keyA, map[string]any{"tenant": "globex"}), 422, "body.tenant")
}

// subscriptionsOutputBody is the body of a list.
type subscriptionsOutputBody struct {
	Data       []service.Subscription `json:"data"`
	NextCursor string                 `json:"next_cursor"`
}

// TestRevokedKeyRefusedEverywhere: a key revoked on one replica is refused
// by another; an unknown or missing key is refused by every route.
func TestRevokedKeyRefusedEverywhere(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	one, two := c.replica(), c.replica()
	var k APIKey
	one.must(http.StatusCreated, "POST", "/v1/api-keys", adminKey, map[string]string{"tenant": "acme"}, &k)
	testkit.WaitFor(t, 10*time.Second, "the second replica to accept the new key", func() bool {
		return two.do("GET", "/v1/subscriptions", k.Key, nil).status == http.StatusOK
	})
	one.must(http.StatusNoContent, "DELETE", "/v1/api-keys/"+k.ID, adminKey, nil, nil)
	if a := one.do("GET", "/v1/subscriptions", k.Key, nil); a.status != http.StatusUnauthorized {
		t.Fatalf("the revoking replica answers %d to the revoked key, want 401", a.status)
	}
	testkit.WaitFor(t, 10*time.Second, "the second replica to refuse the revoked key", func() bool {
		return two.do("GET", "/v1/subscriptions", k.Key, nil).status == http.StatusUnauthorized
	})
	var keys struct{ Data []APIKey }
	one.must(http.StatusOK, "GET", "/v1/api-keys", adminKey, nil, &keys)
	if len(keys.Data) != 1 || keys.Data[0].RevokedAt == nil || keys.Data[0].Key != "" {
		t.Fatalf("listed keys %+v, want the one, revoked, without its key", keys.Data)
	}
	n := 0
	for path, item := range one.s.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{"GET": item.Get, "POST": item.Post, "PATCH": item.Patch, "DELETE": item.Delete} {
			if op == nil {
				continue
			}
			n++
			p := strings.ReplaceAll(path, "{id}", "x")
			for _, key := range []string{"", "hpk_nope", k.Key} {
				if a := one.do(method, p, key, map[string]any{}); a.status != http.StatusUnauthorized || !strings.HasPrefix(a.ctype, "application/problem+json") {
					t.Errorf("%s %s with key %q: %d %s, want a 401 problem", method, p, key, a.status, a.ctype)
				}
			}
		}
	}
	if n < 13 {
		t.Fatalf("checked %d operations, want every one (13)", n)
	}
}

// TestReadYourWrites: what one replica wrote, another answers at once,
// without waiting: a GET reads its tables up to the end first.
func TestReadYourWrites(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	one, two := c.replica(), c.replica()
	var s service.Subscription
	one.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"order.*"}}, &s)
	if !strings.HasPrefix(s.Secret, topics.SecretPrefix) {
		t.Fatalf("create answered secret %q, want the new secret", s.Secret)
	}
	var got service.Subscription
	two.must(http.StatusOK, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, &got)
	if got.URL != s.URL || got.Secret != "" {
		t.Fatalf("the other replica read %+v", got)
	}
	one.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"url": "https://b.example/", "timeout_ms": 5000}, nil)
	two.must(http.StatusOK, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, &got)
	if got.URL != "https://b.example/" || got.TimeoutMS != 5000 || !slices.Equal(got.EventTypes, []string{"order.*"}) {
		t.Fatalf("after PATCH the other replica read %+v", got)
	}
	var rotated service.Subscription
	one.must(http.StatusOK, "POST", "/v1/subscriptions/"+s.ID+"/rotate-secret", adminKey, nil, &rotated)
	if rotated.Secret == "" || rotated.Secret == s.Secret {
		t.Fatalf("rotate-secret answered %q", rotated.Secret)
	}
	one.must(http.StatusOK, "POST", "/v1/subscriptions/"+s.ID+"/disable", adminKey, map[string]string{"reason": "maintenance"}, nil)
	two.must(http.StatusOK, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, &got)
	if got.Enabled || got.DisabledReason != "maintenance" {
		t.Fatalf("after disable the other replica read %+v", got)
	}
	one.must(http.StatusNoContent, "DELETE", "/v1/subscriptions/"+s.ID, adminKey, nil, nil)
	two.must(http.StatusNotFound, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, nil)
}

// TestListPages: the list pages by id with a cursor and filters.
func TestListPages(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	for i := range 5 {
		r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": "sub_" + string(rune('a'+i)),
			"url": "https://a.example/", "event_types": []string{[]string{"order.*", "invoice.paid"}[i%2]}, "enabled": i != 4}, nil)
	}
	var ids []string
	cursor := ""
	for range 10 {
		var page subscriptionsOutputBody
		r.must(http.StatusOK, "GET", "/v1/subscriptions?limit=2&cursor="+cursor, adminKey, nil, &page)
		for _, s := range page.Data {
			ids = append(ids, s.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(ids, []string{"sub_a", "sub_b", "sub_c", "sub_d", "sub_e"}) {
		t.Fatalf("pages gave %v", ids)
	}
	var page subscriptionsOutputBody
	r.must(http.StatusOK, "GET", "/v1/subscriptions?event_type=order.created&enabled=true", adminKey, nil, &page)
	if len(page.Data) != 2 || page.Data[0].ID != "sub_a" || page.Data[1].ID != "sub_c" {
		t.Fatalf("order.created, enabled: %+v", page.Data)
	}
}

// TestBadInput: bad requests answer a problem document naming the field,
// and write nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var s service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": "sub_taken", "url": "https://a.example/", "event_types": []string{"*"}}, &s)
	subsBefore, eventsBefore := len(c.records(c.names.Subscriptions())), len(c.records(c.names.Events()))
	good := func(extra map[string]any) map[string]any {
		b := map[string]any{"url": "https://a.example/", "event_types": []string{"*"}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		loc                string // the first error's location, "" when the answer has none
	}{
		{"not JSON", "POST", "/v1/subscriptions", "{", 400, ""},
		{"unknown field", "POST", "/v1/subscriptions", good(map[string]any{"colour": "red"}), 422, "body.colour"},
		{"bad url", "POST", "/v1/subscriptions", good(map[string]any{"url": "ftp://a.example/"}), 422, "body.url"},
		{"bad pattern", "POST", "/v1/subscriptions", good(map[string]any{"event_types": []string{"order created"}}), 422, "body.event_types"},
		{"bad ordering", "POST", "/v1/subscriptions", good(map[string]any{"ordering": "random"}), 422, "body.ordering"},
		{"bad secret", "POST", "/v1/subscriptions", good(map[string]any{"secret": "whsec_c2hvcnQ="}), 422, "body.secret"},
		{"reserved header", "POST", "/v1/subscriptions", good(map[string]any{"headers": map[string]string{"Webhook-Signature": "x"}}), 422, "body.headers"},
		{"timeout too long", "POST", "/v1/subscriptions", good(map[string]any{"timeout_ms": 600000}), 422, "body.timeout_ms"},
		{"filter does not compile", "POST", "/v1/subscriptions", good(map[string]any{"filter": "data.total >"}), 422, "body.filter"},
		{"filter not a bool", "POST", "/v1/subscriptions", good(map[string]any{"filter": "data.total + 1"}), 422, "body.filter"},
		{"patch filter unknown variable", "PATCH", "/v1/subscriptions/sub_taken", map[string]any{"filter": "amount > 3"}, 422, "body.filter"},
		{"bad id", "POST", "/v1/subscriptions", good(map[string]any{"id": "sub 1"}), 422, "body.id"},
		{"taken id", "POST", "/v1/subscriptions", good(map[string]any{"id": "sub_taken"}), 409, ""},
		{"patch bad url", "PATCH", "/v1/subscriptions/sub_taken", map[string]any{"url": "nope"}, 422, "body.url"},
		{"patch missing", "PATCH", "/v1/subscriptions/sub_nope", map[string]any{"url": "https://a.example/"}, 404, ""},
		{"bad limit", "GET", "/v1/subscriptions?limit=0", nil, 422, "query.limit"},
		{"bad enabled", "GET", "/v1/subscriptions?enabled=maybe", nil, 422, "query.enabled"},
		{"event without type", "POST", "/v1/events", map[string]any{"data": 1}, 422, "body"}, // "expected required property type"
		{"event bad type", "POST", "/v1/events", map[string]any{"type": "a b", "data": 1}, 422, "body.type"},
		{"event null data", "POST", "/v1/events", map[string]any{"type": "a", "data": nil}, 422, "body.data"},
		{"event bad time", "POST", "/v1/events", map[string]any{"type": "a", "data": 1, "created_at": "yesterday"}, 422, "body.created_at"},
		{"event bad priority", "POST", "/v1/events", map[string]any{"type": "a", "data": 1, "priority": "urgent"}, 422, "body.priority"},
		{"event deliver_at not RFC 3339", "POST", "/v1/events", map[string]any{"type": "a", "data": 1, "deliver_at": "tomorrow"}, 422, "body.deliver_at"},
		{"event deliver_at in the past", "POST", "/v1/events", map[string]any{"type": "a", "data": 1, "deliver_at": time.Now().Add(-2 * topics.ScheduleSkew)}, 422, "body.deliver_at"},
		{"event deliver_at over 7 days", "POST", "/v1/events", map[string]any{"type": "a", "data": 1, "deliver_at": time.Now().Add(topics.MaxScheduleAhead + time.Minute)}, 422, "body.deliver_at"},
		{"batch deliver_at over 7 days", "POST", "/v1/events/batch", map[string]any{"events": []any{map[string]any{"type": "a", "data": 1, "deliver_at": time.Now().Add(8 * 24 * time.Hour)}}}, 422, "body.events[0].deliver_at"},
		{"cancel bad event id", "POST", "/v1/events/a%20b/cancel", nil, 422, "path.event_id"},
		{"batch empty", "POST", "/v1/events/batch", map[string]any{"events": []any{}}, 422, "body.events"},
		{"batch one bad", "POST", "/v1/events/batch", map[string]any{"events": []any{map[string]any{"type": "a", "data": 1}, map[string]any{"type": "", "data": 1}}}, 422, "body.events[1].type"},
		{"body too large", "POST", "/v1/events", `{"type":"a","data":"` + strings.Repeat("x", 2<<20) + `"}`, 413, ""},
		{"key tenant bad", "POST", "/v1/api-keys", map[string]any{"tenant": "a b"}, 422, "body.tenant"},
		{"revoke missing key", "DELETE", "/v1/api-keys/key_nope", nil, 404, ""},
		{"key unknown field", "POST", "/v1/api-keys", map[string]any{"colour": "red"}, 422, "body.colour"},
		{"patch unknown field", "PATCH", "/v1/subscriptions/sub_taken", map[string]any{"colour": "red"}, 422, "body.colour"},
		{"event unknown field", "POST", "/v1/events", map[string]any{"type": "a", "data": 1, "colour": "red"}, 422, "body.colour"},
		{"batch unknown field", "POST", "/v1/events/batch", map[string]any{"events": []any{map[string]any{"type": "a", "data": 1, "colour": "red"}}}, 422, "body.events[0].colour"},
		{"disable unknown field", "POST", "/v1/subscriptions/sub_taken/disable", map[string]any{"why": "x"}, 422, "body.why"},
		{"disable reason too long", "POST", "/v1/subscriptions/sub_taken/disable", map[string]any{"reason": strings.Repeat("x", 501)}, 422, "body.reason"},
		{"get missing", "GET", "/v1/subscriptions/sub_nope", nil, 404, ""},
		{"delete missing", "DELETE", "/v1/subscriptions/sub_nope", nil, 404, ""},
		{"enable missing", "POST", "/v1/subscriptions/sub_nope/enable", nil, 404, ""},
		{"disable missing", "POST", "/v1/subscriptions/sub_nope/disable", nil, 404, ""},
		{"rotate missing", "POST", "/v1/subscriptions/sub_nope/rotate-secret", nil, 404, ""},
		{"redrive unknown field", "POST", "/v1/dlq/redrive", map[string]any{"colour": "red"}, 422, "body.colour"},
		{"redrive bad type", "POST", "/v1/dlq/redrive", map[string]any{"event_type": "a b"}, 422, "body.event_type"},
		{"redrive zero rate", "POST", "/v1/dlq/redrive", map[string]any{"rate": 0}, 422, "body.rate"},
		{"redrive bad since", "POST", "/v1/dlq/redrive", map[string]any{"since": "yesterday"}, 422, "body.since"},
		{"redrive since in the future", "POST", "/v1/dlq/redrive", map[string]any{"since": time.Now().Add(time.Hour)}, 422, "body.since"},
		{"redrive missing subscription", "POST", "/v1/dlq/redrive", map[string]any{"subscription_id": "sub_nope"}, 404, ""},
		{"replay without subscription", "POST", "/v1/replays", map[string]any{"since": time.Now()}, 422, "body"},
		{"replay without since", "POST", "/v1/replays", map[string]any{"subscription_id": "sub_taken"}, 422, "body"}, // "expected required property since"
		{"replay rate too high", "POST", "/v1/replays", map[string]any{"subscription_id": "sub_taken", "since": time.Now(), "rate": 1e6}, 422, "body.rate"},
		{"operation missing", "GET", "/v1/operations/op_nope", nil, 404, ""},
		{"operations bad limit", "GET", "/v1/operations?limit=0", nil, 422, "query.limit"},
		{"retry without ClickHouse", "POST", "/v1/messages/evt_1/retry", map[string]any{"subscription_id": "sub_taken"}, 503, ""},
		{"retry unknown field", "POST", "/v1/messages/evt_1/retry", map[string]any{"subscription_id": "sub_taken", "colour": "red"}, 422, "body.colour"},
		{"expunge without ClickHouse", "POST", "/v1/messages/evt_1/expunge", nil, 503, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := r.do(tc.method, tc.path, adminKey, tc.body)
			var p problem
			a.decode(t, &p)
			if a.status != tc.status || !strings.HasPrefix(a.ctype, "application/problem+json") || p.Status != tc.status {
				t.Fatalf("%d %s %s, want a %d problem", a.status, a.ctype, a.body, tc.status)
			}
			if tc.loc != "" && (len(p.Errors) == 0 || p.Errors[0].Location != tc.loc) {
				t.Fatalf("problem %s does not name %s first", a.body, tc.loc)
			}
		})
	}
	if n := len(c.records(c.names.Subscriptions())); n != subsBefore {
		t.Errorf("%d subscription records written by bad requests", n-subsBefore)
	}
	if n := len(c.records(c.names.Events())); n != eventsBefore {
		t.Errorf("%d events written by bad requests", n-eventsBefore)
	}
	if n := len(c.records(c.names.Operations())); n != 0 {
		t.Errorf("%d operations written by bad requests", n)
	}
	if n := len(c.records(c.names.Cancellations())); n != 0 {
		t.Errorf("%d cancellations written by bad requests", n)
	}
	if n := len(c.records(c.names.Deliveries())); n != 0 {
		t.Errorf("%d deliveries written by bad requests", n)
	}
}

// TestPublish: an accepted event is on the events topic once the answer
// comes, keyed by its ordering key on the partition Kafka's partitioner
// gives the key, with the value the dispatcher decodes; a tenant key's
// events are its tenant's.
func TestPublish(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	key := r.tenantKey("acme")
	var out struct{ IDs []string }
	r.must(http.StatusAccepted, "POST", "/v1/events", key, map[string]any{"type": "order.created", "key": "order_42", "data": map[string]int{"n": 1}}, &out)
	r.must(http.StatusAccepted, "POST", "/v1/events/batch", adminKey, map[string]any{"events": []any{
		map[string]any{"id": "evt_b1", "type": "invoice.paid", "tenant": "globex", "data": "x"},
		map[string]any{"id": "evt_b2", "type": "invoice.paid", "key": "order_42", "data": []int{1}},
	}}, nil)
	recs := c.records(c.names.Events())
	if len(recs) != 3 {
		t.Fatalf("%d events on the topic, want 3", len(recs))
	}
	partitions := int32(3)
	byID := map[string]*kgo.Record{}
	for _, rec := range recs {
		e, err := topics.DecodeEvent(rec.Value, 0)
		if err != nil {
			t.Fatalf("the dispatcher would refuse %s: %v", rec.Value, err)
		}
		byID[e.ID] = rec
	}
	first := byID[out.IDs[0]]
	if first == nil {
		t.Fatalf("event %s not on the topic", out.IDs[0])
	}
	var e topics.Event
	if err := json.Unmarshal(first.Value, &e); err != nil || e.Tenant != "acme" || e.Key != "order_42" || string(e.Data) != `{"n":1}` {
		t.Fatalf("published %s (%v), want acme's order_42 with its data", first.Value, err)
	}
	want := int32(kgo.StickyKeyPartitioner(nil).ForTopic(first.Topic).Partition(&kgo.Record{Key: []byte("order_42")}, int(partitions)))
	if string(first.Key) != "order_42" || first.Partition != want || byID["evt_b2"].Partition != want {
		t.Fatalf("key %q on partition %d (and %d), want order_42 on %d", first.Key, first.Partition, byID["evt_b2"].Partition, want)
	}
}

// TestScheduleAndCancel: an event with a deliver_at within 7 days is
// published with it; a cancellation is written keyed by the caller's
// tenant (an administrator's by none), so that a tenant cancels its own
// events only and never writes over another's cancellation.
func TestScheduleAndCancel(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	var out struct{ IDs []string }
	r.must(http.StatusAccepted, "POST", "/v1/events", r.tenantKey("acme"), map[string]any{"type": "a", "data": 1, "deliver_at": at}, &out)
	recs := c.records(c.names.Events())
	if len(recs) != 1 {
		t.Fatalf("%d events on the topic, want 1", len(recs))
	}
	e, err := topics.DecodeEvent(recs[0].Value, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.Schedule(); err != nil || !got.Equal(at) {
		t.Fatalf("published deliver_at %q (%v), want %v", e.DeliverAt, err, at)
	}
	var cancelled struct {
		EventID     string    `json:"event_id"`
		CancelledAt time.Time `json:"cancelled_at"`
	}
	r.must(http.StatusAccepted, "POST", "/v1/events/"+out.IDs[0]+"/cancel", r.tenantKey("acme"), nil, &cancelled)
	r.must(http.StatusAccepted, "POST", "/v1/events/"+out.IDs[0]+"/cancel", adminKey, nil, nil)
	if cancelled.EventID != out.IDs[0] || cancelled.CancelledAt.IsZero() {
		t.Fatalf("cancel answered %+v", cancelled)
	}
	var keys []string
	for _, rec := range c.records(c.names.Cancellations()) {
		cn, err := topics.DecodeCancellation(string(rec.Key), rec.Value)
		if err != nil || cn.EventID != out.IDs[0] {
			t.Fatalf("cancellation %s: %+v, %v", rec.Key, cn, err)
		}
		keys = append(keys, string(rec.Key))
	}
	// The two keys may land on different partitions: read back in any order.
	slices.Sort(keys)
	if want := []string{"/" + out.IDs[0], "acme/" + out.IDs[0]}; !slices.Equal(keys, want) {
		t.Fatalf("cancellations keyed %q, want %q", keys, want)
	}
}

// TestSubscriptionFilter: a filter is stored as given, shown, and removed
// by an empty one; the compiler's message names what is wrong.
func TestSubscriptionFilter(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var s service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"order.*"},
		"filter": `data.total > 100 && "vip" in data.tags`}, &s)
	r.must(http.StatusOK, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, &s)
	if s.Filter != `data.total > 100 && "vip" in data.tags` {
		t.Fatalf("stored filter %q", s.Filter)
	}
	var cleared service.Subscription
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"filter": ""}, &cleared)
	if cleared.Filter != "" || cleared.ID != s.ID {
		t.Fatalf("filter after removing it: %q", cleared.Filter)
	}
	a := r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"filter": "amount > 3"})
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(string(a.body), "undeclared reference to 'amount'") {
		t.Fatalf("a filter over an unknown variable: %d %s", a.status, a.body)
	}
}

// TestSubscriptionPartitions: a subscription spreads over the partitions
// it is given (1 to 64, shown as 1 when not given), and back to one.
func TestSubscriptionPartitions(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var s service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"*"}}, &s)
	if s.Partitions != 1 {
		t.Fatalf("partitions of a new subscription: %d, want 1", s.Partitions)
	}
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"partitions": 4}, &s)
	r.must(http.StatusOK, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, &s)
	if s.Partitions != 4 {
		t.Fatalf("partitions after setting 4: %d", s.Partitions)
	}
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"partitions": 1}, &s)
	if s.Partitions != 1 {
		t.Fatalf("partitions after setting 1: %d", s.Partitions)
	}
	for _, n := range []int{0, 65} {
		if a := r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"partitions": n}); a.status != http.StatusUnprocessableEntity ||
			!strings.Contains(string(a.body), "body.partitions") {
			t.Fatalf("partitions %d: %d %s", n, a.status, a.body)
		}
	}
}

// TestSubscriptionBatch: a subscription batches as it is told, ordered by
// key or not, is refused a batch out of bounds (422 naming the field), and
// stops batching with max_events 0.
func TestSubscriptionBatch(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var s service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"*"},
		"batch": map[string]any{"max_events": 100, "max_wait_ms": 500}}, &s)
	r.must(http.StatusOK, "GET", "/v1/subscriptions/"+s.ID, adminKey, nil, &s)
	if s.Batch == nil || *s.Batch != (service.Batch{MaxEvents: 100, MaxWaitMS: 500}) {
		t.Fatalf("batch %+v, want 100 events, 500 ms", s.Batch)
	}
	a := r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"batch": map[string]any{"max_events": 1, "max_wait_ms": 500}})
	var p problem
	a.decode(t, &p)
	if a.status != http.StatusUnprocessableEntity || len(p.Errors) == 0 || p.Errors[0].Location != "body.batch.max_events" {
		t.Errorf("a batch of one: answer %d %s, want 422 naming body.batch.max_events", a.status, a.body)
	}
	var ordered service.Subscription
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"ordering": "key"}, &ordered)
	if ordered.Batch == nil || ordered.Ordering != "key" {
		t.Fatalf("ordering key: batch %+v, ordering %q; want both", ordered.Batch, ordered.Ordering)
	}
	var unbatched service.Subscription
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"batch": map[string]any{"max_events": 0}}, &unbatched)
	if unbatched.Batch != nil {
		t.Fatalf("batch %+v after max_events 0, want none", unbatched.Batch)
	}
}

// TestSubscriptionAuth: endpoint auth is shown without its secrets (they
// are sealed at rest: topics.TestAuthSealed), refused when incomplete, and
// removed with type none.
func TestSubscriptionAuth(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var s service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"*"},
		"auth": map[string]any{"type": "basic", "username": "hooks", "password": "correct-horse-battery"}}, &s)
	a := r.do("GET", "/v1/subscriptions/"+s.ID, adminKey, nil)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"auth":{"type":"basic","username":"hooks"}`) ||
		strings.Contains(string(a.body), "correct-horse") {
		t.Fatalf("GET: %d %s", a.status, a.body)
	}
	if a := r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"auth": map[string]any{"type": "bearer"}}); a.status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(a.body), "body.auth.token") {
		t.Fatalf("bearer without a token: %d %s", a.status, a.body)
	}
	a = r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"auth": map[string]any{"type": "oauth2",
		"token_url": "https://auth.example/token", "client_id": "hookpipe", "client_secret": "cs_correct-horse", "scopes": []string{"hooks:write"}}})
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"auth":{"type":"oauth2","token_url":"https://auth.example/token","client_id":"hookpipe","scopes":["hooks:write"]}`) ||
		strings.Contains(string(a.body), "correct-horse") {
		t.Fatalf("oauth2: %d %s", a.status, a.body)
	}
	cert := testcert.New(t, "hookpipe-client")
	a = r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"auth": map[string]any{"type": "mtls",
		"certificate": string(cert.CertPEM), "key": string(cert.KeyPEM)}})
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"certificate_subject":"CN=hookpipe-client"`) ||
		strings.Contains(string(a.body), "PRIVATE KEY") || strings.Contains(string(a.body), "BEGIN CERTIFICATE") {
		t.Fatalf("mtls: %d %s", a.status, a.body)
	}
	if a := r.do("PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"auth": map[string]any{"type": "mtls",
		"certificate": string(cert.CertPEM), "key": string(testcert.New(t, "other").KeyPEM)}}); a.status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(a.body), "body.auth.certificate") {
		t.Fatalf("mtls with a key of another certificate: %d %s", a.status, a.body)
	}
	var cleared service.Subscription
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+s.ID, adminKey, map[string]any{"auth": map[string]any{"type": "none"}}, &cleared)
	if cleared.Auth != nil {
		t.Fatalf("auth after removing it: %+v", cleared.Auth)
	}
}

// TestTenantSubscriptionLimit: a tenant has at most
// WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS subscriptions, or its own limit from the
// tenants topic; a create past it, or a move into a full tenant, is refused
// with a message naming the limit; other tenants are not affected.
func TestTenantSubscriptionLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	three := 3
	big := topics.Tenant{ID: "big", MaxSubscriptions: &three, UpdatedAt: time.Now()}
	if err := c.cl.ProduceSync(testkit.Ctx(t, 10*time.Second), &kgo.Record{Topic: c.names.Tenants(), Key: []byte("big"), Value: big.Encode()}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	env := maps.Clone(c.env)
	env["WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS"] = "2"
	r := c.replicaWith(env)
	create := func(tenant string) answer {
		return r.do("POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"*"}, "tenant": tenant})
	}
	for i, tc := range []struct {
		tenant string
		status int
	}{
		{"acme", http.StatusCreated}, {"acme", http.StatusCreated}, {"acme", http.StatusUnprocessableEntity},
		{"big", http.StatusCreated}, {"big", http.StatusCreated}, {"big", http.StatusCreated}, {"big", http.StatusUnprocessableEntity},
		{"", http.StatusCreated}, {"", http.StatusCreated}, {"", http.StatusCreated},
	} {
		a := create(tc.tenant)
		if a.status != tc.status {
			t.Fatalf("create %d for tenant %q: %d %s, want %d", i, tc.tenant, a.status, a.body, tc.status)
		}
		if a.status == http.StatusUnprocessableEntity && !strings.Contains(string(a.body), "has 2 subscriptions, its limit") &&
			!strings.Contains(string(a.body), "has 3 subscriptions, its limit") {
			t.Fatalf("refusal: %s", a.body)
		}
	}
	var other service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": "https://a.example/", "event_types": []string{"*"}, "tenant": "other"}, &other)
	if a := r.do("PATCH", "/v1/subscriptions/"+other.ID, adminKey, map[string]any{"tenant": "acme"}); a.status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(a.body), "body.tenant") {
		t.Fatalf("moving a subscription into a full tenant: %d %s", a.status, a.body)
	}
	if a := r.do("PATCH", "/v1/subscriptions/"+other.ID, adminKey, map[string]any{"url": "https://b.example/"}); a.status != http.StatusOK {
		t.Fatalf("changing a subscription of a tenant with room: %d %s", a.status, a.body)
	}
}
