package send

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/endpointtest"
	"github.com/hookpipe/hookpipe/topics"
)

var (
	testCtx = testkit.Ctx
	verify  = endpointtest.Verify
)

// newSub returns a valid subscription posting to url with a fresh secret.
func newSub(tb testing.TB, id, url string) topics.Subscription {
	secret, err := topics.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	return topics.Subscription{ID: id, URL: url, EventTypes: []string{"*"}, Enabled: true, Secret: secret}
}

// newDelivery is the first attempt of an event for a subscription.
func newDelivery(sub, eventID string) topics.Delivery {
	return topics.Delivery{
		SubscriptionID: sub, EventID: eventID, EventType: "order.created",
		Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{"n":1}`), Attempt: 1,
		PublishedAt: time.Now().UTC(),
	}
}

// received is one request as the endpoint saw it.
type received struct {
	method, uri string
	header      http.Header
	body        []byte
}

// receiver is an endpoint that records every request and answers with
// handle (200 when nil).
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newReceiver(tb testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, received{method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: body})
		rc.mu.Unlock()
		if handle != nil {
			handle(w, r, body)
		}
	}))
	tb.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hooks" }

// waitRequest is the first request for eventID, once it came.
func (rc *receiver) waitRequest(tb testing.TB, eventID string) received {
	tb.Helper()
	var got received
	testkit.WaitFor(tb, 20*time.Second, "a request for "+eventID, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, r := range rc.reqs {
			if r.header.Get("webhook-id") == eventID {
				got = r
				return true
			}
		}
		return false
	})
	return got
}
