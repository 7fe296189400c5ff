package deliverer

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestRequestHeader: a trace header replaces the subscription's header of
// the same name, whatever its case; the subscription's User-Agent replaces
// ours; auth and the signature's headers are there once each.
func TestRequestHeader(t *testing.T) {
	sub := &topics.Subscription{Headers: map[string]string{"traceparent": "00-old", "x-team": "payments", "User-Agent": "acme/1"}}
	d := &topics.Delivery{EventID: "evt_1"}
	traced := []kgo.RecordHeader{{Key: "Traceparent", Value: []byte("00-new")}}
	fields := requestHeader(sub, d, []byte("{}"), [][]byte{[]byte("key")}, "Bearer t", traced, time.Unix(1700000000, 0))
	h := http.Header{}
	for _, f := range fields {
		h.Add(f.Name, f.Value)
	}
	want := map[string]string{"Traceparent": "00-new", "X-Team": "payments", "User-Agent": "acme/1", "Authorization": "Bearer t",
		"Content-Type": "application/json", "Webhook-Id": "evt_1", "Webhook-Timestamp": "1700000000"}
	for k, v := range want {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want %q alone", k, got, v)
		}
	}
	if len(h.Values("Webhook-Signature")) != 1 || len(h) != len(want)+1 {
		t.Errorf("header %v, want %d fields and one signature", h, len(want)+1)
	}
}
