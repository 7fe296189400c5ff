package deliverer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/deliverer/internal/backoff"
	"github.com/hookpipe/hookpipe/deliverer/internal/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// attempt handles one delivery record and returns the records it causes:
// always an attempt record, plus a retry-tier, dlq or subscription record as
// the outcome asks. The caller commits the delivery only once all of them
// are acknowledged.
//
// It returns nil when the attempt was cut short by shutdown: nothing is
// produced and the record is left for the next owner.
func (d *deliverer) attempt(ctx context.Context, rec *kgo.Record, rng *rand.Rand) []*kgo.Record {
	now := time.Now()
	del, err := topics.DecodeDelivery(rec.Value)
	if err != nil {
		d.log.Warn("dead-lettering an undecodable delivery record", zap.Int32("partition", rec.Partition),
			zap.Int64("offset", rec.Offset), zap.Error(err))
		return []*kgo.Record{d.deadLetter(rec, topics.DeadLetter{
			RawEvent: rec.Value, Reason: err.Error(), FailureCategory: topics.FailureInvalid,
		}, now)}
	}
	sub, ok := d.table.Get(del.SubscriptionID)
	if !ok {
		// The dispatcher saw this subscription; our view may be behind.
		if err := d.table.WaitCaughtUp(ctx); err == nil {
			sub, ok = d.table.Get(del.SubscriptionID)
		}
	}
	att := topics.Attempt{
		AttemptID: topics.NewAttemptID(), EventID: del.EventID, EventType: del.EventType,
		SubscriptionID: del.SubscriptionID, Tenant: del.Tenant, Attempt: del.Attempt, TS: now,
		PublishedAt: del.PublishedAt,
	}
	log := d.log.With(zap.String("subscription", del.SubscriptionID), zap.String("event", del.EventID),
		zap.Int("attempt", del.Attempt))
	switch {
	case !ok:
		att.Outcome, att.FailureCategory, att.Error = topics.OutcomeSkipped, topics.FailureDeleted, "subscription does not exist"
		log.Debug("skipped: subscription deleted")
		return []*kgo.Record{d.attemptRecord(&att)}
	case !sub.Enabled:
		// Kept in the dlq so it can be redriven once the subscription is
		// enabled again.
		att.Outcome, att.FailureCategory, att.Error = topics.OutcomeSkipped, topics.FailureDisabled, "subscription is disabled"
		log.Debug("skipped: subscription disabled")
		return []*kgo.Record{d.attemptRecord(&att), d.deadLetter(rec, topics.DeadLetter{
			Delivery: &del, Reason: att.Error, FailureCategory: topics.FailureDisabled, Attempts: del.Attempt - 1,
		}, now)}
	}

	keys := make([][]byte, 0, 2)
	for _, s := range sub.Secrets(now) {
		if k, err := topics.DecodeSecret(s); err == nil { // the table holds validated subscriptions only
			keys = append(keys, k)
		}
	}
	resp, err := d.sender.send(ctx, sub, &del, keys)
	if ctx.Err() != nil {
		// Shutting down past the budget: this attempt does not count, the
		// record is redone by the next owner.
		return nil
	}
	res := classify.Classify(resp.status, err)
	att.HTTPStatus = resp.status
	att.DurationMS = float64(resp.duration.Microseconds()) / 1000
	att.FailureCategory = res.Category
	if err != nil {
		att.Error = errorText(err)
	} else if res.Action != classify.Success {
		att.Error = fmt.Sprintf("endpoint answered %d", resp.status)
	}
	if del.FirstAttemptAt.IsZero() {
		del.FirstAttemptAt = now
	}

	switch res.Action {
	case classify.Success:
		att.Outcome = topics.OutcomeSuccess
		log.Debug("delivered", zap.Int("status", resp.status), zap.Duration("duration", resp.duration))
		return []*kgo.Record{d.attemptRecord(&att)}
	case classify.Retry:
		schedule, _ := topics.ParseSchedule(sub.RetrySchedule)
		nominal, more := backoff.Next(schedule, del.Attempt)
		if !more {
			att.Outcome = topics.OutcomeDead
			log.Warn("dead-lettered: retries exhausted", zap.String("category", res.Category), zap.Int("status", resp.status))
			return []*kgo.Record{d.attemptRecord(&att), d.deadLetter(rec, topics.DeadLetter{
				// The category says why it is here (topics.FailureExhausted);
				// the reason keeps the last attempt's category and error.
				Delivery: &del, Reason: "retries exhausted, last failure " + res.Category + ": " + att.Error,
				FailureCategory: topics.FailureExhausted, HTTPStatus: resp.status, Attempts: del.Attempt,
			}, now)}
		}
		delay := backoff.Jittered(nominal, rng)
		if wish, ok := backoff.RetryAfter(resp.retryAfter, now); ok {
			delay = backoff.Clamp(wish, nominal)
		}
		next := del
		next.Attempt++
		next.NotBefore = now.Add(delay)
		att.Outcome, att.NextAttemptAt = topics.OutcomeRetry, next.NotBefore
		log.Debug("retrying", zap.String("category", res.Category), zap.Int("status", resp.status), zap.Duration("in", delay))
		return []*kgo.Record{d.attemptRecord(&att), {
			Topic:   d.names.Retry(d.names.TierFor(nominal)),
			Key:     rec.Key,
			Value:   next.Encode(),
			Headers: []kgo.RecordHeader{topics.NotBeforeHeader(next.NotBefore)},
		}}
	case classify.Disable:
		att.Outcome = topics.OutcomeDead
		disabled := *sub
		disabled.Enabled = false
		disabled.DisabledReason = "endpoint answered 410 Gone"
		disabled.UpdatedAt = now
		log.Warn("disabling subscription: endpoint answered 410 Gone", zap.String("url", topics.RedactURL(sub.URL)))
		return []*kgo.Record{d.attemptRecord(&att), d.deadLetter(rec, topics.DeadLetter{
			Delivery: &del, Reason: disabled.DisabledReason, FailureCategory: res.Category,
			HTTPStatus: resp.status, Attempts: del.Attempt,
		}, now), d.subscriptionRecord(&disabled)}
	default:
		att.Outcome = topics.OutcomeDead
		log.Warn("dead-lettered: permanent failure", zap.String("category", res.Category), zap.Int("status", resp.status),
			zap.String("url", topics.RedactURL(sub.URL)))
		return []*kgo.Record{d.attemptRecord(&att), d.deadLetter(rec, topics.DeadLetter{
			Delivery: &del, Reason: att.Error, FailureCategory: res.Category, HTTPStatus: resp.status, Attempts: del.Attempt,
		}, now)}
	}
}

// errorText describes a transport error without the URL, which may carry a
// token in its query.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func (d *deliverer) attemptRecord(a *topics.Attempt) *kgo.Record {
	return &kgo.Record{Topic: d.names.Attempts(), Key: []byte(a.SubscriptionID), Value: a.Encode()}
}

func (d *deliverer) deadLetter(rec *kgo.Record, dl topics.DeadLetter, now time.Time) *kgo.Record {
	dl.DeadAt = now
	dl.Source = topics.Source{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	return &kgo.Record{Topic: d.names.DLQ(), Key: rec.Key, Value: dl.Encode()}
}

func (d *deliverer) subscriptionRecord(s *topics.Subscription) *kgo.Record {
	return &kgo.Record{Topic: d.names.Subscriptions(), Key: []byte(s.ID), Value: s.Encode()}
}
