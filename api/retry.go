package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// maxEventScan bounds how many records of each events partition finding
// an event reads, from the first record of the second it was published in.
const maxEventScan = 10000

var errFound = errors.New("found")

// findEvent reads event id from the events topic, published at at (to the
// second: the attempts may keep whole seconds). It returns a nil record
// when the topic no longer holds it.
func (s *Server) findEvent(ctx context.Context, id string, at time.Time) (*kgo.Record, topics.Event, error) {
	if at.IsZero() {
		return nil, topics.Event{}, nil
	}
	w, err := kafka.ReadWindow(ctx, kadm.NewClient(s.cl), s.names.Events(), at.Truncate(time.Second), time.Time{})
	if err != nil {
		return nil, topics.Event{}, fmt.Errorf("finding event %s: %w", id, err)
	}
	for p, start := range w.Start {
		w.Stop[p] = min(w.Stop[p], start+maxEventScan)
	}
	var (
		found *kgo.Record
		ev    topics.Event
	)
	err = kafka.Scan(ctx, s.cfg.Kafka.ClientOpts(), w, func(r *kgo.Record) error {
		e, err := topics.DecodeEvent(r.Value, topics.DefaultMaxEventBytes)
		if err != nil || e.ID != id {
			return nil
		}
		found, ev = r, e
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, topics.Event{}, fmt.Errorf("finding event %s: %w", id, err)
	}
	return found, ev, nil
}

type retryInput struct {
	EventID string `path:"event_id" doc:"The event's id (its webhook-id)."`
	Body    struct {
		SubscriptionID string `json:"subscription_id" minLength:"1" doc:"The subscription to send it to again: one it was sent to."`
	}
}

type retryOutput struct {
	Body struct {
		EventID        string `json:"event_id"`
		SubscriptionID string `json:"subscription_id"`
	}
}

func (s *Server) registerRetry() {
	huma.Register(s.api, huma.Operation{OperationID: "retry-message", Method: http.MethodPost, Path: "/v1/messages/{event_id}/retry",
		Summary: "Send a message again", Description: "Sends the event to one subscription it was sent to again, now, as a new " +
			"first attempt with the same webhook-id; the deliverer takes it next, and the message log shows the attempt. " +
			"The event is read back from the events topic, so it must still be there (retention) and not expunged.",
		Tags: []string{"Messages"}, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *retryInput) (*retryOutput, error) {
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("the message log needs ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			m, err := s.message(ctx, in.EventID, principalOf(ctx))
			if err != nil {
				return nil, err
			}
			sub, err := s.visible(ctx, in.Body.SubscriptionID)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(m.Deliveries, func(d service.MessageDelivery) bool { return d.SubscriptionID == sub.ID }) {
				return nil, huma.Error422UnprocessableEntity("nothing to retry", &huma.ErrorDetail{Location: "body.subscription_id",
					Message: "event " + in.EventID + " was never sent to this subscription", Value: sub.ID})
			}
			if !sub.Enabled {
				return nil, huma.Error409Conflict("subscription " + sub.ID + " is disabled: the deliverer would skip it (enable it first)")
			}
			if m.ExpungedAt != nil {
				return nil, huma.Error410Gone("event " + in.EventID + " was expunged at " + m.ExpungedAt.Format(time.RFC3339) + ": its payload is not sent again")
			}
			rec, ev, err := s.findEvent(ctx, in.EventID, m.PublishedAt)
			if err != nil {
				return nil, s.internal(err)
			}
			if rec == nil {
				return nil, huma.Error410Gone("event " + in.EventID + " is no longer on the events topic (retention)")
			}
			if err := s.produce(ctx, topics.DeliveryRecord(rec, &ev, sub, s.names)); err != nil {
				return nil, err
			}
			out := &retryOutput{}
			out.Body.EventID, out.Body.SubscriptionID = ev.ID, sub.ID
			return out, nil
		})
}
