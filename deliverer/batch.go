package deliverer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/deliverer/internal/backoff"
	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// Batches (ADR 0040). The lane of a subscription that batches hands the
// workers batches of its records (lanes.Item.Batch), each one request:
// send.Sender.SendBatch. The batch's outcome is every record's: each gets
// an attempt record naming the batch; a success finishes them all; a
// failure sends each to the same retry tier with the same due time and
// the batch's mark (topics.HeaderBatch), so that they come back together
// and the lane batches them again, as they were, with the same webhook-id;
// a permanent failure or an exhausted schedule dead-letters them all. The
// records stay unfinished until every record the batch caused is
// acknowledged, and the batch holds one of the in-flight slots: a crash
// repeats the batch's one request.

// member is one decoded record of a batch.
type member struct {
	rec *kgo.Record
	del *topics.Delivery
}

// handleBatch does what a batch asks and calls done once, with whether
// everything its records caused was acknowledged. A batch of a
// subscription that no longer batches (deleted, disabled, changed), or
// one holding a record of a key held since its subscription was ordered,
// is handled record by record instead (singly).
func (d *deliverer) handleBatch(ctx context.Context, it *lanes.Item, rng *rand.Rand, done func(bool)) {
	sub, found, ok := d.subscription(ctx, string(topics.SubscriptionOfKey(it.Rec.Key)))
	if !ok {
		done(false) // shutting down: left for the next owner
		return
	}
	if !found || !sub.Enabled || sub.Batch == nil ||
		slices.ContainsFunc(it.Batch, func(m *lanes.Item) bool { return d.held(ctx, m.Rec) }) {
		d.singly(ctx, it, rng, done)
		return
	}
	var ms []member
	var recs []*kgo.Record // dead letters of the records that do not decode
	for _, m := range it.Batch {
		del, dead := d.decode(ctx, m.Rec)
		if dead != nil {
			recs = append(recs, dead)
			continue
		}
		ms = append(ms, member{m.Rec, del})
	}
	if len(ms) > 0 {
		out, v := d.attemptBatch(ctx, sub, ms, rng)
		if v == cut {
			done(false)
			return
		}
		recs = append(recs, out...)
	}
	d.lanes.Sent(it)
	d.produceThen(ctx, recs, done)
}

// singly handles each record of a batch on its own, as handle does one
// record, and calls done once all are. The batch's first record goes last:
// its request frees the batch's request slot (lanes.Sent), which the
// others' requests are made in.
func (d *deliverer) singly(ctx context.Context, it *lanes.Item, rng *rand.Rand, done func(bool)) {
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, m := range append(it.Batch[1:len(it.Batch):len(it.Batch)], it) {
		wg.Add(1)
		d.handle(ctx, m, rng, func(ok bool) {
			if !ok {
				failed.Store(true)
			}
			wg.Done()
		})
	}
	wg.Wait()
	done(!failed.Load())
}

// fate is what becomes of every record of a batch: its attempt record's
// outcome (the fields all share), and a retry or a dead letter.
type fate struct {
	att   topics.Attempt
	retry *batchRetry
	dead  *topics.DeadLetter
}

// batchRetry sends a batch's records to a retry tier, due together.
type batchRetry struct {
	next     int // the attempt number they are for; 0: each keeps its own (delayed unattempted)
	due      time.Time
	tier     time.Duration
	category string
}

// attemptBatch makes the request of a batch of sub's deliveries and
// returns the records it causes, or those that delay it when the
// subscription's breaker or rate limit holds it back. The batch's attempt
// number is the highest of its records' (they are one unless due retries
// of different ages were batched) and its retries count from it.
func (d *deliverer) attemptBatch(ctx context.Context, sub *topics.Subscription, ms []member, rng *rand.Rand) ([]*kgo.Record, verdict) {
	now := time.Now()
	ctx = d.tracer.Extract(ctx, ms[0].rec.Headers)
	dels, ids := make([]*topics.Delivery, len(ms)), make([]string, len(ms))
	attempt := 0
	for i, m := range ms {
		dels[i], ids[i], attempt = m.del, m.del.EventID, max(attempt, m.del.Attempt)
	}
	id := topics.BatchID(ids)
	log := d.log.With(zap.String("subscription", sub.ID), zap.String("batch", id), zap.Int("events", len(ms)),
		zap.Int("attempt", attempt))
	ticket, hb, ok := d.admit(ctx, sub, ms[0].del.Tenant)
	if !ok {
		return nil, cut
	}
	if hb != nil {
		wait := min(hb.wait, d.names.Tiers[len(d.names.Tiers)-1])
		f := fate{retry: &batchRetry{due: topics.DueAt(now, wait), tier: d.names.TierFor(wait), category: hb.category}}
		f.att.Outcome, f.att.FailureCategory, f.att.NextAttemptAt, f.att.Error = hb.outcome, hb.category, f.retry.due, hb.why
		return d.batchRecords(ctx, ms, id, &f, now), delayed
	}
	var span trace.Span
	ctx, span = d.tracer.Start(ctx, tracing.SpanAttempt, trace.SpanKindClient)
	var f fate
	defer func() {
		att := f.att
		att.EventID, att.SubscriptionID, att.Attempt = id, sub.ID, attempt
		endAttempt(span, &att)
	}()
	var traced []kgo.RecordHeader
	tracing.Carry(ctx, &traced, ms[0].rec.Headers)
	resp, err := d.sendBatch(ctx, sub, dels, traced)
	answered := time.Now()
	if ctx.Err() != nil {
		return nil, cut // shutting down past the budget: redone by the next owner
	}
	res := classify.For(sub, resp.Status, err)
	d.settle(ctx, sub, ticket, res)
	f.att = topics.Attempt{HTTPStatus: resp.Status, DurationMS: float64(resp.Duration.Microseconds()) / 1000,
		FailureCategory: res.Category, ResponseSample: send.Redact(resp.Sample, sub, now)}
	if err != nil {
		f.att.Error = send.ErrorText(err)
	} else if res.Action != classify.Success {
		f.att.Error = fmt.Sprintf("endpoint answered %d", resp.Status)
	}
	dead := &topics.DeadLetter{Reason: f.att.Error, FailureCategory: res.Category, HTTPStatus: resp.Status, Attempts: attempt}
	var extra []*kgo.Record
	switch res.Action {
	case classify.Success:
		f.att.Outcome = topics.OutcomeSuccess
		log.Debug("delivered a batch", zap.Int("status", resp.Status), zap.Duration("duration", resp.Duration))
	case classify.Retry:
		schedule, _ := topics.ParseSchedule(sub.RetrySchedule)
		nominal, more := backoff.Next(schedule, attempt)
		if !more {
			f.att.Outcome = topics.OutcomeDead
			log.Warn("dead-lettered a batch: retries exhausted", zap.String("category", res.Category), zap.Int("status", resp.Status))
			extra = d.exhausted(ctx, sub, &f.att, now)
			f.dead = &topics.DeadLetter{Reason: "retries exhausted, last failure " + res.Category + ": " + f.att.Error,
				FailureCategory: topics.FailureExhausted, LastFailureCategory: res.Category, HTTPStatus: resp.Status, Attempts: attempt}
			break
		}
		delay := backoff.Jittered(nominal, rng)
		if wish, ok := backoff.RetryAfter(resp.RetryAfter, answered); ok {
			delay = backoff.Clamp(wish, nominal)
		}
		if res.Category == topics.FailureRateLimited || res.Category == topics.FailureTimeout {
			delay = max(delay, d.cfg.RetryFloor) // an overloaded endpoint gets at least the floor
		}
		f.retry = &batchRetry{next: attempt + 1, due: topics.DueAt(answered, delay), tier: d.names.TierFor(max(nominal, delay)),
			category: res.Category}
		f.att.Outcome, f.att.NextAttemptAt = topics.OutcomeRetry, f.retry.due
		log.Debug("retrying a batch", zap.String("category", res.Category), zap.Int("status", resp.Status), zap.Duration("in", delay))
	case classify.Disable:
		f.att.Outcome = topics.OutcomeDead
		disabled := *sub
		disabled.Enabled = false
		disabled.DisabledReason = "endpoint answered 410 Gone"
		disabled.UpdatedAt = now
		log.Warn("disabling subscription: endpoint answered 410 Gone", zap.String("url", topics.RedactURL(sub.URL)))
		dead.Reason, f.dead = disabled.DisabledReason, dead
		extra = []*kgo.Record{d.subscriptionRecord(&disabled)}
	default:
		f.att.Outcome, f.dead = topics.OutcomeDead, dead
		log.Warn("dead-lettered a batch: permanent failure", zap.String("category", res.Category), zap.Int("status", resp.Status),
			zap.String("url", topics.RedactURL(sub.URL)))
	}
	return append(d.batchRecords(ctx, ms, id, &f, now), extra...), verdictOf(f)
}

// verdictOf is the verdict of a batch's fate.
func verdictOf(f fate) verdict {
	if f.retry != nil {
		return retried
	}
	return finished
}

// batchRecords are the records a batch's fate makes of each of its
// records: an attempt record naming the batch, and its retry, marked as
// the batch's, or its dead letter.
func (d *deliverer) batchRecords(ctx context.Context, ms []member, id string, f *fate, now time.Time) []*kgo.Record {
	recs := make([]*kgo.Record, 0, 2*len(ms))
	for _, m := range ms {
		att := newAttempt(m.del, now)
		att.Outcome, att.FailureCategory, att.HTTPStatus, att.DurationMS = f.att.Outcome, f.att.FailureCategory, f.att.HTTPStatus, f.att.DurationMS
		att.Error, att.NextAttemptAt, att.ResponseSample, att.BatchID = f.att.Error, f.att.NextAttemptAt, f.att.ResponseSample, id
		recs = append(recs, d.attemptRecord(ctx, m.rec, &att))
		switch {
		case f.retry != nil:
			next := *m.del
			next.NotBefore = f.retry.due
			if f.retry.next > 0 {
				next.Attempt = f.retry.next
				if next.FirstAttemptAt.IsZero() {
					next.FirstAttemptAt = now
				}
			}
			r := d.retryRecord(ctx, m.rec, &next, f.retry.tier, f.retry.category)
			r.Headers = append(r.Headers, topics.BatchHeader(id, len(ms)))
			recs = append(recs, r)
		case f.dead != nil:
			dl := *f.dead
			dl.Delivery = m.del
			recs = append(recs, d.deadLetter(ctx, m.rec, dl, now))
		}
	}
	return recs
}
