package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

func (s *Server) registerLag() {
	huma.Register(s.api, huma.Operation{OperationID: "get-lag", Method: http.MethodGet, Path: "/v1/lag",
		Summary: "Consumer lag", Description: "As `webhookctl lag`: each component's consumer group (by its default name) and " +
			"how many records it has yet to read, per topic; and the ordered keys held, with the one held longest.", Tags: []string{"Operations"}, Security: secured,
		Metadata: map[string]any{adminOnly: true}},
		func(ctx context.Context, _ *struct{}) (*service.LagOutput, error) {
			n := s.names
			adm := kadm.NewClient(s.cl)
			out := &service.LagOutput{}
			out.Body.Data = []service.GroupLag{}
			for _, g := range []struct {
				group  string
				topics []string
			}{
				{topics.GroupDispatcher, []string{n.Events()}},
				{topics.GroupDeliverer, append(n.DeliveryTopics(), n.Redeliveries())},
				{topics.GroupRetrier, n.RetryTopics()},
				{topics.GroupRecorder, []string{n.Attempts()}},
			} {
				lags, err := ops.GroupLag(ctx, adm, g.group, g.topics...)
				if err != nil {
					return nil, s.internal(fmt.Errorf("lag of %s: %w", g.group, err))
				}
				for _, t := range g.topics {
					row := service.GroupLag{Group: g.group, Topic: t}
					for _, l := range lags {
						if l.Topic == t {
							row.Lag += l.Lag
						}
					}
					out.Body.Data = append(out.Body.Data, row)
				}
			}
			if s.holds != nil {
				h := &service.HeldKeys{Keys: s.holds.Len()}
				if key, hold, ok := s.holds.Oldest(); ok {
					h.Longest, h.Head, h.Since = key, hold.Head, &hold.Since
				}
				out.Body.Holds = h
			}
			return out, nil
		})
}
