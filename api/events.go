package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kgo"

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
	Data           json.RawMessage `json:"data" doc:"The payload, any JSON but null, delivered byte for byte."`
}

type publishInput struct {
	Body Event
}

type publishBatchInput struct {
	Body struct {
		Events []Event `json:"events" minItems:"1" maxItems:"500" doc:"Up to 500 events, published in this order."`
	}
}

type publishOutput struct {
	Body struct {
		IDs []string `json:"ids" doc:"The events' ids, in order."`
	}
}

func (s *Server) registerEvents() {
	tags := []string{"Events"}
	huma.Register(s.api, huma.Operation{OperationID: "publish-event", Method: http.MethodPost, Path: "/v1/events",
		Summary: "Publish an event", Description: "Validated as the dispatcher validates, produced to the events topic keyed by its ordering key; " +
			"202 once the broker acknowledged it.", Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *publishInput) (*publishOutput, error) {
			return s.publish(ctx, []Event{in.Body}, "")
		})
	huma.Register(s.api, huma.Operation{OperationID: "publish-events", Method: http.MethodPost, Path: "/v1/events/batch",
		Summary: "Publish up to 500 events", Description: "All or none are accepted: one invalid event refuses the batch, naming it.",
		Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted, MaxBodyBytes: 500 * topics.DefaultMaxEventBytes},
		func(ctx context.Context, in *publishBatchInput) (*publishOutput, error) {
			return s.publish(ctx, in.Body.Events, "events")
		})
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
		if !p.admin() {
			if e.Tenant != "" && e.Tenant != p.tenant {
				return nil, huma.Error422UnprocessableEntity("invalid event",
					&huma.ErrorDetail{Location: "body." + prefix + "tenant", Message: "a tenant key publishes its own tenant's events only", Value: e.Tenant})
			}
			e.Tenant = p.tenant
		}
		if e.ID == "" {
			e.ID = topics.NewID("evt_")
		}
		value, err := json.Marshal(topics.Event(e))
		if err != nil {
			return nil, s.internal(err)
		}
		if _, err := topics.DecodeEvent(value, 0); err != nil {
			return nil, s.invalid(err, prefix)
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
