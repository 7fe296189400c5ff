package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

func (s *Server) registerLag() {
	huma.Register(s.api, huma.Operation{OperationID: "get-lag", Method: http.MethodGet, Path: "/v1/lag",
		Summary: "Consumer lag", Description: "As `webhookctl lag`: each component's consumer group (by its default name) and " +
			"how many records it has yet to read, per topic; and the ordered keys held, with the one held longest.", Tags: []string{"Operations"}, Security: secured,
		Metadata: map[string]any{adminOnly: true}},
		func(ctx context.Context, _ *struct{}) (*service.LagOutput, error) {
			out, err := s.lag.Get(ctx, principalOf(ctx))
			if err != nil {
				return nil, s.problem(err)
			}
			return out, nil
		})
}
