package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

type seriesInput struct {
	Window         string `query:"window" enum:"1h,24h,7d" default:"24h" doc:"1h in minutes, 24h in quarters of an hour, 7d in hours."`
	SubscriptionID string `query:"subscription_id" doc:"Only this subscription's."`
	By             string `query:"by" enum:"all,subscription" default:"all" doc:"One series, or one per subscription."`
}

func (s *Server) registerSeries() {
	huma.Register(s.api, huma.Operation{OperationID: "get-stats-series", Method: http.MethodGet, Path: "/v1/stats/series",
		Summary: "Delivery outcomes over time", Description: "Attempts by outcome and p50/p99 request duration, step by step, " +
			"from the recorder's per-minute views in ClickHouse: what the dashboard's charts draw.",
		Tags: []string{"Messages"}, Security: secured},
		func(ctx context.Context, in *seriesInput) (*service.SeriesOutput, error) {
			out, err := s.reports.Series(ctx, principalOf(ctx), service.SeriesQuery{Window: in.Window, Subscription: in.SubscriptionID, By: in.By})
			if err != nil {
				return nil, s.problem(err)
			}
			return out, nil
		})
}
