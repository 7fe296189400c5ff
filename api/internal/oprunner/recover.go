package oprunner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// recoverFailed sends again the events of the operation's subscription
// whose last attempt in its window failed and that were not delivered
// since. The events are found in ClickHouse, each time the operation
// starts or resumes, and read back from the window of the events topic
// that holds them, set when it started; a resumed run reads on from the
// offsets it committed, so an event is sent once, and one delivered in the
// meantime is no longer found.
func (rn *Runner) recoverFailed(ctx context.Context, r *opRun, tx *kafka.Tx) error {
	o := &r.o
	sub, err := rn.operationSubscription(o)
	if err != nil {
		return err
	}
	if rn.ch == nil {
		return fmt.Errorf("this API replica has no ClickHouse, where the attempts are")
	}
	failed, first, last, err := rn.failedInWindow(ctx, o)
	if err != nil {
		return err
	}
	expunged, err := rn.expungedAmong(ctx, slices.Collect(maps.Keys(failed)))
	if err != nil {
		return err
	}
	for id := range expunged {
		delete(failed, id) // its data must not go out again
	}
	if o.State == topics.OperationPending {
		if len(failed) == 0 {
			o.Matched = 0
			return tx.Commit(ctx, r.progress(true))
		}
		// Published at is whole seconds on servers without DateTime64:
		// the window ends a second after the last one.
		if err := rn.startWindow(ctx, o, first, last.Add(time.Second)); err != nil {
			return err
		}
	}
	return rn.sendEvents(ctx, r, tx, sub, func(ev *topics.Event) bool { return failed[ev.ID] })
}

// failedInWindow finds the events of the operation's subscription whose
// last attempt from Since to Until failed (retry or dead) and that no
// success followed, and the first and last times they were published.
// Only attempts count: not the deliveries held back (blocked, throttled)
// or skipped.
func (rn *Runner) failedInWindow(ctx context.Context, o *topics.Operation) (map[string]bool, time.Time, time.Time, error) {
	q := "SELECT event_id, min(published_at) AS published, " +
		"maxIf(ts, ts >= ? AND ts < ?) AS last_in, argMaxIf(outcome, ts, ts >= ? AND ts < ?) AS last_outcome, " +
		"maxIf(ts, outcome = 'success') AS last_success " +
		"FROM " + rn.database + "." + schema.TableAttempts + " FINAL " +
		"WHERE subscription_id = ? AND outcome IN ('success', 'retry', 'dead') AND ts >= ? "
	args := []any{o.Since, o.Until, o.Since, o.Until, o.Subscription, o.Since}
	if o.Tenant != "" {
		q += "AND tenant = ? "
		args = append(args, o.Tenant)
	}
	q += "GROUP BY event_id HAVING last_outcome IN ('retry', 'dead') AND last_success < last_in"
	rows, err := rn.ch.Query(ctx, q, args...)
	if err != nil {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("finding the failed events: %w", err)
	}
	defer rows.Close()
	failed := map[string]bool{}
	var first, last time.Time
	for rows.Next() {
		var id, outcome string
		var published, lastIn, lastSuccess time.Time
		if err := rows.Scan(&id, &published, &lastIn, &outcome, &lastSuccess); err != nil {
			return nil, time.Time{}, time.Time{}, fmt.Errorf("finding the failed events: %w", err)
		}
		failed[id] = true
		if first.IsZero() || published.Before(first) {
			first = published
		}
		if published.After(last) {
			last = published
		}
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("finding the failed events: %w", err)
	}
	return failed, first.UTC(), last.UTC(), nil
}
