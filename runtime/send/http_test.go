package send

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/send/internal/sign"
	"github.com/hookpipe/hookpipe/runtime/testkit/endpointtest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestConnectionKept: the pool's connection to an endpoint serves its
// next delivery, whatever a delivery goes through before its request: a
// transformation, an OAuth2 token, or nothing. A request made under a
// context that ended with its delivery left its connection unusable, so a
// transformed delivery opened a connection of its own.
func TestConnectionKept(t *testing.T) {
	t.Parallel()
	const clientSecret = "cs_correct-horse-battery"
	ts := endpointtest.NewTokenServer(t, "hookpipe", clientSecret)
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		name  string
		shape func(*topics.Subscription)
	}{
		{"plain", func(*topics.Subscription) {}},
		{"transformed", func(sub *topics.Subscription) {
			sub.Transformation = `function handler(w) { w.headers["x-shaped"] = "yes"; return w }`
		}},
		{"oauth2", func(sub *topics.Subscription) {
			sub.Auth = &topics.EndpointAuth{Type: topics.AuthOAuth2, TokenURL: ts.Srv.URL + "/token", ClientID: "hookpipe", ClientSecret: clientSecret}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
			}))
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			sub := newSub(t, "sub_"+tc.name, srv.URL+"/hooks")
			tc.shape(&sub)
			const deliveries = 5
			for i := range deliveries {
				d := newDelivery(sub.ID, fmt.Sprintf("evt_%s_%d", tc.name, i))
				if resp, err := s.Send(ctx, &sub, &d, nil); err != nil || resp.Status != http.StatusOK {
					t.Fatalf("delivery %d: %d, %v", i, resp.Status, err)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("%d deliveries one after another opened %d connections, want 1", deliveries, n)
			}
		})
	}
}

// TestRequestHeader: a trace header replaces the subscription's header of
// the same name, whatever its case; the subscription's User-Agent replaces
// ours; auth and the signature's headers are there once each.
func TestRequestHeader(t *testing.T) {
	sub := &topics.Subscription{Headers: map[string]string{"traceparent": "00-old", "x-team": "payments", "User-Agent": "acme/1"}}
	traced := []kgo.RecordHeader{{Key: "Traceparent", Value: []byte("00-new")}}
	fields := requestHeader(request{sub: sub, id: "evt_1", body: []byte("{}")}, []*sign.Key{sign.NewKey([]byte("key"))}, "Bearer t", traced, time.Unix(1700000000, 0))
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

// TestKeyCache: a secret's key is made once and kept, a rotating
// subscription signs with both, and the cache never holds more than
// maxKeys.
func TestKeyCache(t *testing.T) {
	var c keyCache
	cur, _ := topics.NewSecret()
	prev, _ := topics.NewSecret()
	sub := &topics.Subscription{Secret: cur, PreviousSecret: prev, PreviousSecretUntil: time.Unix(2000, 0)}
	keys := c.of(sub, time.Unix(1000, 0))
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("%d keys in the grace period, want 2", len(keys))
	}
	if after := c.of(sub, time.Unix(3000, 0)); len(after) != 1 || after[0] != keys[0] {
		t.Fatal("after the grace period: want the current key alone, the one kept")
	}
	for range maxKeys + 10 {
		s, _ := topics.NewSecret()
		c.key(s)
	}
	if n := len(c.m); n > maxKeys {
		t.Fatalf("%d keys kept, want at most %d", n, maxKeys)
	}
}
