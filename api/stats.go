package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

type statsInput struct {
	By             string    `query:"by" enum:"subscription,tenant,type" default:"subscription" doc:"Group by subscription, tenant or event type."`
	SubscriptionID string    `query:"subscription_id" doc:"Only this subscription."`
	Tenant         string    `query:"tenant" doc:"Only this tenant (a tenant key: always its own)."`
	EventType      string    `query:"event_type" doc:"Only this type, or prefix.*."`
	Since          time.Time `query:"since" doc:"From (default: 24 hours ago)."`
	Until          time.Time `query:"until" doc:"To (default: now)."`
}

func (s *Server) registerStats() {
	huma.Register(s.api, huma.Operation{OperationID: "get-stats", Method: http.MethodGet, Path: "/v1/stats",
		Summary: "Delivery statistics", Description: "As `webhookctl stats`: per subscription, tenant or type, requests, " +
			"success rate (all and first attempts), p50/p99 duration, dead letters, attempts held back and failures by " +
			"category, from the attempts in ClickHouse.", Tags: []string{"Messages"}, Security: secured},
		func(ctx context.Context, in *statsInput) (*service.StatsOutput, error) {
			out, err := s.reports.Stats(ctx, principalOf(ctx), service.StatsQuery{By: in.By, Subscription: in.SubscriptionID,
				Tenant: in.Tenant, Type: in.EventType, Since: in.Since, Until: in.Until})
			if err != nil {
				return nil, s.problem(err)
			}
			return out, nil
		})
}
