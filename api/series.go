package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/recorder/schema"
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
			if s.ch == nil {
				return nil, huma.Error503ServiceUnavailable("statistics need ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
			}
			w := service.SeriesWindows[in.Window]
			now := time.Now().UTC()
			end := now.Truncate(w.Step).Add(w.Step)
			start := end.Add(-w.Span)
			var where []string
			args := []any{start}
			if p := principalOf(ctx); !p.Admin() {
				where, args = append(where, "tenant = ?"), append(args, p.Tenant)
			}
			if in.SubscriptionID != "" {
				where, args = append(where, "subscription_id = ?"), append(args, in.SubscriptionID)
			}
			cond := "minute >= ?"
			for _, c := range where {
				cond += " AND " + c
			}
			key := "''"
			if in.By == "subscription" {
				key = "subscription_id"
			}
			step := int(w.Step.Seconds())
			bucket := fmt.Sprintf("toDateTime(intDiv(toUInt32(minute), %d) * %d, 'UTC')", step, step)
			byKey := map[string]map[int64]*service.Point{}
			var order []string
			point := func(k string, at time.Time) *service.Point {
				m, ok := byKey[k]
				if !ok {
					m = map[int64]*service.Point{}
					byKey[k] = m
					order = append(order, k)
				}
				p, ok := m[at.Unix()]
				if !ok {
					p = &service.Point{At: at.UTC()}
					m[at.Unix()] = p
				}
				return p
			}
			db := s.cfg.Database
			rows, err := s.ch.Query(ctx, "SELECT "+key+" AS k, "+bucket+" AS t, sumIf(attempts, outcome = 'success'), "+
				"sumIf(attempts, outcome = 'retry'), sumIf(attempts, outcome = 'dead'), "+
				"sumIf(attempts, outcome NOT IN ('success', 'retry', 'dead')) FROM "+db+"."+schema.TableOutcomes+
				" WHERE "+cond+" GROUP BY k, t ORDER BY k, t", args...)
			if err != nil {
				return nil, s.internal(fmt.Errorf("series: %w", err))
			}
			for rows.Next() {
				var k string
				var at time.Time
				var ok, retry, dead, held uint64
				if err := rows.Scan(&k, &at, &ok, &retry, &dead, &held); err != nil {
					rows.Close()
					return nil, s.internal(fmt.Errorf("series: %w", err))
				}
				p := point(k, at)
				p.Success, p.Retry, p.Dead, p.HeldBack = ok, retry, dead, held
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, s.internal(fmt.Errorf("series: %w", err))
			}
			rows, err = s.ch.Query(ctx, "SELECT "+key+" AS k, "+bucket+" AS t, quantilesMerge("+schema.Quantiles+
				")(duration_ms_quantiles) FROM "+db+"."+schema.TableLatency+" WHERE "+cond+" GROUP BY k, t ORDER BY k, t", args...)
			if err != nil {
				return nil, s.internal(fmt.Errorf("series: %w", err))
			}
			defer rows.Close()
			for rows.Next() {
				var k string
				var at time.Time
				var q []float64
				if err := rows.Scan(&k, &at, &q); err != nil {
					return nil, s.internal(fmt.Errorf("series: %w", err))
				}
				p := point(k, at)
				p.P50MS, p.P99MS = medianAndP99(q)
			}
			if err := rows.Err(); err != nil {
				return nil, s.internal(fmt.Errorf("series: %w", err))
			}
			whole := map[string][]float64{}
			rows, err = s.ch.Query(ctx, "SELECT "+key+" AS k, quantilesMerge("+schema.Quantiles+")(duration_ms_quantiles) FROM "+
				db+"."+schema.TableLatency+" WHERE "+cond+" GROUP BY k", args...)
			if err != nil {
				return nil, s.internal(fmt.Errorf("series: %w", err))
			}
			defer rows.Close()
			for rows.Next() {
				var k string
				var q []float64
				if err := rows.Scan(&k, &q); err != nil {
					return nil, s.internal(fmt.Errorf("series: %w", err))
				}
				whole[k] = q
			}
			if err := rows.Err(); err != nil {
				return nil, s.internal(fmt.Errorf("series: %w", err))
			}
			out := &service.SeriesOutput{}
			out.Body.Window, out.Body.StepSeconds, out.Body.Series = in.Window, step, []service.Series{}
			if len(order) == 0 && in.By != "subscription" {
				order = append(order, "")
			}
			for _, k := range order {
				se := service.Series{Key: k, Points: make([]service.Point, 0, int(w.Span/w.Step))}
				se.P50MS, se.P99MS = medianAndP99(whole[k])
				for at := start; at.Before(end); at = at.Add(w.Step) {
					if p, ok := byKey[k][at.Unix()]; ok {
						se.Points = append(se.Points, *p)
					} else {
						se.Points = append(se.Points, service.Point{At: at})
					}
				}
				out.Body.Series = append(out.Body.Series, se)
			}
			return out, nil
		})
}

// medianAndP99 reads the 0.5 and 0.99 of schema.Quantiles; nil for a
// window without requests, whose quantiles ClickHouse answers as NaN (JSON
// has no NaN).
func medianAndP99(q []float64) (p50, p99 *float64) {
	if len(q) != 3 || math.IsNaN(q[0]) || math.IsNaN(q[2]) {
		return nil, nil
	}
	return &q[0], &q[2]
}
