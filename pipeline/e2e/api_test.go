package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/api"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// apiAdminKey is the bootstrap admin key of the API in these tests.
const apiAdminKey = "hpk_e2e-admin-key-0123456789abcdefghijklmnopqrs"

// startAPI runs the HTTP API in-process on a free 127.0.0.1 port and returns
// its base URL once it answers.
func (e *env) startAPI() string {
	e.t.Helper()
	addr := testkit.FreeAddr(e.t)
	e.vars["WEBHOOKS_API_ADDR"], e.vars["WEBHOOKS_API_ADMIN_KEY"] = addr, apiAdminKey
	cfg, err := api.LoadConfig(e.getenv)
	if err != nil {
		e.t.Fatal(err)
	}
	log := e.logger().Named("a")
	e.run("api", func(ctx context.Context) error { return api.Run(ctx, cfg, log) })
	base := "http://" + addr
	wait(e.t, 30*time.Second, "the API to answer", func() bool {
		resp, err := http.Get(base + "/openapi.json")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// startAllWithClickHouse runs every component, the recorder writing to a
// fresh ClickHouse database, and returns the API's base URL.
func (e *env) startAllWithClickHouse() string {
	e.t.Helper()
	e.clickhouseDB()
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	e.startRecorder()
	return e.startAPI()
}

// call makes an API request that must answer want and decodes the answer.
func call(t testing.TB, method, url, key string, body, out any, want int) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, got, want)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, got)
		}
	}
}

// TestAPIDrivesThePipeline: through HTTP only, an admin creates a tenant
// key; the tenant subscribes an endpoint and publishes events; the
// endpoint receives them signed with the secret the API returned, in
// order for a key; another tenant's event does not reach it. An event the
// endpoint refuses (400) is a dead letter the tenant sees and redrives with
// an operation, which reaches done, and the endpoint, healthy again,
// receives it once; a replay operation sends the subscription's events
// again, each once.
func TestAPIDrivesThePipeline(t *testing.T) {
	e := newEnv(t)
	// The API reads the expunged events there before it redrives.
	e.clickhouseDB()
	e.startDispatcher()
	e.startDeliverer()
	base := e.startAPI()
	r := newReceiver(t)

	var key struct{ Key string }
	call(t, "POST", base+"/v1/api-keys", apiAdminKey, map[string]string{"name": "acme", "tenant": "acme"}, &key, http.StatusCreated)
	var sub struct {
		ID, Secret, Tenant string
	}
	call(t, "POST", base+"/v1/subscriptions", key.Key, map[string]any{"id": "sub_api", "url": r.url("sub_api"),
		"event_types": []string{"order.*"}, "ordering": "key"}, &sub, http.StatusCreated)
	if sub.Tenant != "acme" || sub.Secret == "" {
		t.Fatalf("created %+v", sub)
	}
	r.trust(topics.Subscription{ID: sub.ID, Secret: sub.Secret})

	var ids struct{ IDs []string }
	call(t, "POST", base+"/v1/events/batch", key.Key, map[string]any{"events": []any{
		map[string]any{"type": "order.created", "key": "o1", "data": map[string]int{"n": 1}},
		map[string]any{"type": "order.paid", "key": "o1", "data": map[string]int{"n": 2}},
		map[string]any{"type": "invoice.paid", "data": 3}, // not subscribed
	}}, &ids, http.StatusAccepted)
	call(t, "POST", base+"/v1/events", apiAdminKey, map[string]any{"type": "order.created", "tenant": "globex", "data": 4}, nil, http.StatusAccepted)
	wait(t, 60*time.Second, "the tenant's two order events", func() bool { return r.count() >= 2 })

	got := r.got()
	var order []string
	for _, q := range got {
		order = append(order, q.ID)
	}
	if !slices.Equal(order, ids.IDs[:2]) {
		t.Fatalf("endpoint received %v, want %v in order (globex's event and the invoice never)", order, ids.IDs[:2])
	}
	r.checkSignatures(t)

	r.answer(func(request, http.ResponseWriter) int { return http.StatusBadRequest })
	call(t, "POST", base+"/v1/events", key.Key, map[string]any{"type": "order.refunded", "key": "o2", "data": 5}, &ids, http.StatusAccepted)
	refused := ids.IDs[0]
	var dead struct {
		Data []struct {
			EventID string `json:"event_id"`
		}
	}
	wait(t, 60*time.Second, "the refused event in the tenant's dead letters", func() bool {
		call(t, "GET", base+"/v1/dlq", key.Key, nil, &dead, http.StatusOK)
		return len(dead.Data) == 1 && dead.Data[0].EventID == refused
	})
	r.answer(nil)
	var op struct {
		ID, State  string
		Sent, Done int
	}
	call(t, "POST", base+"/v1/dlq/redrive", key.Key, map[string]any{"rate": 10}, &op, http.StatusAccepted)
	wait(t, 60*time.Second, "the redrive operation done", func() bool {
		call(t, "GET", base+"/v1/operations/"+op.ID, key.Key, nil, &op, http.StatusOK)
		return op.State == topics.OperationDone || op.State == topics.OperationFailed
	})
	if op.State != topics.OperationDone || op.Sent != 1 {
		t.Fatalf("redrive operation: %+v, want done with the one dead letter sent", op)
	}
	wait(t, 60*time.Second, "the redriven event at the endpoint", func() bool { return len(r.got()) >= 3 })
	call(t, "POST", base+"/v1/dlq/redrive", key.Key, map[string]any{}, &op, http.StatusAccepted)
	wait(t, 60*time.Second, "the second redrive operation done", func() bool {
		call(t, "GET", base+"/v1/operations/"+op.ID, key.Key, nil, &op, http.StatusOK)
		return op.State == topics.OperationDone
	})
	if n := r.pairs()["sub_api/"+refused]; n != 1 || op.Sent != 0 {
		t.Fatalf("the redriven event arrived %d times (second redrive sent %d), want once", n, op.Sent)
	}
	call(t, "GET", base+"/v1/dlq", key.Key, nil, &dead, http.StatusOK)
	if len(dead.Data) != 0 {
		t.Fatalf("dead letters after the redrive: %+v", dead.Data)
	}

	// A replay of the subscription's events since the start: the three
	// order events go to it again, each once more, with their ids.
	before := r.pairs()
	call(t, "POST", base+"/v1/replays", key.Key, map[string]any{"subscription_id": "sub_api",
		"since": time.Now().Add(-time.Hour), "rate": 100}, &op, http.StatusAccepted)
	wait(t, 60*time.Second, "the replay operation done", func() bool {
		call(t, "GET", base+"/v1/operations/"+op.ID, key.Key, nil, &op, http.StatusOK)
		return op.State == topics.OperationDone || op.State == topics.OperationFailed
	})
	if op.State != topics.OperationDone || op.Sent != 3 {
		t.Fatalf("replay operation: %+v, want done with the subscription's three events sent", op)
	}
	wait(t, 60*time.Second, "the replayed events at the endpoint", func() bool {
		after := r.pairs()
		for pair, n := range before {
			if after[pair] != n+1 {
				return false
			}
		}
		return len(after) == len(before)
	})
}

// loggedMessage is what the tests read of GET /v1/messages/{event_id}.
type loggedMessage struct {
	Event *struct {
		Data json.RawMessage `json:"data"`
	} `json:"event"`
	Deliveries []struct {
		SubscriptionID string `json:"subscription_id"`
		Status         string `json:"status"`
		Attempts       []struct {
			Outcome        string `json:"outcome"`
			HTTPStatus     int    `json:"http_status"`
			ResponseSample string `json:"response_sample"`
		} `json:"attempts"`
	} `json:"deliveries"`
}

// message reads an event's message log with the admin key; found is false
// while the recorder has stored none of its attempts, or has not yet
// created its tables.
func message(t testing.TB, base, id string) (m loggedMessage, found bool) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/messages/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode >= http.StatusInternalServerError {
		return m, false
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("message %s: %d (%v)", id, resp.StatusCode, err)
	}
	return m, true
}

// TestAPIMessageLog: through HTTP only, with the recorder writing to
// ClickHouse: a delivered event is `delivered` in the message log with the
// endpoint's answer as the response sample and the event as published; an
// event the endpoint keeps failing is `retrying`, then `dead`; a redrive
// operation reaches done, and the event, delivered once, is `delivered`.
func TestAPIMessageLog(t *testing.T) {
	e := newEnv(t)
	base := e.startAllWithClickHouse()
	r := newReceiver(t)
	r.answer(func(request, http.ResponseWriter) int { return http.StatusOK }) // a 204 has no body
	r.reply("thanks")

	var sub struct{ ID, Secret string }
	call(t, "POST", base+"/v1/subscriptions", apiAdminKey, map[string]any{"url": r.url("sub_log"), "id": "sub_log", "tenant": "acme",
		"event_types": []string{"*"}, "retry_schedule": []string{"3s"}}, &sub, http.StatusCreated) // retrying long enough to be seen
	r.trust(topics.Subscription{ID: sub.ID, Secret: sub.Secret})
	var ids struct{ IDs []string }
	call(t, "POST", base+"/v1/events", apiAdminKey, map[string]any{"type": "order.created", "tenant": "acme", "data": map[string]int{"n": 1}},
		&ids, http.StatusAccepted)
	ok := ids.IDs[0]
	var m loggedMessage
	status := func(id string) string {
		var found bool
		if m, found = message(t, base, id); !found {
			return "" // not recorded yet
		}
		if len(m.Deliveries) != 1 {
			t.Fatalf("message %s: %+v", id, m)
		}
		return m.Deliveries[0].Status
	}
	wait(t, 60*time.Second, "the event delivered in the message log", func() bool { return status(ok) == "delivered" })
	if a := m.Deliveries[0].Attempts; len(a) != 1 || a[0].ResponseSample != "thanks" || a[0].HTTPStatus != http.StatusOK ||
		m.Event == nil || string(m.Event.Data) != `{"n":1}` {
		t.Fatalf("delivered message %+v (event %+v)", m, m.Event)
	}

	r.answer(func(request, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	r.reply("down for maintenance")
	call(t, "POST", base+"/v1/events", apiAdminKey, map[string]any{"type": "order.paid", "tenant": "acme", "data": 2}, &ids, http.StatusAccepted)
	failing := ids.IDs[0]
	seen := map[string]bool{}
	wait(t, 60*time.Second, "the failing event retrying, then dead", func() bool {
		seen[status(failing)] = true
		return seen["dead"]
	})
	if !seen["retrying"] {
		t.Errorf("the failing event was never seen retrying before dead")
	}
	if a := m.Deliveries[0].Attempts; len(a) != 2 || a[0].ResponseSample != "down for maintenance" || a[1].Outcome != topics.OutcomeDead {
		t.Fatalf("dead message attempts %+v", a)
	}

	r.answer(nil)
	r.reply("back")
	var op struct{ ID, State string }
	call(t, "POST", base+"/v1/dlq/redrive", apiAdminKey, map[string]any{"subscription_id": "sub_log"}, &op, http.StatusAccepted)
	wait(t, 60*time.Second, "the redrive done and the event delivered", func() bool {
		call(t, "GET", base+"/v1/operations/"+op.ID, apiAdminKey, nil, &op, http.StatusOK)
		return op.State == topics.OperationDone && status(failing) == "delivered"
	})
	if n := r.pairs()["sub_log/"+failing]; n != 1 {
		t.Fatalf("the redriven event was accepted %d times, want once", n)
	}
	r.checkSignatures(t)
}
