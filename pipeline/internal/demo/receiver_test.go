package demo

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestReceiverSplitsRetried: a delivery the receiver refused once and took
// on its second attempt counts as delivered after a retry, with its time
// apart from the first attempts' quantiles.
func TestReceiverSplitsRetried(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	r, err := NewReceiver("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Trust("s", secret); err != nil {
		t.Fatal(err)
	}
	r.FailOneIn = 3 // the third request is refused
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	post := func(id string, published time.Time) int {
		t.Helper()
		body := []byte(`{"id":"` + id + `","type":"t","timestamp":"` + published.Format(time.RFC3339Nano) + `","data":{}}`)
		now := time.Now()
		sig, err := wh.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, r.URL("s"), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now()
	for i, want := range []int{204, 204, 503} {
		if got := post("evt_"+strconv.Itoa(i), now); got != want {
			t.Fatalf("request %d: %d, want %d", i, got, want)
		}
	}
	// evt_2, published a minute ago, is taken on its second attempt.
	if got := post("evt_2", now.Add(-time.Minute)); got != 204 {
		t.Fatalf("evt_2 again: %d", got)
	}
	s := r.Stats()
	if s.Received != 3 || s.Failed != 1 || s.Retried != 1 {
		t.Fatalf("stats %+v: want 3 received, 1 refused, 1 delivered after a retry", s)
	}
	if s.P99 >= time.Minute || s.RetriedP50 < time.Minute {
		t.Fatalf("first attempts p99 %v, after a retry p50 %v: the retried delivery's minute belongs to the second only", s.P99, s.RetriedP50)
	}
}
