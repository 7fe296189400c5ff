package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

type recoverInput struct {
	ID   string `path:"id" doc:"The subscription's id."`
	Body struct {
		Since time.Time `json:"since" doc:"The window's start: attempts made at or after this time."`
		Until time.Time `json:"until,omitzero" doc:"The window's end: attempts made before this time; at the latest, when the operation is created."`
		Rate  float64   `json:"rate,omitempty" exclusiveMinimum:"0" maximum:"10000" default:"100" doc:"Deliveries per second at most."`
	}
}

func (s *Server) registerRecover() {
	huma.Register(s.api, huma.Operation{OperationID: "recover-subscription", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/recover",
		Summary: "Recover a time window", Description: "Starts an operation that sends again, once, every event of the subscription whose " +
			"last attempt in the window failed (retrying or dead), unless it was delivered since; as new first attempts with the same " +
			"webhook-id, at most rate per second. The events are read back from the events topic (those its retention removed are " +
			"counted as failed). Answers at once; follow it at the Location given.",
		Tags: []string{"Operations"}, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *recoverInput) (*operationOutput, error) {
			sub, err := s.visible(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			switch {
			case s.ch == nil:
				return nil, huma.Error503ServiceUnavailable("this API replica has no ClickHouse, where the attempts are")
			case !sub.Enabled:
				return nil, huma.Error409Conflict("subscription " + sub.ID + " is disabled: the deliverer would skip its deliveries (enable it first)")
			case in.Body.Since.IsZero():
				return nil, huma.Error422UnprocessableEntity("invalid recover", &huma.ErrorDetail{Location: "body.since",
					Message: "a recover needs the start of its window"})
			}
			return s.startOperation(ctx, &topics.Operation{Kind: topics.OperationRecover, Subscription: sub.ID,
				Since: in.Body.Since.UTC(), Until: in.Body.Until.UTC(), Rate: in.Body.Rate})
		})
}

// recoverFailed sends again the events of the operation's subscription
// whose last attempt in its window failed and that were not delivered
// since. The events are found in ClickHouse, each time the operation
// starts or resumes, and read back from the window of the events topic
// that holds them, set when it started; a resumed run reads on from the
// offsets it committed, so an event is sent once, and one delivered in the
// meantime is no longer found.
func (s *Server) recoverFailed(ctx context.Context, r *opRun, tx *kafka.Tx) error {
	o := &r.o
	sub, err := s.operationSubscription(o)
	if err != nil {
		return err
	}
	if s.ch == nil {
		return fmt.Errorf("this API replica has no ClickHouse, where the attempts are")
	}
	failed, first, last, err := s.failedInWindow(ctx, o)
	if err != nil {
		return err
	}
	expunged, err := s.expungedAmong(ctx, slices.Collect(maps.Keys(failed)))
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
		if err := s.startWindow(ctx, o, first, last.Add(time.Second)); err != nil {
			return err
		}
	}
	return s.sendEvents(ctx, r, tx, sub, func(ev *topics.Event) bool { return failed[ev.ID] })
}

// failedInWindow finds the events of the operation's subscription whose
// last attempt from Since to Until failed (retry or dead) and that no
// success followed, and the first and last times they were published.
// Only attempts count: not the deliveries held back (blocked, throttled)
// or skipped.
func (s *Server) failedInWindow(ctx context.Context, o *topics.Operation) (map[string]bool, time.Time, time.Time, error) {
	q := "SELECT event_id, min(published_at) AS published, " +
		"maxIf(ts, ts >= ? AND ts < ?) AS last_in, argMaxIf(outcome, ts, ts >= ? AND ts < ?) AS last_outcome, " +
		"maxIf(ts, outcome = 'success') AS last_success " +
		"FROM " + s.cfg.Database + "." + schema.TableAttempts + " FINAL " +
		"WHERE subscription_id = ? AND outcome IN ('success', 'retry', 'dead') AND ts >= ? "
	args := []any{o.Since, o.Until, o.Since, o.Until, o.Subscription, o.Since}
	if o.Tenant != "" {
		q += "AND tenant = ? "
		args = append(args, o.Tenant)
	}
	q += "GROUP BY event_id HAVING last_outcome IN ('retry', 'dead') AND last_success < last_in"
	rows, err := s.ch.Query(ctx, q, args...)
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
