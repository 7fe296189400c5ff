package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// matcher is the part of the subscription table the fan-out needs.
type matcher interface {
	Match(e *topics.Event) []*topics.Subscription
}

// polled is an event record as the dispatcher judged it, decoded once
// for dedup and fan-out.
type polled struct {
	r  *kgo.Record
	ev topics.Event
	// bad is why the record is not a valid event (it is dead-lettered as
	// invalid).
	bad error
	// verdict is the catalog's on a valid event.
	verdict catalog.Verdict
}

// judge decodes an event record and asks the catalog about its data. Its
// deliver_at is judged against the record's timestamp, so that an event
// waiting in a backlog is judged as when it was published.
func judge(r *kgo.Record, cat *catalog.Catalog, maxEventBytes int) polled {
	p := polled{r: r}
	p.ev, p.bad = topics.DecodeEvent(r.Value, maxEventBytes)
	if p.bad == nil {
		p.bad = p.ev.CheckSchedule(r.Timestamp, topics.DispatchSkew)
	}
	if p.bad == nil {
		p.verdict = cat.Judge(p.ev.Type, p.ev.Data)
	}
	return p
}

// judgePerWorker is the fewest events a goroutine of judgeAll takes: below
// it, starting one costs more than it saves.
const judgePerWorker = 128

// judgeAll decodes and judges a polled batch's events, in order, on up to
// GOMAXPROCS goroutines: decoding and schema checks are most of a batch's
// CPU, and the rest of the fan-out runs on one goroutine.
func judgeAll(fs kgo.Fetches, cat *catalog.Catalog, maxEventBytes int) []polled {
	recs := make([]*kgo.Record, 0, fs.NumRecords())
	for r := range fs.RecordsAll() {
		recs = append(recs, r)
	}
	batch := make([]polled, len(recs))
	judgeRange := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			batch[i] = judge(recs[i], cat, maxEventBytes)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(recs)/judgePerWorker)
	if workers < 2 {
		judgeRange(0, len(recs))
		return batch
	}
	var wg sync.WaitGroup
	per := (len(recs) + workers - 1) / workers
	for lo := 0; lo < len(recs); lo += per {
		wg.Go(func() { judgeRange(lo, min(lo+per, len(recs))) })
	}
	wg.Wait()
	return batch
}

// refused reports whether the event is dead-lettered rather than fanned
// out: not a valid event, or refused by the catalog.
func (p *polled) refused() bool { return p.bad != nil || p.verdict.Refuse }

// fanOut turns one event record into the records it causes: one delivery
// per matching subscription whose filter (if any) takes it, or, when the
// event is invalid or its type's schema refuses it, one dead letter and
// the reason, which the caller logs. The delivery of an event whose
// deliver_at is after now waits for it in the retry tiers
// (topics.ScheduledRecord), with an attempt record of outcome scheduled
// that shows it in the message log; one whose deliver_at has passed
// (dispatched late) is delivered at once.
// A filter that fails on the event does not take it; filterFailed hears of
// it. now stamps dead letters and scheduled records, and tells whether
// deliver_at is ahead. Every record made carries the trace context
// of ctx (the fan-out span), or the event's trace headers when tracing is
// off; the span in ctx, when recording, gets the event's type and tenant
// and the number of deliveries.
func fanOut(ctx context.Context, p *polled, subs matcher, filters *filter.Cache, names topics.Names,
	now time.Time, filterFailed func(*topics.Subscription, error)) ([]*kgo.Record, error) {
	span := trace.SpanFromContext(ctx)
	r, ev := p.r, &p.ev
	if p.refused() {
		category, err := topics.FailureInvalid, p.bad
		if err == nil {
			category, err = topics.FailureSchema, errors.New(p.verdict.Reason(ev.Type))
		}
		span.SetStatus(codes.Error, category)
		dl := deadLetter(r, err, category, names, now)
		tracing.Carry(ctx, &dl.Headers, r.Headers)
		return []*kgo.Record{dl}, err
	}
	deliverAt, _ := ev.Schedule() // judged valid
	scheduled := deliverAt.After(now)
	matched := subs.Match(ev)
	out := make([]*kgo.Record, 0, len(matched))
	deliveries := 0
	var in *filter.Input // the event as filters see it, made for the first filter
	for _, sub := range matched {
		if sub.Filter != "" {
			if in == nil {
				in = filter.NewInput(ev)
			}
			ok, err := filters.Matches(sub, in)
			if err != nil {
				filterFailed(sub, err)
			}
			if !ok {
				continue
			}
		}
		var rec *kgo.Record
		if scheduled {
			rec = topics.ScheduledRecord(r, ev, sub, names, deliverAt, now)
			att := scheduledAttempt(r, ev, sub, names, deliverAt, now)
			tracing.Carry(ctx, &att.Headers, r.Headers)
			out = append(out, att)
		} else {
			rec = topics.DeliveryRecord(r, ev, sub, names)
		}
		tracing.Carry(ctx, &rec.Headers, r.Headers)
		out = append(out, rec)
		deliveries++
	}
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrEventID.String(ev.ID), tracing.AttrEventType.String(ev.Type),
			tracing.AttrTenant.String(ev.Tenant), tracing.AttrDeliveries.Int(deliveries))
	}
	return out, nil
}

// scheduledAttempt is the attempt record that tells the message log a
// delivery is scheduled: outcome scheduled, its first attempt due at
// deliverAt.
func scheduledAttempt(r *kgo.Record, ev *topics.Event, sub *topics.Subscription, names topics.Names, deliverAt, now time.Time) *kgo.Record {
	a := topics.Attempt{
		AttemptID: topics.NewAttemptID(), EventID: ev.ID, EventType: ev.Type, SubscriptionID: sub.ID, Tenant: ev.Tenant,
		Attempt: 1, Outcome: topics.OutcomeScheduled, TS: now.UTC(), NextAttemptAt: deliverAt.UTC(), PublishedAt: r.Timestamp.UTC(),
	}
	return &kgo.Record{Topic: names.Attempts(), Key: []byte(sub.ID), Value: a.Encode()}
}

// noticeCopy is the copy of an operational event (a webhook.* type) for
// the notices topic, where the alerter reads them, produced in the fan-out's
// transaction so the alerter sees each exactly once; nil for any other
// event.
func noticeCopy(p *polled, names topics.Names) *kgo.Record {
	if p.refused() || !topics.IsNotice(p.ev.Type) {
		return nil
	}
	return &kgo.Record{Topic: names.Notices(), Key: p.r.Key, Value: p.r.Value}
}

// deadLetter wraps an event that cannot be dispatched: invalid, or
// refused by its type's schema (category). The raw value is copied when it
// fits in a record; a larger one stays readable at Source for the events
// topic's retention.
func deadLetter(r *kgo.Record, reason error, category string, names topics.Names, now time.Time) *kgo.Record {
	dl := topics.DeadLetter{
		RawEvent:        r.Value,
		Reason:          reason.Error(),
		FailureCategory: category,
		DeadAt:          now.UTC(),
		Source:          topics.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
	}
	if len(r.Value) > maxRecordData {
		dl.RawEvent = nil
		dl.Reason += fmt.Sprintf(" (raw event not copied: over %d bytes; read it at the source)", maxRecordData)
	}
	return &kgo.Record{Topic: names.DLQ(), Key: r.Key, Value: dl.Encode()}
}
