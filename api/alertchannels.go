package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

type alertChannelInput struct {
	ID string `path:"id" doc:"The channel's id."`
}

type alertChannelOutput struct {
	Body service.AlertChannel
}

type createAlertChannelInput struct {
	Body service.AlertChannelBody
}

type updateAlertChannelInput struct {
	ID   string `path:"id" doc:"The channel's id."`
	Body service.AlertChannelBody
}

type changeAlertChannelInput struct {
	ID   string `path:"id" doc:"The channel's id."`
	Body service.AlertChannelFields
}

func (s *Server) registerAlertChannels() {
	tags := []string{"Alert channels"}
	huma.Register(s.api, huma.Operation{OperationID: "list-alert-channels", Method: http.MethodGet, Path: "/v1/alert-channels",
		Summary: "List alert channels", Description: "A tenant key sees its tenant's; an admin every tenant's and the operators'.",
		Tags: tags, Security: secured},
		func(ctx context.Context, _ *struct{}) (*service.AlertChannelsOutput, error) {
			list, err := s.alertChannels.List(ctx, principalOf(ctx))
			if err != nil {
				return nil, s.problem(err)
			}
			out := &service.AlertChannelsOutput{}
			out.Body.Data = list
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "create-alert-channel", Method: http.MethodPost, Path: "/v1/alert-channels",
		Summary: "Add an alert channel", Description: "The channel is told of its tenant's operational events (the operators' of every " +
			"tenant's) in digests, one message per digest window. An email channel needs the API's SMTP server (WEBHOOKS_SMTP_ADDR).",
		Tags: tags, Security: secured, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createAlertChannelInput) (*alertChannelOutput, error) {
			return s.alertChannelAnswer(s.alertChannels.Create(ctx, principalOf(ctx), &in.Body))
		})
	huma.Register(s.api, huma.Operation{OperationID: "update-alert-channel", Method: http.MethodPut, Path: "/v1/alert-channels/{id}",
		Summary: "Change an alert channel", Description: "Replaces its settings (the body as when adding it); its tenant stays. " +
			"A digest in progress is sent with the new settings.", Tags: tags, Security: secured},
		func(ctx context.Context, in *updateAlertChannelInput) (*alertChannelOutput, error) {
			return s.alertChannelAnswer(s.alertChannels.Update(ctx, principalOf(ctx), in.ID, &in.Body))
		})
	huma.Register(s.api, huma.Operation{OperationID: "change-alert-channel", Method: http.MethodPatch, Path: "/v1/alert-channels/{id}",
		Summary: "Change the given settings of an alert channel", Description: "The settings given replace the channel's, the others " +
			"stay: its URL too, shown masked, need not be given again. Its tenant stays. A digest in progress is sent with the new settings.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *changeAlertChannelInput) (*alertChannelOutput, error) {
			return s.alertChannelAnswer(s.alertChannels.Change(ctx, principalOf(ctx), in.ID, &in.Body))
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-alert-channel", Method: http.MethodGet, Path: "/v1/alert-channels/{id}",
		Summary: "Get an alert channel", Tags: tags, Security: secured},
		func(ctx context.Context, in *alertChannelInput) (*alertChannelOutput, error) {
			return s.alertChannelAnswer(s.alertChannels.Get(ctx, principalOf(ctx), in.ID))
		})
	huma.Register(s.api, huma.Operation{OperationID: "delete-alert-channel", Method: http.MethodDelete, Path: "/v1/alert-channels/{id}",
		Summary: "Delete an alert channel", Description: "Its digest in progress is not sent.", Tags: tags, Security: secured,
		DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *alertChannelInput) (*struct{}, error) {
			if err := s.alertChannels.Delete(ctx, principalOf(ctx), in.ID); err != nil {
				return nil, s.problem(err)
			}
			return nil, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "test-alert-channel", Method: http.MethodPost, Path: "/v1/alert-channels/{id}/test",
		Summary: "Send a test message", Description: "Sends a test message to the channel now and says whether it went; nothing is written.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *alertChannelInput) (*service.AlertTestOutput, error) {
			why, err := s.alertChannels.Test(ctx, principalOf(ctx), in.ID)
			if err != nil {
				return nil, s.problem(err)
			}
			out := &service.AlertTestOutput{}
			out.Body.Sent, out.Body.Error = why == "", why
			return out, nil
		})
}

// alertChannelAnswer answers an alert channel operation.
func (s *Server) alertChannelAnswer(c service.AlertChannel, err error) (*alertChannelOutput, error) {
	if err != nil {
		return nil, s.problem(err)
	}
	return &alertChannelOutput{Body: c}, nil
}
