package send

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// TestSendBatch: a batch is one request whose body is the array of the
// events' bodies, signed as a whole by the Standard Webhooks rule, with
// the batch id as webhook-id (the same when the same events are sent
// again) and the events' ids in webhook-batch.
func TestSendBatch(t *testing.T) {
	rc := newReceiver(t, nil)
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	defer s.Close()
	sub := newSub(t, "sub_b", rc.url())
	sub.Batch = &topics.Batch{MaxEvents: 10, MaxWaitMS: 100}
	var ds []*topics.Delivery
	for _, id := range []string{"evt_1", "evt,2", "evt_3"} {
		d := newDelivery(sub.ID, id)
		ds = append(ds, &d)
	}
	for range 2 {
		resp, err := s.SendBatch(testCtx(t, 10*time.Second), &sub, ds, nil)
		if err != nil || resp.Status != 200 {
			t.Fatalf("SendBatch = %+v, %v", resp, err)
		}
	}
	id := topics.BatchID([]string{"evt_1", "evt,2", "evt_3"})
	rc.mu.Lock()
	reqs := slices.Clone(rc.reqs)
	rc.mu.Unlock()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if got := r.header.Get("webhook-id"); got != id {
			t.Errorf("webhook-id %q, want the batch id %q both times", got, id)
		}
		if got := r.header.Get(HeaderBatch); got != "evt_1 evt,2 evt_3" {
			t.Errorf("%s: %q, want the ids in order", HeaderBatch, got)
		}
		verify(t, r.header, r.body, sub.Secret)
		var events []struct {
			ID   string          `json:"id"`
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.body, &events); err != nil {
			t.Fatalf("body %s is not an array of events: %v", r.body, err)
		}
		var ids []string
		for i, e := range events {
			ids = append(ids, e.ID)
			if e.Type != "order.created" || string(e.Data) != `{"n":1}` {
				t.Errorf("event %d = %+v", i, e)
			}
		}
		if strings.Join(ids, " ") != "evt_1 evt,2 evt_3" {
			t.Errorf("body's ids %v, want the deliveries' in order", ids)
		}
		if want := "[" + string(body(ds[0])) + "," + string(body(ds[1])) + "," + string(body(ds[2])) + "]"; string(r.body) != want {
			t.Errorf("body\n%s\nwant the single bodies in an array\n%s", r.body, want)
		}
	}
}
