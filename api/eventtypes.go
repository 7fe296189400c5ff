package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/version"
)

type eventTypeNameInput struct {
	Name string `path:"name" doc:"The type's name."`
}

type eventTypeOutput struct {
	Body service.EventType
}

type createEventTypeInput struct {
	Body struct {
		Name string `json:"name" doc:"The events' type, dotted: segments of [a-zA-Z0-9_-] separated by single dots."`
		service.EventTypeBody
	}
}

type updateEventTypeInput struct {
	Name  string `path:"name" doc:"The type's name."`
	Force bool   `query:"force" doc:"Write a change that would refuse data the current version accepts (see the 409 it answers otherwise)."`
	Body  service.EventTypeBody
}

type asyncAPIOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

func (s *Server) registerEventTypes() {
	tags := []string{"Event types"}
	admin := map[string]any{adminOnly: true}
	huma.Register(s.api, huma.Operation{OperationID: "list-event-types", Method: http.MethodGet, Path: "/v1/event-types",
		Summary: "List the event catalog", Description: "Every event type with its schema and examples; tenant keys read it too.",
		Tags: tags, Security: secured},
		func(context.Context, *struct{}) (*service.EventTypeListOutput, error) {
			out := &service.EventTypeListOutput{}
			out.Body.Data = s.eventTypes.List()
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "event-type-faults", Method: http.MethodGet, Path: "/v1/stats/event-types",
		Summary: "Invalid events by type", Description: "Admin only. Events whose data their type's schema refused, and events of unknown types, " +
			"in the last 24 hours, counted at the API and the dispatcher. Kept in Redis.",
		Tags: tags, Security: secured, Metadata: admin},
		func(ctx context.Context, _ *struct{}) (*service.EventTypeFaultsOutput, error) {
			out := &service.EventTypeFaultsOutput{}
			out.Body.Types = []service.EventTypeFaults{}
			if s.guard == nil {
				return out, nil
			}
			// Redis down: the counts are unavailable, which the answer
			// says; not an error of the request.
			counts, err := s.guard.SchemaCounts(ctx, time.Now())
			if out.Body.Available = err == nil; out.Body.Available {
				out.Body.Types = faultsByType(counts)
			}
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "event-types-asyncapi", Method: http.MethodGet, Path: "/v1/event-types/asyncapi.json",
		Summary: "The catalog as AsyncAPI", Description: "The event catalog as an AsyncAPI 3.0 document: what a subscription's endpoint " +
			"receives, one message per type (the body with the type's schema for data, the Standard Webhooks headers). " +
			"As `webhookctl event-types export`.", Tags: tags, Security: secured},
		func(context.Context, *struct{}) (*asyncAPIOutput, error) {
			doc, err := catalog.AsyncAPI(s.catalog.All(), catalog.AsyncAPITitle, version.Version)
			if err != nil {
				return nil, s.internal(fmt.Errorf("rendering the catalog as AsyncAPI: %w", err))
			}
			return &asyncAPIOutput{ContentType: "application/json", Body: doc}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-event-type", Method: http.MethodGet, Path: "/v1/event-types/{name}",
		Summary: "Get an event type", Tags: tags, Security: secured},
		func(_ context.Context, in *eventTypeNameInput) (*eventTypeOutput, error) {
			return s.eventTypeAnswer(s.eventTypes.Get(in.Name))
		})
	huma.Register(s.api, huma.Operation{OperationID: "create-event-type", Method: http.MethodPost, Path: "/v1/event-types",
		Summary: "Add an event type", Description: "Admin only. The schema must compile and accept every example. 409 when the type exists.",
		Tags: tags, Security: secured, Metadata: admin, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createEventTypeInput) (*eventTypeOutput, error) {
			return s.eventTypeAnswer(s.eventTypes.Create(ctx, principalOf(ctx), in.Body.Name, in.Body.EventTypeBody))
		})
	huma.Register(s.api, huma.Operation{OperationID: "update-event-type", Method: http.MethodPut, Path: "/v1/event-types/{name}",
		Summary: "Change an event type", Description: "Admin only. Replaces the type as a new version. A schema that would refuse data " +
			"the current version accepts (a new required property, a narrower type, an enum value dropped, a tighter bound, an old example " +
			"refused, or a change that cannot be judged) answers 409 listing why, unless force is set; or publish under a new type name.",
		Tags: tags, Security: secured, Metadata: admin},
		func(ctx context.Context, in *updateEventTypeInput) (*eventTypeOutput, error) {
			return s.eventTypeAnswer(s.eventTypes.Update(ctx, principalOf(ctx), in.Name, in.Body, in.Force))
		})
	huma.Register(s.api, huma.Operation{OperationID: "delete-event-type", Method: http.MethodDelete, Path: "/v1/event-types/{name}",
		Summary: "Remove an event type", Description: "Admin only. Its events become unknown (WEBHOOKS_UNKNOWN_EVENT_TYPES decides their fate).",
		Tags: tags, Security: secured, Metadata: admin, DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *eventTypeNameInput) (*struct{}, error) {
			if err := s.eventTypes.Delete(ctx, principalOf(ctx), in.Name); err != nil {
				return nil, s.problem(err)
			}
			return nil, nil
		})
}

// eventTypeAnswer answers an event type operation.
func (s *Server) eventTypeAnswer(et service.EventType, err error) (*eventTypeOutput, error) {
	if err != nil {
		return nil, s.problem(err)
	}
	return &eventTypeOutput{Body: et}, nil
}

// schemaRefused answers an event its type's schema refuses (or whose type
// is unknown where unknown types are rejected): a 422 naming the event's
// place in the body, the JSON pointer within its data and the keyword.
func schemaRefused(v catalog.Verdict, eventType, prefix string) error {
	if v.Violation == nil {
		return huma.Error422UnprocessableEntity("unknown event type",
			&huma.ErrorDetail{Location: "body." + prefix + "type", Message: "not in the event catalog, and unknown types are rejected", Value: eventType})
	}
	return huma.Error422UnprocessableEntity("event data does not match the schema of "+eventType,
		&huma.ErrorDetail{Location: "body." + prefix + "data" + v.Violation.Pointer,
			Message: v.Violation.Keyword + ": " + v.Violation.Message})
}

// faultsByType folds counts by [type, outcome] into one row per type, the
// most faults first.
func faultsByType(counts map[[2]string]int64) []service.EventTypeFaults {
	rows := map[string]*service.EventTypeFaults{}
	for k, n := range counts {
		r := rows[k[0]]
		if r == nil {
			r = &service.EventTypeFaults{Type: k[0]}
			rows[k[0]] = r
		}
		switch k[1] {
		case catalog.OutcomeInvalid:
			r.Invalid += n
		case catalog.OutcomeUnknown:
			r.Unknown += n
		}
	}
	out := make([]service.EventTypeFaults, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b service.EventTypeFaults) int {
		return cmp.Or(cmp.Compare(b.Invalid+b.Unknown, a.Invalid+a.Unknown), strings.Compare(a.Type, b.Type))
	})
	return out
}
