package deliverer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookpipe/hookpipe/deliverer/internal/backoff"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// verdict is what became of a delivery record.
type verdict int

const (
	// cut: shutdown cut the attempt short; nothing is produced and the
	// record is left for the next owner.
	cut verdict = iota
	// finished: delivered, dead-lettered or skipped.
	finished
	// retried: sent to a retry tier (or spilled there unattempted).
	retried
	// delayed: sent to a retry tier unattempted, attempt number unchanged
	// (circuit breaker open, rate limited).
	delayed
)

// decode decodes a delivery record; an undecodable one yields its dead
// letter instead.
func (d *deliverer) decode(ctx context.Context, rec *kgo.Record) (*topics.Delivery, *kgo.Record) {
	del, err := topics.DecodeDelivery(rec.Value)
	if err != nil {
		d.log.Warn("dead-lettering an undecodable delivery record", zap.Int32("partition", rec.Partition),
			zap.Int64("offset", rec.Offset), zap.Error(err))
		return nil, d.deadLetter(ctx, rec, topics.DeadLetter{
			RawEvent: rec.Value, Reason: err.Error(), FailureCategory: topics.FailureInvalid,
		}, time.Now())
	}
	return &del, nil
}

// subscription returns the current subscription of a delivery (found
// false: deleted). On a miss it catches the table up first (the dispatcher
// saw the subscription; our view may lag), retrying until the broker
// answers, so that a miss is taken for a deletion only once the table is
// known to be current. ok is false only when ctx ended first.
func (d *deliverer) subscription(ctx context.Context, id string) (sub *topics.Subscription, found, ok bool) {
	if sub, found = d.table.Get(id); found {
		return sub, true, true
	}
	if !d.persist(ctx, "catching up on the subscriptions", func() error { return d.table.WaitCaughtUp(ctx) }) {
		return nil, false, false
	}
	sub, found = d.table.Get(id)
	return sub, found, true
}

func newAttempt(del *topics.Delivery, now time.Time) topics.Attempt {
	return topics.Attempt{
		AttemptID: topics.NewAttemptID(), EventID: del.EventID, EventType: del.EventType,
		SubscriptionID: del.SubscriptionID, Tenant: del.Tenant, Attempt: del.Attempt, TS: now,
		PublishedAt: del.PublishedAt,
	}
}

// attempt makes one HTTP attempt of a delivery and returns the records it
// causes: always an attempt record, plus a retry-tier, dlq or subscription
// record as the outcome asks. The caller commits the delivery only once all
// of them are acknowledged. The HTTP attempt is an "attempt" span, a child
// of the trace context rec carries; the records it causes carry the
// span's context (see tracing.Carry), and so does the request.
func (d *deliverer) attempt(ctx context.Context, rec *kgo.Record, del *topics.Delivery, rng *rand.Rand) ([]*kgo.Record, verdict) {
	now := time.Now()
	ctx = d.tracer.Extract(ctx, rec.Headers)
	sub, found, ok := d.subscription(ctx, del.SubscriptionID)
	if !ok {
		return nil, cut
	}
	att := newAttempt(del, now)
	log := attemptLog{d.log, [3]zap.Field{zap.String("subscription", del.SubscriptionID), zap.String("event", del.EventID),
		zap.Int("attempt", del.Attempt)}}
	switch {
	case !found:
		att.Outcome, att.FailureCategory, att.Error = topics.OutcomeSkipped, topics.FailureDeleted, "subscription does not exist"
		log.Debug("skipped: subscription deleted")
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att)}, finished
	case !sub.Enabled:
		// Kept in the dlq so it can be redriven once the subscription is
		// enabled again.
		att.Outcome, att.FailureCategory, att.Error = topics.OutcomeSkipped, topics.FailureDisabled, "subscription is disabled"
		log.Debug("skipped: subscription disabled")
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att), d.deadLetter(ctx, rec, topics.DeadLetter{
			Delivery: del, Reason: att.Error, FailureCategory: topics.FailureDisabled, Attempts: del.Attempt - 1,
		}, now)}, finished
	}

	ticket, held, v, ok := d.gate(ctx, rec, sub, del)
	if !ok {
		return held, v
	}
	var span trace.Span
	ctx, span = d.tracer.Start(ctx, tracing.SpanAttempt, trace.SpanKindClient)
	defer func() { endAttempt(span, &att) }()
	var traced []kgo.RecordHeader // the trace headers of the request
	tracing.Carry(ctx, &traced, rec.Headers)
	resp, err := d.send(ctx, sub, del, traced)
	// Retry-After and the schedule's delays count from the answer (or
	// the timeout), not from when the request was sent.
	answered := time.Now()
	if ctx.Err() != nil {
		// Shutting down past the budget: this attempt does not count, the
		// record is redone by the next owner.
		return nil, cut
	}
	res := classify.For(sub, resp.Status, err)
	d.settle(ctx, sub, ticket, res)
	att.HTTPStatus = resp.Status
	att.DurationMS = float64(resp.Duration.Microseconds()) / 1000
	att.FailureCategory = res.Category
	att.ResponseSample = send.Redact(resp.Sample, sub, now)
	if err != nil {
		att.Error = send.ErrorText(err)
	} else if res.Action != classify.Success {
		att.Error = fmt.Sprintf("endpoint answered %d", resp.Status)
	}
	if del.FirstAttemptAt.IsZero() {
		del.FirstAttemptAt = now
	}

	switch res.Action {
	case classify.Success:
		att.Outcome = topics.OutcomeSuccess
		log.Debug("delivered", zap.Int("status", resp.Status), zap.Duration("duration", resp.Duration))
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att)}, finished
	case classify.Skip:
		att.Outcome = topics.OutcomeSkipped
		log.Debug("skipped: the transformation cancelled it")
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att)}, finished
	case classify.Retry:
		schedule, _ := topics.ParseSchedule(sub.RetrySchedule)
		nominal, more := backoff.Next(schedule, del.Attempt)
		if !more {
			att.Outcome = topics.OutcomeDead
			log.Warn("dead-lettered: retries exhausted", zap.String("category", res.Category), zap.Int("status", resp.Status))
			disable := d.exhausted(ctx, sub, &att, now) // auto-disable
			return append([]*kgo.Record{d.attemptRecord(ctx, rec, &att), d.deadLetter(ctx, rec, topics.DeadLetter{
				// The category says why it is here (topics.FailureExhausted);
				// the reason keeps the last attempt's category and error.
				Delivery: del, Reason: "retries exhausted, last failure " + res.Category + ": " + att.Error,
				FailureCategory: topics.FailureExhausted, LastFailureCategory: res.Category, HTTPStatus: resp.Status, Attempts: del.Attempt,
			}, now)}, disable...), finished
		}
		delay := backoff.Jittered(nominal, rng)
		if wish, ok := backoff.RetryAfter(resp.RetryAfter, answered); ok {
			delay = backoff.Clamp(wish, nominal)
		}
		if res.Category == topics.FailureRateLimited || res.Category == topics.FailureTimeout {
			// An endpoint that is overloaded gets at least the floor.
			delay = max(delay, d.cfg.RetryFloor)
		}
		next := *del
		next.Attempt++
		next.NotBefore = topics.DueAt(answered, delay)
		att.Outcome, att.NextAttemptAt = topics.OutcomeRetry, next.NotBefore
		log.Debug("retrying", zap.String("category", res.Category), zap.Int("status", resp.Status), zap.Duration("in", delay))
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att),
			d.retryRecord(ctx, rec, &next, d.names.TierFor(max(nominal, delay)), res.Category)}, retried
	case classify.Disable:
		att.Outcome = topics.OutcomeDead
		disabled := *sub
		disabled.Enabled = false
		disabled.DisabledReason = "endpoint answered 410 Gone"
		disabled.UpdatedAt = now
		log.Warn("disabling subscription: endpoint answered 410 Gone", zap.String("url", topics.RedactURL(sub.URL)))
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att), d.deadLetter(ctx, rec, topics.DeadLetter{
			Delivery: del, Reason: disabled.DisabledReason, FailureCategory: res.Category,
			HTTPStatus: resp.Status, Attempts: del.Attempt,
		}, now), d.subscriptionRecord(&disabled)}, finished
	default:
		att.Outcome = topics.OutcomeDead
		log.Warn("dead-lettered: permanent failure", zap.String("category", res.Category), zap.Int("status", resp.Status),
			zap.String("url", topics.RedactURL(sub.URL)))
		return []*kgo.Record{d.attemptRecord(ctx, rec, &att), d.deadLetter(ctx, rec, topics.DeadLetter{
			Delivery: del, Reason: att.Error, FailureCategory: res.Category, HTTPStatus: resp.Status, Attempts: del.Attempt,
		}, now)}, finished
	}
}

// spill hands a delivery to the retry path without attempting it and
// without using up its schedule: its subscription already has its queue
// limit of records held here and is too slow to work them off before the
// shortest retry delay would bring this one back. It comes back when the
// subscription should have worked off what it held (wait), at least the
// shortest delay and at most maxSpillDelay later. Sent back after the
// shortest delay every time, a hanging endpoint's backlog would circle
// through the retry tier and the deliveries topic every few seconds,
// taking broker and deliverer time from healthy subscriptions.
func (d *deliverer) spill(ctx context.Context, rec *kgo.Record, del *topics.Delivery, wait time.Duration) []*kgo.Record {
	ctx = d.tracer.Extract(ctx, rec.Headers)
	now := time.Now()
	delay := max(d.names.Tiers[0], min(wait, maxSpillDelay))
	tier := d.names.TierFor(delay)
	next := *del
	next.NotBefore = topics.DueAt(now, delay)
	att := newAttempt(del, now)
	att.Outcome, att.FailureCategory, att.NextAttemptAt = topics.OutcomeBlocked, topics.FailureBusy, next.NotBefore
	att.Error = "subscription has its limit of deliveries queued; spilled to the retry path"
	return []*kgo.Record{d.attemptRecord(ctx, rec, &att), d.retryRecord(ctx, rec, &next, tier, topics.FailureBusy)}
}

// maxSpillDelay bounds how long a spilled record stays away: a pace
// measured while the endpoint hung says little about an hour later.
const maxSpillDelay = time.Hour

// retryRecord sends next, the delivery rec made, to a retry tier: a
// "retry scheduled" span, a child of ctx's, whose context the record
// carries.
func (d *deliverer) retryRecord(ctx context.Context, rec *kgo.Record, next *topics.Delivery, tier time.Duration,
	category string) *kgo.Record {
	r := &kgo.Record{
		Topic:   d.names.Retry(tier),
		Key:     rec.Key,
		Value:   next.Encode(),
		Headers: []kgo.RecordHeader{topics.NotBeforeHeader(next.NotBefore)},
	}
	ctx, span := d.tracer.Start(ctx, tracing.SpanRetryScheduled, trace.SpanKindProducer)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrSubscription.String(next.SubscriptionID), tracing.AttrAttempt.Int(next.Attempt),
			tracing.AttrCategory.String(category), tracing.AttrTier.String(r.Topic),
			tracing.AttrNotBefore.Int64(next.NotBefore.UnixMilli()))
	}
	tracing.Carry(ctx, &r.Headers, rec.Headers)
	span.End()
	return d.m.tallied(r, retries, topics.FormatDelay(tier))
}

// endAttempt ends an attempt span with what the attempt record says; an
// attempt that did not succeed is an error.
func endAttempt(span trace.Span, att *topics.Attempt) {
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrSubscription.String(att.SubscriptionID), tracing.AttrEventID.String(att.EventID),
			tracing.AttrAttempt.Int(att.Attempt), tracing.AttrOutcome.String(att.Outcome),
			tracing.AttrDurationMS.Float64(att.DurationMS))
		if att.HTTPStatus != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(att.HTTPStatus))
		}
		if att.FailureCategory != "" {
			span.SetAttributes(tracing.AttrCategory.String(att.FailureCategory))
		}
		if att.Outcome != topics.OutcomeSuccess {
			span.SetStatus(codes.Error, att.FailureCategory)
		}
	}
	span.End()
}

// attemptRecord is the attempt record of a delivery rec made, carrying the
// trace context of ctx (the attempt span's, when one was made).
func (d *deliverer) attemptRecord(ctx context.Context, rec *kgo.Record, a *topics.Attempt) *kgo.Record {
	r := &kgo.Record{Topic: d.names.Attempts(), Key: []byte(a.SubscriptionID), Value: a.Encode()}
	tracing.Carry(ctx, &r.Headers, rec.Headers)
	return d.m.tallied(r, outcomes, a.Outcome)
}

// deadLetter is the dead letter of rec, carrying the trace context of ctx.
func (d *deliverer) deadLetter(ctx context.Context, rec *kgo.Record, dl topics.DeadLetter, now time.Time) *kgo.Record {
	dl.DeadAt = now
	dl.Source = topics.Source{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	r := &kgo.Record{Topic: d.names.DLQ(), Key: rec.Key, Value: dl.Encode()}
	tracing.Carry(ctx, &r.Headers, rec.Headers)
	return d.m.tallied(r, deadLetters, dl.FailureCategory)
}

func (d *deliverer) subscriptionRecord(s *topics.Subscription) *kgo.Record {
	return &kgo.Record{Topic: d.names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(d.cfg.Secrets)}
}

// attemptLog logs about one attempt with its subscription, event and
// attempt number. Unlike a logger from zap's With, it costs nothing until a
// message is at an enabled level: most attempts log nothing at info, and a
// With per delivery was 2 % of the deployed deliverer's CPU.
type attemptLog struct {
	log    *zap.Logger
	fields [3]zap.Field
}

func (l *attemptLog) Debug(msg string, fields ...zap.Field) { l.write(zap.DebugLevel, msg, fields) }

func (l *attemptLog) Warn(msg string, fields ...zap.Field) { l.write(zap.WarnLevel, msg, fields) }

func (l *attemptLog) write(level zapcore.Level, msg string, fields []zap.Field) {
	if ce := l.log.Check(level, msg); ce != nil {
		ce.Write(append(l.fields[:len(l.fields):len(l.fields)], fields...)...)
	}
}
