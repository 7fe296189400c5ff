package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

func alertChannelOut(c *topics.AlertChannel) service.AlertChannel {
	out := service.AlertChannel{ID: c.ID, Tenant: c.Tenant, Kind: c.Kind, To: c.To, Types: c.Types, DigestMS: c.Digest().Milliseconds(),
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if out.Types == nil {
		out.Types = []string{}
	}
	out.URL = c.MaskedURL()
	return out
}

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

func (s *Server) registerAlertChannels() {
	tags := []string{"Alert channels"}
	huma.Register(s.api, huma.Operation{OperationID: "list-alert-channels", Method: http.MethodGet, Path: "/v1/alert-channels",
		Summary: "List alert channels", Description: "A tenant key sees its tenant's; an admin every tenant's and the operators'.",
		Tags: tags, Security: secured},
		func(ctx context.Context, _ *struct{}) (*service.AlertChannelsOutput, error) {
			if err := s.alerts.WaitCaughtUp(ctx); err != nil {
				return nil, s.internal(err)
			}
			p := principalOf(ctx)
			out := &service.AlertChannelsOutput{}
			out.Body.Data = []service.AlertChannel{}
			for _, c := range s.alerts.All() {
				if p.Admin() || c.Tenant == p.Tenant {
					out.Body.Data = append(out.Body.Data, alertChannelOut(c))
				}
			}
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "create-alert-channel", Method: http.MethodPost, Path: "/v1/alert-channels",
		Summary: "Add an alert channel", Description: "The channel is told of its tenant's operational events (the operators' of every " +
			"tenant's) in digests, one message per digest window. An email channel needs the API's SMTP server (WEBHOOKS_SMTP_ADDR).",
		Tags: tags, Security: secured, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createAlertChannelInput) (*alertChannelOutput, error) {
			p := principalOf(ctx)
			now := time.Now().UTC()
			c := topics.AlertChannel{ID: topics.NewID("ach_"), Kind: in.Body.Kind, To: in.Body.To, URL: in.Body.URL,
				Types: in.Body.Types, DigestMS: in.Body.DigestMS, CreatedAt: now, UpdatedAt: now}
			if in.Body.Tenant != nil {
				c.Tenant = *in.Body.Tenant
			}
			if !p.Admin() {
				if in.Body.Tenant != nil && *in.Body.Tenant != p.Tenant {
					return nil, huma.Error422UnprocessableEntity("invalid alert channel",
						&huma.ErrorDetail{Location: "body.tenant", Message: "a tenant key adds channels of its own tenant only", Value: *in.Body.Tenant})
				}
				c.Tenant = p.Tenant
			}
			return s.putAlertChannel(ctx, &c)
		})
	huma.Register(s.api, huma.Operation{OperationID: "update-alert-channel", Method: http.MethodPut, Path: "/v1/alert-channels/{id}",
		Summary: "Change an alert channel", Description: "Replaces its settings (the body as when adding it); its tenant stays. " +
			"A digest in progress is sent with the new settings.", Tags: tags, Security: secured},
		func(ctx context.Context, in *updateAlertChannelInput) (*alertChannelOutput, error) {
			cur, err := s.visibleChannel(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			if in.Body.Tenant != nil && *in.Body.Tenant != cur.Tenant {
				return nil, huma.Error422UnprocessableEntity("invalid alert channel",
					&huma.ErrorDetail{Location: "body.tenant", Message: "a channel's tenant does not change: add another channel", Value: *in.Body.Tenant})
			}
			c := topics.AlertChannel{ID: cur.ID, Tenant: cur.Tenant, Kind: in.Body.Kind, To: in.Body.To, URL: in.Body.URL,
				Types: in.Body.Types, DigestMS: in.Body.DigestMS, CreatedAt: cur.CreatedAt, UpdatedAt: time.Now().UTC()}
			return s.putAlertChannel(ctx, &c)
		})
	huma.Register(s.api, huma.Operation{OperationID: "get-alert-channel", Method: http.MethodGet, Path: "/v1/alert-channels/{id}",
		Summary: "Get an alert channel", Tags: tags, Security: secured},
		func(ctx context.Context, in *alertChannelInput) (*alertChannelOutput, error) {
			c, err := s.visibleChannel(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &alertChannelOutput{Body: alertChannelOut(c)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "delete-alert-channel", Method: http.MethodDelete, Path: "/v1/alert-channels/{id}",
		Summary: "Delete an alert channel", Description: "Its digest in progress is not sent.", Tags: tags, Security: secured,
		DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *alertChannelInput) (*struct{}, error) {
			if _, err := s.visibleChannel(ctx, in.ID); err != nil {
				return nil, err
			}
			return nil, s.writeAlerts(ctx, &kgo.Record{Topic: s.names.AlertChannels(), Key: []byte(in.ID)})
		})
	huma.Register(s.api, huma.Operation{OperationID: "test-alert-channel", Method: http.MethodPost, Path: "/v1/alert-channels/{id}/test",
		Summary: "Send a test message", Description: "Sends a test message to the channel now and says whether it went; nothing is written.",
		Tags: tags, Security: secured},
		func(ctx context.Context, in *alertChannelInput) (*service.AlertTestOutput, error) {
			c, err := s.visibleChannel(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			out := &service.AlertTestOutput{}
			if s.alertSender == nil {
				out.Body.Error = "alert channels cannot send: see the API's log"
			} else if err := s.alertSender.Send(ctx, c, alert.TestDigest(c, time.Now())); err != nil {
				out.Body.Error = err.Error()
			}
			out.Body.Sent = out.Body.Error == ""
			return out, nil
		})
}

// putAlertChannel validates c and writes it; a 422 names the field at
// fault.
func (s *Server) putAlertChannel(ctx context.Context, c *topics.AlertChannel) (*alertChannelOutput, error) {
	if err := c.Validate(); err != nil {
		return nil, s.invalid(err, "")
	}
	if c.Kind == topics.AlertEmail && !s.cfg.Alert.Email() {
		return nil, huma.Error422UnprocessableEntity("invalid alert channel",
			&huma.ErrorDetail{Location: "body.kind", Message: "email channels need an SMTP server: WEBHOOKS_SMTP_ADDR is not set", Value: c.Kind})
	}
	r := &kgo.Record{Topic: s.names.AlertChannels(), Key: []byte(c.ID), Value: c.EncodeWith(s.cfg.Secrets)}
	if err := s.writeAlerts(ctx, r); err != nil {
		return nil, err
	}
	return &alertChannelOutput{Body: alertChannelOut(c)}, nil
}

// visibleChannel returns the channel id as the request's principal may
// see it: another tenant's, or the operators' to a tenant key, is missing.
func (s *Server) visibleChannel(ctx context.Context, id string) (*topics.AlertChannel, error) {
	if err := s.alerts.WaitCaughtUp(ctx); err != nil {
		return nil, s.internal(err)
	}
	p := principalOf(ctx)
	c, ok := s.alerts.Get(id)
	if !ok || (!p.Admin() && c.Tenant != p.Tenant) {
		return nil, huma.Error404NotFound("no alert channel " + id)
	}
	return c, nil
}

// writeAlerts produces a record of the alert-channels topic and waits
// until this replica's table applied it (read your writes).
func (s *Server) writeAlerts(ctx context.Context, r *kgo.Record) error {
	if err := s.produce(ctx, r); err != nil {
		return err
	}
	if err := s.alerts.WaitApplied(ctx, r); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return huma.Error503ServiceUnavailable("written, but not yet read back in time")
		}
		return s.internal(err)
	}
	return nil
}
