package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

// GroupLag is how far one consumer group of the pipeline is behind on one
// topic.
type GroupLag struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	Lag   int64  `json:"lag" doc:"Records after the group's committed offsets, summed over partitions; for the retrier, the retries held until due."`
}

// HeldKeys sums up the ordered keys held behind a failed delivery (the
// holds topic): how many, and the one held longest.
type HeldKeys struct {
	Keys    int        `json:"keys" doc:"Ordered keys held now."`
	Longest string     `json:"longest,omitempty" doc:"The delivery key held longest: subscription id, '/', ordering key."`
	Head    string     `json:"head,omitempty" doc:"The event whose outcome releases that key."`
	Since   *time.Time `json:"since,omitempty" doc:"Since when that key has been held."`
}

type lagOutput struct {
	Body struct {
		Data  []GroupLag `json:"data"`
		Holds *HeldKeys  `json:"holds,omitempty" doc:"The ordered keys held; absent when this replica does not read the holds topic."`
	}
}

func (s *Server) registerLag() {
	huma.Register(s.api, huma.Operation{OperationID: "get-lag", Method: http.MethodGet, Path: "/v1/lag",
		Summary: "Consumer lag", Description: "As `webhookctl lag`: each component's consumer group (by its default name) and " +
			"how many records it has yet to read, per topic; and the ordered keys held, with the one held longest.", Tags: []string{"Operations"}, Security: secured,
		Metadata: map[string]any{adminOnly: true}},
		func(ctx context.Context, _ *struct{}) (*lagOutput, error) {
			n := s.names
			adm := kadm.NewClient(s.cl)
			out := &lagOutput{}
			out.Body.Data = []GroupLag{}
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
					row := GroupLag{Group: g.group, Topic: t}
					for _, l := range lags {
						if l.Topic == t {
							row.Lag += l.Lag
						}
					}
					out.Body.Data = append(out.Body.Data, row)
				}
			}
			if s.holds != nil {
				h := &HeldKeys{Keys: s.holds.Len()}
				if key, hold, ok := s.holds.Oldest(); ok {
					h.Longest, h.Head, h.Since = key, hold.Head, &hold.Since
				}
				out.Body.Holds = h
			}
			return out, nil
		})
}
