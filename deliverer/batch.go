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
// repeats the batch's one request. A batch of an ordered subscription
// holds each key it carries with its outcome, as a single ordered delivery
// holds its own (orderedBatch).

// member is one decoded record of a batch.
type member struct {
	rec *kgo.Record
	del *topics.Delivery
}

// handleBatch does what a batch asks and calls done once, with whether
// everything its records caused was acknowledged. A batch of a
// subscription that no longer batches (deleted, disabled, changed) is
// handled record by record instead (singly); one holding a record on the
// ordered path, by orderedBatch.
func (d *deliverer) handleBatch(ctx context.Context, it *lanes.Item, rng *rand.Rand, done func(bool)) {
	sub, found, ok := d.subscription(ctx, string(topics.SubscriptionOfKey(it.Rec.Key)))
	if !ok {
		done(false) // shutting down: left for the next owner
		return
	}
	if !found || !sub.Enabled || sub.Batch == nil {
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
	if slices.ContainsFunc(ms, func(m member) bool { return d.isOrdered(ctx, sub, m) }) {
		d.orderedBatch(ctx, it, sub, ms, recs, rng, done)
		return
	}
	if len(ms) > 0 {
		f, extra, v := d.attemptBatch(ctx, sub, ms, rng)
		if v == cut {
			done(false)
			return
		}
		for _, m := range ms {
			recs = append(recs, d.memberRecords(ctx, m, f)...)
		}
		recs = append(recs, extra...)
	}
	d.lanes.Sent(it)
	d.produceThen(ctx, recs, done)
}

// isOrdered tells whether a record of a batch is on the ordered path, as
// handle decides for a single one: it has an ordering key, and its
// subscription orders by key or its key is held since it did.
func (d *deliverer) isOrdered(ctx context.Context, sub *topics.Subscription, m member) bool {
	return m.del.Key != "" && (sub.Ordering == topics.OrderingKey || d.held(ctx, m.rec))
}

// orderedBatch handles a batch some of whose records are on the ordered
// path. Each of those first takes its place in its key's order as a single
// delivery does (place): parked behind its held key, or handled already,
// it leaves the batch. The batch of the others is sent, and its outcome is
// written for each ordered record with its key's hold, as a single
// delivery's (outcome): a failure, or a breaker or rate limit holding the
// batch back, makes each of them its key's head, held until it comes back
// (in the batch, regrouped under its mark) and succeeds or is
// dead-lettered, which releases the key's parked deliveries in order. A
// batch only ever holds one record of a key (only a key's head is ready in
// the lanes), so its keys are independent and are placed and written at
// once. A record whose partition is no longer assigned here makes the
// whole batch go record by record (singly), which leaves that one to the
// next owner.
func (d *deliverer) orderedBatch(ctx context.Context, it *lanes.Item, sub *topics.Subscription, ms []member,
	recs []*kgo.Record, rng *rand.Rand, done func(bool)) {
	type ordered struct {
		ctx  context.Context // with the epoch of its slot (withSlot)
		turn *turn
	}
	ords := make([]ordered, len(ms))
	for i, m := range ms {
		if !d.isOrdered(ctx, sub, m) {
			continue
		}
		var owned bool
		if ords[i].ctx, owned = d.withSlot(ctx, m.rec); !owned {
			d.singly(ctx, it, rng, done)
			return
		}
	}
	d.lanes.Unpaced(it)
	var failed atomic.Bool
	settled := make([]bool, len(ms)) // parked or handled: not in the request
	each(len(ms), func(i int) {
		if ords[i].ctx == nil {
			return
		}
		t, ok := d.place(ords[i].ctx, ms[i].rec, ms[i].del)
		ords[i].turn, settled[i] = t, t == nil
		if !ok {
			failed.Store(true)
		}
	})
	if failed.Load() {
		done(false)
		return
	}
	var send []member
	var sent []ordered
	for i, m := range ms {
		if !settled[i] {
			send, sent = append(send, m), append(sent, ords[i])
		}
	}
	if len(send) > 0 {
		d.lanes.Request(it)
		f, extra, v := d.attemptBatch(ctx, sub, send, rng)
		if v == cut {
			done(false)
			return
		}
		d.lanes.Sent(it)
		recs = append(recs, extra...)
		for i, m := range send {
			if sent[i].turn == nil {
				recs = append(recs, d.memberRecords(ctx, m, f)...)
			}
		}
		each(len(send), func(i int) {
			o, del := sent[i], send[i].del
			if o.turn != nil && !d.outcome(o.ctx, o.turn, del.EventID, d.memberRecords(o.ctx, send[i], f), v, f.nextAttempt(del)) {
				failed.Store(true)
			}
		})
	}
	if failed.Load() {
		done(false)
		return
	}
	d.produceThen(ctx, recs, done)
}

// each runs f(0) ... f(n-1) at once and returns when all have.
func each(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
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
	id    string // the batch's, its webhook-id
	size  int    // its records
	now   time.Time
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

// nextAttempt is the attempt number of the retry f makes of del: the
// batch's next, or del's own when the batch was held back unattempted.
func (f *fate) nextAttempt(del *topics.Delivery) int {
	if f.retry != nil && f.retry.next > 0 {
		return f.retry.next
	}
	return del.Attempt
}

// attemptBatch makes the request of a batch of sub's deliveries and
// returns its fate, the records it causes besides its records' own (the
// subscription disabled), and its verdict: delayed when the
// subscription's breaker or rate limit held it back. The batch's attempt
// number is the highest of its records' (they are one unless due retries
// of different ages were batched) and its retries count from it.
func (d *deliverer) attemptBatch(ctx context.Context, sub *topics.Subscription, ms []member, rng *rand.Rand) (*fate, []*kgo.Record, verdict) {
	now := time.Now()
	ctx = d.tracer.Extract(ctx, ms[0].rec.Headers)
	dels, ids := make([]*topics.Delivery, len(ms)), make([]string, len(ms))
	attempt := 0
	var charges []charge
	for i, m := range ms {
		dels[i], ids[i], attempt = m.del, m.del.EventID, max(attempt, m.del.Attempt)
		charges = chargeOne(charges, m.del.Tenant)
	}
	f := &fate{id: topics.BatchID(ids), size: len(ms), now: now}
	log := d.log.With(zap.String("subscription", sub.ID), zap.String("batch", f.id), zap.Int("events", len(ms)),
		zap.Int("attempt", attempt))
	ticket, hb, ok := d.admit(ctx, sub, charges...)
	if !ok {
		return nil, nil, cut
	}
	if hb != nil {
		wait := min(hb.wait, d.names.Tiers[len(d.names.Tiers)-1])
		f.retry = &batchRetry{due: topics.DueAt(now, wait), tier: d.names.TierFor(wait), category: hb.category}
		f.att.Outcome, f.att.FailureCategory, f.att.NextAttemptAt, f.att.Error = hb.outcome, hb.category, f.retry.due, hb.why
		return f, nil, delayed
	}
	var span trace.Span
	ctx, span = d.tracer.Start(ctx, tracing.SpanAttempt, trace.SpanKindClient)
	defer func() {
		att := f.att
		att.EventID, att.SubscriptionID, att.Attempt = f.id, sub.ID, attempt
		endAttempt(span, &att)
	}()
	var traced []kgo.RecordHeader
	tracing.Carry(ctx, &traced, ms[0].rec.Headers)
	resp, err := d.sendBatch(ctx, sub, dels, traced)
	answered := time.Now()
	if ctx.Err() != nil {
		return nil, nil, cut // shutting down past the budget: redone by the next owner
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
	return f, extra, verdictOf(f)
}

// chargeOne counts one more delivery of tenant in charges, a count per
// tenant in the order they first come.
func chargeOne(charges []charge, tenant string) []charge {
	for i := range charges {
		if charges[i].tenant == tenant {
			charges[i].events++
			return charges
		}
	}
	return append(charges, charge{tenant, 1})
}

// verdictOf is the verdict of a batch's fate.
func verdictOf(f *fate) verdict {
	if f.retry != nil {
		return retried
	}
	return finished
}

// memberRecords are the records a batch's fate makes of one of its
// records: an attempt record naming the batch, and its retry, marked as
// the batch's, or its dead letter.
func (d *deliverer) memberRecords(ctx context.Context, m member, f *fate) []*kgo.Record {
	att := newAttempt(m.del, f.now)
	att.Outcome, att.FailureCategory, att.HTTPStatus, att.DurationMS = f.att.Outcome, f.att.FailureCategory, f.att.HTTPStatus, f.att.DurationMS
	att.Error, att.NextAttemptAt, att.ResponseSample, att.BatchID = f.att.Error, f.att.NextAttemptAt, f.att.ResponseSample, f.id
	recs := []*kgo.Record{d.attemptRecord(ctx, m.rec, &att)}
	switch {
	case f.retry != nil:
		next := *m.del
		next.NotBefore, next.Attempt = f.retry.due, f.nextAttempt(m.del)
		if f.retry.next > 0 && next.FirstAttemptAt.IsZero() {
			next.FirstAttemptAt = f.now
		}
		r := d.retryRecord(ctx, m.rec, &next, f.retry.tier, f.retry.category)
		r.Headers = append(r.Headers, topics.BatchHeader(f.id, f.size))
		recs = append(recs, r)
	case f.dead != nil:
		dl := *f.dead
		dl.Delivery = m.del
		recs = append(recs, d.deadLetter(ctx, m.rec, dl, f.now))
	}
	return recs
}
