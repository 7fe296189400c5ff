package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/recorder/report"
	"github.com/hookpipe/hookpipe/topics"
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
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("statistics need ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			p := principalOf(ctx)
			f := report.Filter{Since: in.Since, Until: in.Until, Subscription: in.SubscriptionID, Tenant: in.Tenant, Type: in.EventType}
			if !p.Admin() {
				if in.Tenant != "" && in.Tenant != p.Tenant {
					return &service.StatsOutput{Body: emptyStats(in)}, nil
				}
				f.Tenant = p.Tenant
			}
			if f.Until.IsZero() {
				f.Until = time.Now()
			}
			if f.Since.IsZero() {
				f.Since = f.Until.Add(-24 * time.Hour)
			}
			if f.Type != "" && f.Type != "*" && topics.ValidatePattern(f.Type) != nil {
				return nil, huma.Error422UnprocessableEntity("invalid statistics query", &huma.ErrorDetail{Location: "query.event_type",
					Message: "a type or prefix.*", Value: f.Type})
			}
			rows, err := report.Stats(ctx, s.ch, s.cfg.Database, in.By, f)
			if err != nil {
				return nil, s.internal(fmt.Errorf("stats: %w", err))
			}
			out := &service.StatsOutput{}
			out.Body.By, out.Body.Since, out.Body.Until, out.Body.Rows = in.By, f.Since.UTC(), f.Until.UTC(), rows
			return out, nil
		})
}

func emptyStats(in *statsInput) (b struct {
	By    string       `json:"by"`
	Since time.Time    `json:"since"`
	Until time.Time    `json:"until"`
	Rows  []report.Row `json:"rows"`
}) {
	b.By, b.Since, b.Until, b.Rows = in.By, in.Since, in.Until, []report.Row{}
	return b
}
