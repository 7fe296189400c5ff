package send

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

var testCtx = testkit.Ctx

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

// verify checks a request's Standard Webhooks signatures, one per secret.
func verify(tb testing.TB, header http.Header, body []byte, secrets ...string) {
	tb.Helper()
	id, ts := header.Get("webhook-id"), header.Get("webhook-timestamp")
	sigs := strings.Split(header.Get("webhook-signature"), " ")
	if len(sigs) != len(secrets) {
		tb.Fatalf("webhook-signature %q has %d signatures, want %d", header.Get("webhook-signature"), len(sigs), len(secrets))
	}
	for i, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			tb.Fatal(err)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); sigs[i] != want {
			tb.Fatalf("signature %d = %q, want %q (secret %d)", i, sigs[i], want, i)
		}
	}
}
