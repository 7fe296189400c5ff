package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/session"

	"github.com/hookpipe/hookpipe/topics"
)

type portalSessionInput struct {
	Body struct {
		Tenant     string `json:"tenant,omitempty" doc:"The tenant the portal shows; a tenant key's own (required with an admin key)."`
		TTLSeconds int    `json:"ttl_seconds,omitempty" minimum:"60" maximum:"86400" default:"3600" doc:"How long the link works."`
	}
}

type portalSessionOutput struct {
	Body struct {
		URL       string    `json:"url" doc:"The portal's path on this API, with its token: link to it or embed it in an iframe. Whoever holds it sees the tenant's endpoints, messages and dead letters, and the event catalog, until it expires."`
		Tenant    string    `json:"tenant"`
		ExpiresAt time.Time `json:"expires_at"`
	}
}

func (s *Server) registerPortalSessions() {
	huma.Register(s.api, huma.Operation{OperationID: "create-portal-session", Method: http.MethodPost, Path: "/v1/portal-sessions",
		Summary: "Create a portal link", Description: "A short-lived signed link to the tenant portal: the tenant's endpoints " +
			"(manage, test), messages and dead letters (retry, redrive), the event catalog (read only), nothing of another tenant.",
		Tags: []string{"Portal"}, Security: secured, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *portalSessionInput) (*portalSessionOutput, error) {
			tenant := in.Body.Tenant
			if p := principalOf(ctx); !p.Admin() {
				if tenant != "" && tenant != p.Tenant {
					return nil, huma.Error422UnprocessableEntity("invalid portal session", &huma.ErrorDetail{Location: "body.tenant",
						Message: "a tenant key opens its own tenant's portal", Value: tenant})
				}
				tenant = p.Tenant
			}
			if tenant == "" {
				return nil, huma.Error422UnprocessableEntity("invalid portal session", &huma.ErrorDetail{Location: "body.tenant",
					Message: "an admin key names the tenant"})
			}
			if err := topics.ValidateID("portal session", "tenant", tenant); err != nil {
				return nil, s.invalid(err, "")
			}
			ttl := time.Duration(in.Body.TTLSeconds) * time.Second
			sess := session.New(session.Session{Tenant: tenant, Portal: true}, ttl)
			out := &portalSessionOutput{}
			out.Body.URL = "/portal/" + s.signer.Sign(sess) + "/"
			out.Body.Tenant, out.Body.ExpiresAt = tenant, time.Unix(sess.Expires, 0).UTC()
			return out, nil
		})
}
