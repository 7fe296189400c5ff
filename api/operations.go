package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

type operationOutput struct {
	Location string `header:"Location"`
	Body     service.Operation
}

type redriveInput struct {
	Body struct {
		SubscriptionID string                  `json:"subscription_id,omitempty" doc:"Only this subscription's dead letters."`
		EventType      string                  `json:"event_type,omitempty" doc:"Only this type, prefix.* or *."`
		Category       string                  `json:"category,omitempty" doc:"Only this failure category (an exhausted one's last failure counts too)."`
		Since          time.Time               `json:"since,omitzero" doc:"Only those dead at or after this time."`
		Until          time.Time               `json:"until,omitzero" doc:"Only those dead before this time; at the latest, when the operation is created (dead letters of its own redrive are never taken again)."`
		DeadLetters    []service.DeadLetterRef `json:"dead_letters,omitempty" maxItems:"1000" doc:"Only these dead letters (as GET /v1/dlq lists them), of those passing the other filters."`
		Rate           float64                 `json:"rate,omitempty" exclusiveMinimum:"0" maximum:"10000" default:"100" doc:"Deliveries per second at most."`
	}
}

type replayInput struct {
	Body struct {
		SubscriptionID string    `json:"subscription_id" minLength:"1" doc:"The one subscription to send the events to again."`
		EventType      string    `json:"event_type,omitempty" doc:"Only this type, prefix.* or *, within the subscription's."`
		Since          time.Time `json:"since" doc:"Events published at or after this time."`
		Until          time.Time `json:"until,omitzero" doc:"Events published before this time; at the latest, when the operation is created."`
		Rate           float64   `json:"rate,omitempty" exclusiveMinimum:"0" maximum:"10000" default:"100" doc:"Deliveries per second at most."`
	}
}

type operationIDInput struct {
	ID string `path:"id" doc:"The operation's id."`
}

type listOperationsInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"The newest this many."`
}

func (s *Server) registerOperations() {
	tags := []string{"Operations"}
	huma.Register(s.api, huma.Operation{OperationID: "redrive-dead-letters", Method: http.MethodPost, Path: "/v1/dlq/redrive",
		Summary: "Redrive dead letters", Description: "Starts an operation that sends the dead letters passing the filters back to " +
			"the pipeline, at most rate per second, each once however often it is asked (as `webhookctl dlq redrive`). Answers at once; " +
			"follow it at the Location given. A tenant key redrives its tenant's only.",
		Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *redriveInput) (*operationOutput, error) {
			b := in.Body
			if b.SubscriptionID != "" {
				if _, err := s.visible(ctx, b.SubscriptionID); err != nil {
					return nil, err
				}
			}
			if b.EventType != "" && topics.ValidatePattern(b.EventType) != nil {
				return nil, huma.Error422UnprocessableEntity("invalid redrive", &huma.ErrorDetail{Location: "body.event_type",
					Message: "a type, prefix.* or *", Value: b.EventType})
			}
			o := &topics.Operation{Kind: topics.OperationRedrive, Subscription: b.SubscriptionID,
				EventType: b.EventType, Category: b.Category, Since: b.Since, Until: b.Until, Rate: b.Rate}
			for _, d := range b.DeadLetters {
				o.DeadLetters = append(o.DeadLetters, topics.Position(d))
			}
			return s.startOperation(ctx, o)
		})
	huma.Register(s.api, huma.Operation{OperationID: "replay-events", Method: http.MethodPost, Path: "/v1/replays",
		Summary: "Replay events to a subscription", Description: "Starts an operation that reads the events published in the " +
			"time range and sends those the subscription takes to it again, as new deliveries, at most rate per second (as " +
			"`webhookctl replay`). Answers at once; follow it at the Location given.",
		Tags: tags, Security: secured, DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *replayInput) (*operationOutput, error) {
			b := in.Body
			sub, err := s.visible(ctx, b.SubscriptionID)
			if err != nil {
				return nil, err
			}
			switch {
			case !sub.Enabled:
				return nil, huma.Error409Conflict("subscription " + sub.ID + " is disabled: the deliverer would skip its deliveries (enable it first)")
			case b.Since.IsZero():
				return nil, huma.Error422UnprocessableEntity("invalid replay", &huma.ErrorDetail{Location: "body.since",
					Message: "a replay needs the time to start from"})
			case b.EventType != "" && topics.ValidatePattern(b.EventType) != nil:
				return nil, huma.Error422UnprocessableEntity("invalid replay", &huma.ErrorDetail{Location: "body.event_type",
					Message: "a type, prefix.* or *", Value: b.EventType})
			}
			return s.startOperation(ctx, &topics.Operation{Kind: topics.OperationReplay, Subscription: sub.ID, EventType: b.EventType,
				Since: b.Since, Until: b.Until, Rate: b.Rate})
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-operation", Method: http.MethodGet, Path: "/v1/operations/{id}",
		Summary: "Get an operation", Description: "Its state and progress. Any replica answers with what was written before the request.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *operationIDInput) (*operationOutput, error) {
			o, err := s.operations.Get(ctx, principalOf(ctx), in.ID)
			if err != nil {
				return nil, s.problem(err)
			}
			return &operationOutput{Body: o}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "list-operations", Method: http.MethodGet, Path: "/v1/operations",
		Summary: "List operations", Description: "The newest operations first; a tenant key sees its tenant's.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *listOperationsInput) (*service.ListOperationsOutput, error) {
			list, err := s.operations.List(ctx, principalOf(ctx), in.Limit)
			if err != nil {
				return nil, s.problem(err)
			}
			out := &service.ListOperationsOutput{}
			out.Body.Data = list
			return out, nil
		})
}

// startOperation starts o as the request's caller, and answers it.
func (s *Server) startOperation(ctx context.Context, o *topics.Operation) (*operationOutput, error) {
	op, err := s.operations.Start(ctx, principalOf(ctx), o)
	if err != nil {
		return nil, s.problem(err)
	}
	return &operationOutput{Location: "/v1/operations/" + op.ID, Body: op}, nil
}
