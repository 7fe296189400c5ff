package topics

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Bounds of a subscription's batches (ADR 0040).
const (
	MinBatchEvents = 2
	MaxBatchEvents = 1000
	MaxBatchWaitMS = 60_000
)

// Batch asks for a subscription's deliveries in batches: one request whose
// body is a JSON array of up to MaxEvents events, sent once that many are
// ready or MaxWaitMS after the first of them was.
type Batch struct {
	MaxEvents int `json:"max_events"`
	MaxWaitMS int `json:"max_wait_ms"`
}

// MaxWait is how long a batch waits for more events.
func (b *Batch) MaxWait() time.Duration { return time.Duration(b.MaxWaitMS) * time.Millisecond }

// validateBatch checks a subscription's batch: its bounds, and that the
// subscription can take one. A queue destination gets one message per
// event, and a transformation makes one event's request (its URL, method,
// headers). An ordered subscription may batch: a batch holds each key it
// carries, as a single delivery holds its own, when it fails.
func (s *Subscription) validateBatch() error {
	b := s.Batch
	if b == nil {
		return nil
	}
	if b.MaxEvents < MinBatchEvents || b.MaxEvents > MaxBatchEvents {
		return invalid("subscription", "batch.max_events", "%d is not within %d..%d", b.MaxEvents, MinBatchEvents, MaxBatchEvents)
	}
	if b.MaxWaitMS < 1 || b.MaxWaitMS > MaxBatchWaitMS {
		return invalid("subscription", "batch.max_wait_ms", "%d is not within 1..%d", b.MaxWaitMS, MaxBatchWaitMS)
	}
	if !s.Destination.IsHTTP() {
		return invalid("subscription", "batch", "is for HTTP endpoints; a %s destination gets one message per event", s.Destination.Type)
	}
	if s.Transformation != "" {
		return invalid("subscription", "batch", "a transformation shapes the request of one event; drop it to batch")
	}
	for k := range s.Headers {
		if http.CanonicalHeaderKey(k) == "Webhook-Batch" {
			return invalid("subscription", "headers", "%q is set by the deliverer on batches", k)
		}
	}
	return nil
}

// HeaderBatch is set on the retry-tier records of a batch's events:
// "<batch id> <events>". The deliverer gathers records that carry the same
// value into one batch again, so that a failed batch is retried as it was.
const HeaderBatch = "webhooks-batch"

// BatchID is the webhook-id of a batch of events: derived from their ids
// alone, so that the same events sent again, in any order, carry the same
// id, and any other set another.
func BatchID(eventIDs []string) string {
	ids := slices.Clone(eventIDs)
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n"))) // ids are printable, without spaces
	return "batch_" + hex.EncodeToString(sum[:16])
}

// BatchHeader marks a record as one of a batch's n events.
func BatchHeader(id string, n int) kgo.RecordHeader {
	return kgo.RecordHeader{Key: HeaderBatch, Value: []byte(id + " " + strconv.Itoa(n))}
}

// BatchOf reads HeaderBatch: the batch a record belongs to and how many
// events it has; ok is false when absent or malformed.
func BatchOf(headers []kgo.RecordHeader) (id string, n int, ok bool) {
	for _, h := range headers {
		if h.Key != HeaderBatch {
			continue
		}
		id, count, found := strings.Cut(string(h.Value), " ")
		n, err := strconv.Atoi(count)
		if !found || id == "" || err != nil || n < 1 {
			return "", 0, false
		}
		return id, n, true
	}
	return "", 0, false
}
