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
	// first and retried are publish-to-receipt times of deliveries taken
	// at their first attempt and after a retry, apart: a retry waits for
	// its tier (seconds), which would hide the first attempts' tail.
	first, retried ring
	refused        map[string]bool // "<subscription>/<webhook-id>" answered 503, not yet taken
	retriedN       atomic.Int64

	srv *http.Server
	ln  net.Listener
}

// NewReceiver listens on addr ("127.0.0.1:0" for any port).
func NewReceiver(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{verifiers: map[string]*standardwebhooks.Webhook{}, refused: map[string]bool{}, ln: ln}
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
	key := sub + "/" + req.Header.Get("webhook-id")
	if r.FailOneIn > 0 && n%r.FailOneIn == 0 {
		r.failed.Add(1)
		r.mu.Lock()
		r.refused[key] = true
		r.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var msg struct {
		Timestamp time.Time `json:"timestamp"`
	}
	r.mu.Lock()
	again := r.refused[key]
	delete(r.refused, key)
	if json.Unmarshal(body, &msg) == nil && !msg.Timestamp.IsZero() {
		if again {
			r.retried.add(time.Since(msg.Timestamp))
		} else {
			r.first.add(time.Since(msg.Timestamp))
		}
	}
	r.mu.Unlock()
	if again {
		r.retriedN.Add(1)
	}
	r.received.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// ring keeps the last 4096 durations.
type ring struct {
	d    []time.Duration
	next int
}

func (g *ring) add(d time.Duration) {
	if len(g.d) < 4096 {
		g.d = append(g.d, d)
		return
	}
	g.d[g.next] = d
	g.next = (g.next + 1) % len(g.d)
}

// quantiles are the p50 and p99 of the durations kept.
func (g *ring) quantiles() (p50, p99 time.Duration) {
	lat := slices.Clone(g.d)
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[len(lat)*50/100], lat[len(lat)*99/100]
}

// Stats is what the receiver saw.
type Stats struct {
	Received, Invalid, Failed int64
	// Retried counts the deliveries taken after this receiver had refused
	// them once.
	Retried int64
	// P50 and P99 are over the last 4096 deliveries taken at their first
	// attempt, RetriedP50 over the last 4096 taken after a retry.
	P50, P99, RetriedP50 time.Duration
}

// Stats returns the counts and recent latency quantiles.
func (r *Receiver) Stats() Stats {
	s := Stats{Received: r.received.Load(), Invalid: r.invalid.Load(), Failed: r.failed.Load(), Retried: r.retriedN.Load()}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.P50, s.P99 = r.first.quantiles()
	s.RetriedP50, _ = r.retried.quantiles()
	return s
}

// Close stops the server.
func (r *Receiver) Close() error { return r.srv.Close() }
