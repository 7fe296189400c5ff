package send

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// Prober sends a delivery now, the way the deliverer sends deliveries: the
// same HTTP client, SSRF guard, signing and classification. The API's
// test-send uses it. Nothing it does is written to Kafka.
type Prober struct{ s *Sender }

// NewProber returns a prober with the deliverer's HTTP settings.
func NewProber(h HTTP) *Prober {
	return &Prober{s: New(h, Options{MaxInFlight: 16, MaxResponseBytes: 64 << 10})}
}

// ProbeResult is what an endpoint answered.
type ProbeResult struct {
	// Delivered is true for a 2xx.
	Delivered bool
	// Status is the HTTP status; 0 when no answer came.
	Status int
	// Duration is from sending the request to reading the answer.
	Duration time.Duration
	// Category is the failure category the deliverer would record
	// (topics.Failure*); empty when delivered.
	Category string
	// Error says why no answer came (no URL, no secret).
	Error string
	// Body is the first 1 KiB of the answer's body, as text.
	Body string
}

// Probe sends del to sub now, signed with sub's secrets.
func (p *Prober) Probe(ctx context.Context, sub *topics.Subscription, del *topics.Delivery) ProbeResult {
	resp, err := p.s.Send(ctx, sub, del, nil)
	res := classify.For(sub, resp.Status, err)
	out := ProbeResult{Delivered: res.Action == classify.Success, Status: resp.Status, Duration: resp.Duration,
		Body: Redact(resp.Sample, sub, time.Now())}
	if !out.Delivered {
		out.Category = res.Category
	}
	if err != nil {
		out.Error = ErrorText(err)
		if errors.Is(err, context.DeadlineExceeded) {
			out.Error = "no answer within the subscription's timeout"
		}
	}
	return out
}

// Client is the deliverer's HTTP client, SSRF guard and egress proxy
// included, for the API's other requests to URLs tenants give: the alert
// channels'.
func (p *Prober) Client() *http.Client { return p.s.client }
