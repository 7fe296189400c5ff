// Package demo is the receiving and producing end of `make run`'s demo: an
// HTTP receiver that verifies every signature with the official Standard
// Webhooks library, and a producer publishing events at a steady rate.
package demo

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Receiver accepts webhooks at /hooks/<subscription id>.
type Receiver struct {
	// FailOneIn makes one request in N answer 503, to show retries.
	FailOneIn int64

	received, invalid, failed, requests atomic.Int64

	mu        sync.Mutex
	verifiers map[string]*standardwebhooks.Webhook
	latencies []time.Duration // publish-to-receipt, a ring of the last 4096
	next      int

	srv *http.Server
	ln  net.Listener
}

// NewReceiver listens on addr ("127.0.0.1:0" for any port).
func NewReceiver(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{verifiers: map[string]*standardwebhooks.Webhook{}, ln: ln}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// URL is the endpoint for a subscription.
func (r *Receiver) URL(sub string) string { return "http://" + r.ln.Addr().String() + "/hooks/" + sub }

// Trust registers the signing secret of a subscription.
func (r *Receiver) Trust(sub, secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.verifiers[sub] = wh
	r.mu.Unlock()
	return nil
}

// ServeHTTP verifies and counts one webhook.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	n := r.requests.Add(1)
	sub := strings.TrimPrefix(req.URL.Path, "/hooks/")
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	wh := r.verifiers[sub]
	r.mu.Unlock()
	if wh == nil || wh.Verify(body, req.Header) != nil {
		r.invalid.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.FailOneIn > 0 && n%r.FailOneIn == 0 {
		r.failed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var msg struct {
		Timestamp time.Time `json:"timestamp"`
	}
	if json.Unmarshal(body, &msg) == nil && !msg.Timestamp.IsZero() {
		r.observe(time.Since(msg.Timestamp))
	}
	r.received.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) observe(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.latencies) < 4096 {
		r.latencies = append(r.latencies, d)
		return
	}
	r.latencies[r.next] = d
	r.next = (r.next + 1) % len(r.latencies)
}

// Stats is what the receiver saw.
type Stats struct {
	Received, Invalid, Failed int64
	P50, P99                  time.Duration // over the last 4096 deliveries
}

// Stats returns the counts and recent latency quantiles.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	lat := slices.Clone(r.latencies)
	r.mu.Unlock()
	s := Stats{Received: r.received.Load(), Invalid: r.invalid.Load(), Failed: r.failed.Load()}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.P50 = lat[len(lat)*50/100]
		s.P99 = lat[len(lat)*99/100]
	}
	return s
}

// Close stops the server.
func (r *Receiver) Close() error { return r.srv.Close() }
