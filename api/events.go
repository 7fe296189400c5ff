package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/topics"
)

// Event is an event to publish, as producers write it to the events topic.
type Event struct {
	ID             string          `json:"id,omitempty" doc:"The event's id, the webhook-id endpoints see; default: evt_ and 20 random letters and digits."`
	Type           string          `json:"type" doc:"The event type, [a-zA-Z0-9_.-]{1,255}."`
	Tenant         string          `json:"tenant,omitempty" doc:"The tenant; a tenant key's events are its tenant's."`
	Key            string          `json:"key,omitempty" doc:"The ordering key: events with the same key are delivered in order to subscriptions that ask for it."`
	IdempotencyKey string          `json:"idempotency_key,omitempty" doc:"An event with a key seen in the last 24 hours is not delivered again."`
	CreatedAt      string          `json:"created_at,omitempty" doc:"RFC 3339; default: when the broker took it."`
	Priority       string          `json:"priority,omitempty" enum:"high,normal,low" doc:"high, normal (default) or low: deliveries of high events are served first, as a share, not a strict order; an ordered subscription's keep their order whatever the priority."`
	DeliverAt      string          `json:"deliver_at,omitempty" doc:"RFC 3339: no delivery is attempted before this time, at most 7 days ahead (not more than a minute in the past); cancellable until then (POST /v1/events/{event_id}/cancel). Default: at once."`
	Data           json.RawMessage `json:"data" doc:"The payload, any JSON but null, delivered byte for byte."`
}

type publishInput struct {
	Body    Event
	RawBody []byte
}

type publishBatchInput struct {
	Body struct {
		Events []Event `json:"events" minItems:"1" maxItems:"500" doc:"Up to 500 events, published in this order."`
	}
	RawBody []byte
}

type publishOutput struct {
	Body struct {
		IDs []string `json:"ids" doc:"The events' ids, in order."`
		// Warnings name the accepted events that the catalog would refuse
		// if their types were enforced.
		Warnings []PublishWarning `json:"warnings,omitempty" doc:"Accepted events whose data their type's schema refuses (the type's validation is warn), or whose type is not in the catalog (WEBHOOKS_UNKNOWN_EVENT_TYPES=warn)."`
	}
}

// PublishWarning is an accepted event the catalog found fault with.
type PublishWarning struct {
	Index   int    `json:"index" doc:"The event's place in the request, from 0."`
	Type    string `json:"type"`
	Pointer string `json:"pointer,omitempty" doc:"JSON pointer of the failing value in data."`
	Keyword string `json:"keyword,omitempty" doc:"The schema keyword that failed, or unknown_type."`
	Message string `json:"message"`
}

func (s *Server) registerEvents() {
	tags := []string{"Events"}
	huma.Register(s.api, huma.Operation{OperationID: "publish-event", Method: http.MethodPost, Path: "/v1/events",
		Summary: "Publish an event", Description: "Validated as the dispatcher validates, produced to the events topic keyed by its ordering key; " +
			"202 once the broker acknowledged it.", Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *publishInput) (*publishOutput, error) {
			if err := utf8Body(in.RawBody); err != nil {
				return nil, err
			}
			return s.publish(ctx, []Event{in.Body}, "")
		})
	huma.Register(s.api, huma.Operation{OperationID: "publish-events", Method: http.MethodPost, Path: "/v1/events/batch",
		Summary: "Publish up to 500 events", Description: "All or none are accepted: one invalid event refuses the batch, naming it.",
		Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted, MaxBodyBytes: 500 * topics.DefaultMaxEventBytes},
		func(ctx context.Context, in *publishBatchInput) (*publishOutput, error) {
			if err := utf8Body(in.RawBody); err != nil {
				return nil, err
			}
			return s.publish(ctx, in.Body.Events, "events")
		})
	huma.Register(s.api, huma.Operation{OperationID: "cancel-event", Method: http.MethodPost, Path: "/v1/events/{event_id}/cancel",
		Summary: "Cancel a scheduled event", Description: "Its deliveries still waiting for their deliver_at are not attempted: " +
			"each is recorded as skipped, category cancelled, when its wait ends (within the longest retry tier). " +
			"A tenant key cancels its own tenant's events only. A delivery already due is not recalled; " +
			"an event that was not scheduled is not affected.", Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *cancelInput) (*cancelOutput, error) {
			return s.cancel(ctx, in.EventID)
		})
}

type cancelInput struct {
	EventID string `path:"event_id" doc:"The event's id (its webhook-id)."`
}

type cancelOutput struct {
	Body struct {
		EventID     string    `json:"event_id"`
		CancelledAt time.Time `json:"cancelled_at"`
	}
}

// cancel writes the cancellation of an event by the caller (a tenant key:
// for its tenant's event only; an administrator: whatever its tenant) to
// the cancellations topic, which the retrier reads before it releases a
// scheduled delivery.
func (s *Server) cancel(ctx context.Context, eventID string) (*cancelOutput, error) {
	if err := topics.ValidateID("event", "event_id", eventID); err != nil {
		return nil, huma.Error422UnprocessableEntity("invalid event id", &huma.ErrorDetail{Location: "path.event_id", Message: err.Error(), Value: eventID})
	}
	c := topics.Cancellation{EventID: eventID, CancelledAt: time.Now().UTC()}
	if p := principalOf(ctx); !p.Admin() {
		c.Tenant = p.Tenant
	}
	if err := s.produce(ctx, &kgo.Record{Topic: s.names.Cancellations(), Key: []byte(c.Key()), Value: c.Encode()}); err != nil {
		return nil, err
	}
	out := &cancelOutput{}
	out.Body.EventID, out.Body.CancelledAt = c.EventID, c.CancelledAt
	return out, nil
}

// utf8Body refuses a body that is not UTF-8 (RFC 8259 section 8.1): the
// JSON decoder would quietly replace the bytes in strings, and keep them in
// data, which strict receivers could not parse.
func utf8Body(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	return huma.Error400BadRequest("the body is not valid UTF-8 (RFC 8259 section 8.1: JSON between systems is UTF-8)")
}

// publish validates every event, then produces them all and waits for the
// broker. field names the events' place in the body ("" for a lone event).
func (s *Server) publish(ctx context.Context, events []Event, field string) (*publishOutput, error) {
	p := principalOf(ctx)
	recs := make([]*kgo.Record, 0, len(events))
	out := &publishOutput{}
	for i, e := range events {
		prefix := ""
		if field != "" {
			prefix = field + "[" + strconv.Itoa(i) + "]."
		}
		if !p.Admin() {
			if e.Tenant != "" && e.Tenant != p.Tenant {
				return nil, huma.Error422UnprocessableEntity("invalid event",
					&huma.ErrorDetail{Location: "body." + prefix + "tenant", Message: "a tenant key publishes its own tenant's events only", Value: e.Tenant})
			}
			e.Tenant = p.Tenant
			// Operational events are the pipeline's: a forged one would
			// alert the tenant's channels and the operators'.
			if topics.IsNotice(e.Type) {
				return nil, huma.Error422UnprocessableEntity("invalid event",
					&huma.ErrorDetail{Location: "body." + prefix + "type", Message: "types " + topics.NoticePrefix +
						"* are the pipeline's operational events: a tenant key does not publish them", Value: e.Type})
			}
		}
		if e.ID == "" {
			e.ID = topics.NewID("evt_")
		}
		value, err := json.Marshal(topics.Event(e))
		if err != nil {
			return nil, s.internal(err)
		}
		ev, err := topics.DecodeEvent(value, 0)
		if err == nil {
			err = ev.CheckSchedule(time.Now(), topics.ScheduleSkew)
		}
		if err != nil {
			return nil, s.invalid(err, prefix)
		}
		v := s.catalog.Judge(e.Type, e.Data)
		s.countValidated(ctx, e.Type, v)
		if v.Refuse {
			return nil, schemaRefused(v, e.Type, prefix)
		}
		if w, ok := warning(i, e.Type, v); ok {
			out.Body.Warnings = append(out.Body.Warnings, w)
		}
		r := &kgo.Record{Topic: s.names.Events(), Value: value}
		if e.Key != "" {
			r.Key = []byte(e.Key)
		}
		recs = append(recs, r)
		out.Body.IDs = append(out.Body.IDs, e.ID)
	}
	if err := s.produce(ctx, recs...); err != nil {
		return nil, err
	}
	return out, nil
}

// warning is what an accepted event's answer says of a verdict that is
// not clean: invalid data under warn, an unknown type under warn.
func warning(i int, eventType string, v catalog.Verdict) (PublishWarning, bool) {
	switch v.Outcome {
	case catalog.OutcomeInvalid:
		return PublishWarning{Index: i, Type: eventType, Pointer: v.Violation.Pointer, Keyword: v.Violation.Keyword, Message: v.Violation.Message}, true
	case catalog.OutcomeUnknown:
		return PublishWarning{Index: i, Type: eventType, Keyword: "unknown_type", Message: "not in the event catalog"}, true
	}
	return PublishWarning{}, false
}

// countValidated counts a published event's verdict (unknown types under
// the type "", unchecked events not at all), and the invalid and unknown
// ones in Redis too, for the dashboard.
func (s *Server) countValidated(ctx context.Context, eventType string, v catalog.Verdict) {
	if v.Outcome == catalog.OutcomeUnchecked {
		return
	}
	if !v.Known {
		eventType = ""
	}
	s.m.validated.WithLabelValues(eventType, v.Outcome).Inc()
	if s.guard != nil && (v.Outcome == catalog.OutcomeInvalid || v.Outcome == catalog.OutcomeUnknown) {
		if err := s.guard.CountSchema(ctx, time.Now(), map[[2]string]int{{eventType, v.Outcome}: 1}); err != nil {
			s.log.Debug("counting an invalid event in Redis", zap.Error(err))
		}
	}
}
