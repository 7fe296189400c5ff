package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

type createSubscriptionInput struct {
	Body service.SubscriptionFields
}

type subscriptionOutput struct{ Body service.Subscription }

type subscriptionIDInput struct {
	ID string `path:"id" doc:"The subscription's id."`
}

type patchSubscriptionInput struct {
	ID   string `path:"id"`
	Body service.SubscriptionFields
}

type disableInput struct {
	ID   string `path:"id"`
	Body *struct {
		Reason string `json:"reason,omitempty" maxLength:"500" doc:"Why, kept in disabled_reason."`
	}
}

type listSubscriptionsInput struct {
	Tenant    string `query:"tenant" doc:"Only this tenant's subscriptions."`
	EventType string `query:"event_type" doc:"Only subscriptions an event of this type matches."`
	Enabled   string `query:"enabled" enum:"true,false" doc:"Only enabled (true) or disabled (false) ones."`
	Cursor    string `query:"cursor" doc:"The next_cursor of the previous page."`
	Limit     int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Most subscriptions in the page."`
}

func (s *Server) registerSubscriptions() {
	tags := []string{"Subscriptions"}
	huma.Register(s.api, huma.Operation{OperationID: "create-subscription", Method: http.MethodPost, Path: "/v1/subscriptions",
		Summary: "Create a subscription", Description: "Validated as webhookctl validates; the signing secret is in the answer, once.",
		Tags: tags, Security: secured, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createSubscriptionInput) (*subscriptionOutput, error) {
			return s.subscriptionAnswer(s.subscriptions.Create(ctx, principalOf(ctx), &in.Body))
		})
	huma.Register(s.api, huma.Operation{OperationID: "list-subscriptions", Method: http.MethodGet, Path: "/v1/subscriptions",
		Summary: "List subscriptions", Description: "By id, in pages. Secrets are never listed.", Tags: tags, Security: secured},
		func(ctx context.Context, in *listSubscriptionsInput) (*service.SubscriptionsOutput, error) {
			q := service.SubscriptionQuery{Tenant: in.Tenant, EventType: in.EventType, Enabled: in.Enabled, Cursor: in.Cursor, Limit: in.Limit}
			page, next, err := s.subscriptions.List(ctx, principalOf(ctx), q)
			if err != nil {
				return nil, s.problem(err)
			}
			out := &service.SubscriptionsOutput{}
			out.Body.Data, out.Body.NextCursor = page, next
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-subscription", Method: http.MethodGet, Path: "/v1/subscriptions/{id}",
		Summary: "Get a subscription", Tags: tags, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*subscriptionOutput, error) {
			return s.subscriptionAnswer(s.subscriptions.Get(ctx, principalOf(ctx), in.ID))
		})
	huma.Register(s.api, huma.Operation{OperationID: "update-subscription", Method: http.MethodPatch, Path: "/v1/subscriptions/{id}",
		Summary: "Change the given fields of a subscription", Tags: tags, Security: secured},
		func(ctx context.Context, in *patchSubscriptionInput) (*subscriptionOutput, error) {
			return s.subscriptionAnswer(s.subscriptions.Update(ctx, principalOf(ctx), in.ID, &in.Body))
		})
	huma.Register(s.api, huma.Operation{OperationID: "delete-subscription", Method: http.MethodDelete, Path: "/v1/subscriptions/{id}",
		Summary: "Delete a subscription", Description: "Its pending deliveries are skipped.", Tags: tags, Security: secured,
		DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *subscriptionIDInput) (*struct{}, error) {
			if err := s.subscriptions.Delete(ctx, principalOf(ctx), in.ID); err != nil {
				return nil, s.problem(err)
			}
			return nil, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "enable-subscription", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/enable",
		Summary: "Enable a subscription", Tags: tags, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*subscriptionOutput, error) {
			return s.subscriptionAnswer(s.subscriptions.Enable(ctx, principalOf(ctx), in.ID))
		})
	huma.Register(s.api, huma.Operation{OperationID: "disable-subscription", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/disable",
		Summary: "Disable a subscription", Description: "Its deliveries are skipped until it is enabled again.", Tags: tags, Security: secured},
		func(ctx context.Context, in *disableInput) (*subscriptionOutput, error) {
			var reason *string
			if in.Body != nil {
				reason = &in.Body.Reason
			}
			return s.subscriptionAnswer(s.subscriptions.Disable(ctx, principalOf(ctx), in.ID, reason))
		})
	huma.Register(s.api, huma.Operation{OperationID: "rotate-subscription-secret", Method: http.MethodPost, Path: "/v1/subscriptions/{id}/rotate-secret",
		Summary: "Rotate a subscription's secret", Description: "A new secret, in the answer once; the old one signs too for 24 hours.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *subscriptionIDInput) (*subscriptionOutput, error) {
			return s.subscriptionAnswer(s.subscriptions.RotateSecret(ctx, principalOf(ctx), in.ID))
		})
}

// subscriptionAnswer answers a subscription operation.
func (s *Server) subscriptionAnswer(sub service.Subscription, err error) (*subscriptionOutput, error) {
	if err != nil {
		return nil, s.problem(err)
	}
	return &subscriptionOutput{Body: sub}, nil
}

// visible returns the subscription id as the request's caller may see it,
// or the answer why not.
func (s *Server) visible(ctx context.Context, id string) (*topics.Subscription, error) {
	sub, err := s.subscriptions.Visible(ctx, principalOf(ctx), id)
	if err != nil {
		return nil, s.problem(err)
	}
	return sub, nil
}
