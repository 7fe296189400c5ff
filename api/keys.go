package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/keys"
	"github.com/hookpipe/hookpipe/topics"
)

// APIKey is an API key as the API shows it: never the key itself, but in
// the answer to its creation.
type APIKey struct {
	ID        string     `json:"id" doc:"The key's id (key_...)."`
	Name      string     `json:"name,omitempty" doc:"What the key is for."`
	Tenant    string     `json:"tenant,omitempty" doc:"The tenant a tenant key is limited to; absent for an admin key."`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Key       string     `json:"key,omitempty" doc:"The key, only in the answer to its creation: it is stored as a hash."`
}

func apiKeyOf(k topics.APIKey) APIKey {
	return APIKey{ID: k.ID, Name: k.Name, Tenant: k.Tenant, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

type createKeyInput struct {
	Body struct {
		Name   string `json:"name,omitempty" maxLength:"200" doc:"What the key is for."`
		Tenant string `json:"tenant,omitempty" maxLength:"255" doc:"Limit the key to this tenant; absent: an admin key."`
	}
}

type keyOutput struct{ Body APIKey }

type keysOutput struct {
	Body struct {
		Data []APIKey `json:"data"`
	}
}

type keyIDInput struct {
	ID string `path:"id" doc:"The key's id."`
}

func (s *Server) registerKeys() {
	meta := map[string]any{adminOnly: true}
	huma.Register(s.api, huma.Operation{OperationID: "create-api-key", Method: http.MethodPost, Path: "/v1/api-keys",
		Summary: "Create an API key", Description: "Admin only. The key is in the answer, once; only its hash is stored.",
		Tags: []string{"API keys"}, Security: secured, Metadata: meta, DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createKeyInput) (*keyOutput, error) {
			key, rec, err := keys.Create(ctx, s.cl, s.names, in.Body.Name, in.Body.Tenant)
			if err != nil {
				return nil, s.writeFailed(ctx, err)
			}
			if err := s.keys.WaitCaughtUp(ctx); err != nil {
				return nil, s.internal(err)
			}
			out := apiKeyOf(rec)
			out.Key = key
			return &keyOutput{Body: out}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "list-api-keys", Method: http.MethodGet, Path: "/v1/api-keys",
		Summary: "List API keys", Description: "Admin only. Revoked keys too, with the time they were revoked.",
		Tags: []string{"API keys"}, Security: secured, Metadata: meta},
		func(ctx context.Context, _ *struct{}) (*keysOutput, error) {
			if err := s.keys.WaitCaughtUp(ctx); err != nil {
				return nil, s.internal(err)
			}
			out := &keysOutput{}
			out.Body.Data = []APIKey{}
			for _, k := range s.keys.All() {
				out.Body.Data = append(out.Body.Data, apiKeyOf(k))
			}
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "revoke-api-key", Method: http.MethodDelete, Path: "/v1/api-keys/{id}",
		Summary: "Revoke an API key", Description: "Admin only. Every API replica refuses the key once it has read the revocation (within a second or two).",
		Tags: []string{"API keys"}, Security: secured, Metadata: meta, DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *keyIDInput) (*struct{}, error) {
			if err := s.keys.WaitCaughtUp(ctx); err != nil {
				return nil, s.internal(err)
			}
			if _, err := keys.Revoke(ctx, s.cl, s.names, s.keys, in.ID); err != nil {
				if errors.Is(err, keys.ErrNotFound) {
					return nil, huma.Error404NotFound("no API key " + in.ID)
				}
				return nil, s.writeFailed(ctx, err)
			}
			if err := s.keys.WaitCaughtUp(ctx); err != nil {
				return nil, s.internal(err)
			}
			return nil, nil
		})
}
