package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

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
	case topics.OutcomeScheduled:
		return "scheduled"
	}
	return "pending"
}

type messageInput struct {
	EventID string `path:"event_id" doc:"The event's id (its webhook-id)."`
}

type messageOutput struct{ Body service.Message }

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
			if m.ExpungedAt != nil {
				return &messageOutput{Body: m}, nil
			}
			rec, ev, err := s.findEvent(ctx, in.EventID, m.PublishedAt)
			if err != nil {
				return nil, s.internal(err)
			}
			if rec != nil {
				m.Event = &service.MessageEvent{Key: ev.Key, CreatedAt: ev.CreatedAt, Data: ev.Data}
			}
			return &messageOutput{Body: m}, nil
		})
}

// message reads the attempts of one event, as p may see them: a tenant
// key sees its tenant's only, another's answers 404. Of an expunged event
// it says when, and shows no response sample (an attempt recorded after
// the expunge, or before its mutation ran, may still have one).
func (s *Server) message(ctx context.Context, eventID string, p service.Caller) (service.Message, error) {
	q := "SELECT subscription_id, event_type, tenant, attempt, outcome, ts, http_status, duration_ms, failure_category, " +
		"error, response_sample, next_attempt_at, published_at FROM " + s.cfg.Database + "." + schema.TableAttempts +
		" FINAL WHERE event_id = ?"
	args := []any{eventID}
	if !p.Admin() {
		q += " AND tenant = ?"
		args = append(args, p.Tenant)
	}
	// Attempts in the same instant (whole seconds on servers without
	// DateTime64) are ordered with a success last (nothing follows one but
	// a redrive's or a retry's new attempts), then by attempt.
	rows, err := s.ch.Query(ctx, q+" ORDER BY subscription_id, ts, outcome = 'success', attempt", args...)
	if err != nil {
		return service.Message{}, s.internal(fmt.Errorf("message log: %w", err))
	}
	defer rows.Close()
	m := service.Message{EventID: eventID, Deliveries: []service.MessageDelivery{}}
	for rows.Next() {
		var sub string
		var a service.Attempt
		var attempt uint32
		var status uint16
		var next, published time.Time
		if err := rows.Scan(&sub, &m.EventType, &m.Tenant, &attempt, &a.Outcome, &a.At, &status, &a.DurationMS,
			&a.FailureCategory, &a.Error, &a.ResponseSample, &next, &published); err != nil {
			return service.Message{}, s.internal(fmt.Errorf("message log: %w", err))
		}
		a.Attempt, a.HTTPStatus = int(attempt), int(status)
		if m.PublishedAt.IsZero() || published.Before(m.PublishedAt) {
			m.PublishedAt = published.UTC()
		}
		if next.Unix() > 0 {
			a.NextAttemptAt = &next
		}
		if n := len(m.Deliveries); n == 0 || m.Deliveries[n-1].SubscriptionID != sub {
			m.Deliveries = append(m.Deliveries, service.MessageDelivery{SubscriptionID: sub})
		}
		d := &m.Deliveries[len(m.Deliveries)-1]
		d.Attempts = append(d.Attempts, a)
		d.Status, d.NextAttemptAt = statusOf(a.Outcome), a.NextAttemptAt
	}
	if err := rows.Err(); err != nil {
		return service.Message{}, s.internal(fmt.Errorf("message log: %w", err))
	}
	if len(m.Deliveries) == 0 {
		return service.Message{}, huma.Error404NotFound("no attempt of event " + eventID + " recorded (yet)")
	}
	at, expunged, err := retention.Expunged(ctx, s.ch, s.cfg.Database, eventID)
	if err != nil {
		return service.Message{}, s.internal(fmt.Errorf("message log: %w", err))
	}
	if expunged {
		m.ExpungedAt = &at
		for i := range m.Deliveries {
			for j := range m.Deliveries[i].Attempts {
				m.Deliveries[i].Attempts[j].ResponseSample = ""
			}
		}
	}
	return m, nil
}

// clickhouseConn is what the message log needs of ClickHouse: reading,
// and the expunge's insert and mutation.
type clickhouseConn = retention.Conn

type listMessagesInput struct {
	SubscriptionID string    `query:"subscription_id" doc:"Only this subscription's deliveries."`
	EventType      string    `query:"event_type" doc:"Only events of this type."`
	Status         string    `query:"status" enum:"delivered,retrying,pending,scheduled,dead,skipped" doc:"Only deliveries in this status."`
	Since          time.Time `query:"since" doc:"Only deliveries attempted at or after this time (default: 24 hours ago)."`
	Until          time.Time `query:"until" doc:"Only deliveries attempted before this time (default: now)."`
	Cursor         string    `query:"cursor" doc:"The next_cursor of the previous page."`
	Limit          int       `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}

// outcomesOf are the last outcomes of a status.
var outcomesOf = map[string][]string{
	"delivered": {topics.OutcomeSuccess}, "retrying": {topics.OutcomeRetry}, "dead": {topics.OutcomeDead},
	"skipped": {topics.OutcomeSkipped}, "pending": {topics.OutcomeBlocked, topics.OutcomeThrottled},
	"scheduled": {topics.OutcomeScheduled},
}

func (s *Server) registerMessageList() {
	huma.Register(s.api, huma.Operation{OperationID: "list-messages", Method: http.MethodGet, Path: "/v1/messages",
		Summary: "List messages", Description: "One row per event and subscription, the latest attempted first, with the " +
			"status of its last attempt; from ClickHouse.", Tags: []string{"Messages"}, Security: secured},
		func(ctx context.Context, in *listMessagesInput) (*service.ListMessagesOutput, error) {
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("the message log needs ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			return s.listMessages(ctx, in, principalOf(ctx))
		})
}

func (s *Server) listMessages(ctx context.Context, in *listMessagesInput, p service.Caller) (*service.ListMessagesOutput, error) {
	until, since := in.Until, in.Since
	if until.IsZero() {
		until = time.Now().Add(time.Second)
	}
	if since.IsZero() {
		since = until.Add(-24 * time.Hour)
	}
	where, args := []string{"ts >= ?", "ts < ?"}, []any{since.UTC(), until.UTC()}
	add := func(cond string, v any) { where, args = append(where, cond), append(args, v) }
	if !p.Admin() {
		add("tenant = ?", p.Tenant)
	}
	if in.SubscriptionID != "" {
		add("subscription_id = ?", in.SubscriptionID)
	}
	if in.EventType != "" {
		add("event_type = ?", in.EventType)
	}
	var having []string
	var hargs []any
	if in.Status != "" {
		having, hargs = append(having, "has(?, last_outcome)"), append(hargs, outcomesOf[in.Status])
	}
	if in.Cursor != "" {
		at, id, sub, ok := parseCursor(in.Cursor)
		if !ok {
			return nil, huma.Error422UnprocessableEntity("invalid cursor", &huma.ErrorDetail{Location: "query.cursor", Message: "not a cursor of this list", Value: in.Cursor})
		}
		having = append(having, "(last_at < ? OR (last_at = ? AND (event_id < ? OR (event_id = ? AND subscription_id < ?))))")
		hargs = append(hargs, at, at, id, id, sub)
	}
	// The last outcome: see message for the order of attempts in one instant.
	q := "SELECT event_id, subscription_id, any(event_type), any(tenant), " +
		"argMax(outcome, (ts, outcome = 'success', attempt)) AS last_outcome, max(ts) AS last_at, count() " +
		"FROM " + s.cfg.Database + "." + schema.TableAttempts + " FINAL WHERE " + strings.Join(where, " AND ") +
		" GROUP BY event_id, subscription_id"
	if len(having) > 0 {
		q += " HAVING " + strings.Join(having, " AND ")
	}
	q += " ORDER BY last_at DESC, event_id DESC, subscription_id DESC LIMIT " + strconv.Itoa(in.Limit+1)
	rows, err := s.ch.Query(ctx, q, append(args, hargs...)...)
	if err != nil {
		return nil, s.internal(fmt.Errorf("message list: %w", err))
	}
	defer rows.Close()
	out := &service.ListMessagesOutput{}
	out.Body.Data = []service.MessageSummary{}
	for rows.Next() {
		var m service.MessageSummary
		var outcome string
		if err := rows.Scan(&m.EventID, &m.SubscriptionID, &m.EventType, &m.Tenant, &outcome, &m.LastAttemptAt, &m.Attempts); err != nil {
			return nil, s.internal(fmt.Errorf("message list: %w", err))
		}
		if len(out.Body.Data) == in.Limit {
			last := out.Body.Data[len(out.Body.Data)-1]
			out.Body.NextCursor = cursorOf(last.LastAttemptAt, last.EventID, last.SubscriptionID)
			break
		}
		m.Status = statusOf(outcome)
		out.Body.Data = append(out.Body.Data, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.internal(fmt.Errorf("message list: %w", err))
	}
	return out, nil
}

// cursorOf and parseCursor carry a page's last row to the next page.
func cursorOf(at time.Time, eventID, sub string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixNano(), 10) + "\n" + eventID + "\n" + sub))
}

func parseCursor(c string) (time.Time, string, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", "", false
	}
	parts := strings.Split(string(b), "\n")
	if len(parts) != 3 {
		return time.Time{}, "", "", false
	}
	sec, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return time.Time{}, "", "", false
	}
	return time.Unix(0, sec).UTC(), parts[1], parts[2], true
}
