package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

// Attempt is one attempt of a message, as the recorder stored it.
type Attempt struct {
	Attempt         int        `json:"attempt" doc:"1 for the first attempt, then one more per retry."`
	Outcome         string     `json:"outcome" doc:"success, retry, dead, blocked, throttled or skipped."`
	At              time.Time  `json:"at"`
	HTTPStatus      int        `json:"http_status,omitempty"`
	DurationMS      float64    `json:"duration_ms"`
	FailureCategory string     `json:"failure_category,omitempty"`
	Error           string     `json:"error,omitempty"`
	ResponseSample  string     `json:"response_sample,omitempty" doc:"The first 1 KiB of the endpoint's answer."`
	NextAttemptAt   *time.Time `json:"next_attempt_at,omitempty"`
}

// MessageDelivery is what became of a message for one subscription.
type MessageDelivery struct {
	SubscriptionID string     `json:"subscription_id"`
	Status         string     `json:"status" enum:"delivered,retrying,pending,dead,skipped" doc:"From the last attempt: delivered, retrying (a retry is scheduled), pending (held back: breaker, rate limit, an ordered key), dead or skipped."`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"`
	Attempts       []Attempt  `json:"attempts"`
}

// Message is an event and what became of it for each subscription it
// matched.
type Message struct {
	EventID    string            `json:"event_id"`
	EventType  string            `json:"event_type"`
	Tenant     string            `json:"tenant,omitempty"`
	Deliveries []MessageDelivery `json:"deliveries"`
}

// statusOf is a delivery's status from its last attempt's outcome.
func statusOf(outcome string) string {
	switch outcome {
	case topics.OutcomeSuccess:
		return "delivered"
	case topics.OutcomeRetry:
		return "retrying"
	case topics.OutcomeDead:
		return "dead"
	case topics.OutcomeSkipped:
		return "skipped"
	}
	return "pending"
}

type messageInput struct {
	EventID string `path:"event_id" doc:"The event's id (its webhook-id)."`
}

type messageOutput struct{ Body Message }

func (s *Server) registerMessages() {
	huma.Register(s.api, huma.Operation{OperationID: "get-message", Method: http.MethodGet, Path: "/v1/messages/{event_id}",
		Summary: "What became of an event", Description: "Per subscription it matched: its status and every attempt " +
			"(time, status code, duration, category, error, the first 1 KiB of the answer), from the attempts the recorder " +
			"stored in ClickHouse (a second or so behind).", Tags: []string{"Messages"}, Security: secured},
		func(ctx context.Context, in *messageInput) (*messageOutput, error) {
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("the message log needs ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			m, err := s.message(ctx, in.EventID, principalOf(ctx))
			if err != nil {
				return nil, err
			}
			return &messageOutput{Body: m}, nil
		})
}

// message reads the attempts of one event, as p may see them: a tenant
// key sees its tenant's only, another's answers 404.
func (s *Server) message(ctx context.Context, eventID string, p principal) (Message, error) {
	q := "SELECT subscription_id, event_type, tenant, attempt, outcome, ts, http_status, duration_ms, failure_category, " +
		"error, response_sample, next_attempt_at FROM " + s.cfg.Database + "." + schema.TableAttempts +
		" FINAL WHERE event_id = ?"
	args := []any{eventID}
	if !p.admin() {
		q += " AND tenant = ?"
		args = append(args, p.tenant)
	}
	rows, err := s.ch.Query(ctx, q+" ORDER BY subscription_id, ts, attempt", args...)
	if err != nil {
		return Message{}, s.internal(fmt.Errorf("message log: %w", err))
	}
	defer rows.Close()
	m := Message{EventID: eventID, Deliveries: []MessageDelivery{}}
	for rows.Next() {
		var sub string
		var a Attempt
		var attempt uint32
		var status uint16
		var next time.Time
		if err := rows.Scan(&sub, &m.EventType, &m.Tenant, &attempt, &a.Outcome, &a.At, &status, &a.DurationMS,
			&a.FailureCategory, &a.Error, &a.ResponseSample, &next); err != nil {
			return Message{}, s.internal(fmt.Errorf("message log: %w", err))
		}
		a.Attempt, a.HTTPStatus = int(attempt), int(status)
		if next.Unix() > 0 {
			a.NextAttemptAt = &next
		}
		if n := len(m.Deliveries); n == 0 || m.Deliveries[n-1].SubscriptionID != sub {
			m.Deliveries = append(m.Deliveries, MessageDelivery{SubscriptionID: sub})
		}
		d := &m.Deliveries[len(m.Deliveries)-1]
		d.Attempts = append(d.Attempts, a)
		d.Status, d.NextAttemptAt = statusOf(a.Outcome), a.NextAttemptAt
	}
	if err := rows.Err(); err != nil {
		return Message{}, s.internal(fmt.Errorf("message log: %w", err))
	}
	if len(m.Deliveries) == 0 {
		return Message{}, huma.Error404NotFound("no attempt of event " + eventID + " recorded (yet)")
	}
	return m, nil
}

// clickhouseConn is what the message log needs of ClickHouse.
type clickhouseConn interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) driver.Row
}
