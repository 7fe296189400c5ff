package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

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
