package service

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/hookpipe/hookpipe/recorder/schema"
)

// SeriesWindows are the windows a series covers, each with its step.
var SeriesWindows = map[string]struct{ Span, Step time.Duration }{
	"1h":  {time.Hour, time.Minute},
	"24h": {24 * time.Hour, 15 * time.Minute},
	"7d":  {7 * 24 * time.Hour, time.Hour},
}

// Point is one step of a series.
type Point struct {
	At       time.Time `json:"at" doc:"The step's start."`
	Success  uint64    `json:"success" doc:"Attempts answered 2xx."`
	Retry    uint64    `json:"retry" doc:"Failed attempts sent to a retry tier."`
	Dead     uint64    `json:"dead" doc:"Failed attempts dead-lettered."`
	HeldBack uint64    `json:"held_back" doc:"Attempts not made: blocked, throttled or skipped."`
	P50MS    *float64  `json:"p50_ms"`
	P99MS    *float64  `json:"p99_ms"`
}

// Series is the delivery outcomes of a window, step by step.
type Series struct {
	Key    string  `json:"key,omitempty" doc:"The subscription, when by subscription."`
	Points []Point `json:"points" doc:"Every step of the window, oldest first; steps without attempts are zero."`
	// P50MS and P99MS are over the whole window.
	P50MS *float64 `json:"p50_ms" doc:"Median request duration over the whole window."`
	P99MS *float64 `json:"p99_ms"`
}

// SeriesOutput is the answer of GET /v1/stats/series.
type SeriesOutput struct {
	Body struct {
		Window      string   `json:"window"`
		StepSeconds int      `json:"step_seconds"`
		Series      []Series `json:"series"`
	}
}

// SeriesQuery selects a series: its Window (a key of SeriesWindows), one
// Subscription's when set, By "all" (one series) or "subscription" (one
// per subscription).
type SeriesQuery struct {
	Window, Subscription, By string
}

// Series are the delivery outcomes q selects, step by step, of the
// tenants c sees, from the recorder's per-minute views.
func (r *Reports) Series(ctx context.Context, c Caller, q SeriesQuery) (*SeriesOutput, error) {
	if err := r.noClickHouse(); err != nil {
		return nil, err
	}
	w, ok := SeriesWindows[q.Window]
	if !ok {
		return nil, invalidQuery("series", "window", "1h, 24h or 7d", q.Window)
	}
	if q.By != "all" && q.By != "subscription" {
		return nil, invalidQuery("series", "by", "all or subscription", q.By)
	}
	now := time.Now().UTC()
	end := now.Truncate(w.Step).Add(w.Step)
	start := end.Add(-w.Span)
	cond, args := "minute >= ?", []any{start}
	if !c.Admin() {
		cond, args = cond+" AND tenant = ?", append(args, c.Tenant)
	}
	if q.Subscription != "" {
		cond, args = cond+" AND subscription_id = ?", append(args, q.Subscription)
	}
	key := "''"
	if q.By == "subscription" {
		key = "subscription_id"
	}
	step := int(w.Step.Seconds())
	bucket := fmt.Sprintf("toDateTime(intDiv(toUInt32(minute), %d) * %d, 'UTC')", step, step)
	byKey := map[string]map[int64]*Point{}
	var order []string
	point := func(k string, at time.Time) *Point {
		m, ok := byKey[k]
		if !ok {
			m = map[int64]*Point{}
			byKey[k] = m
			order = append(order, k)
		}
		p, ok := m[at.Unix()]
		if !ok {
			p = &Point{At: at.UTC()}
			m[at.Unix()] = p
		}
		return p
	}
	err := r.each(ctx, func(scan func(...any) error) error {
		var k string
		var at time.Time
		var ok, retry, dead, held uint64
		if err := scan(&k, &at, &ok, &retry, &dead, &held); err != nil {
			return err
		}
		p := point(k, at)
		p.Success, p.Retry, p.Dead, p.HeldBack = ok, retry, dead, held
		return nil
	}, "SELECT "+key+" AS k, "+bucket+" AS t, sumIf(attempts, outcome = 'success'), "+
		"sumIf(attempts, outcome = 'retry'), sumIf(attempts, outcome = 'dead'), "+
		"sumIf(attempts, outcome NOT IN ('success', 'retry', 'dead')) FROM "+r.db+"."+schema.TableOutcomes+
		" WHERE "+cond+" GROUP BY k, t ORDER BY k, t", args...)
	if err != nil {
		return nil, err
	}
	err = r.each(ctx, func(scan func(...any) error) error {
		var k string
		var at time.Time
		var qs []float64
		if err := scan(&k, &at, &qs); err != nil {
			return err
		}
		p := point(k, at)
		p.P50MS, p.P99MS = medianAndP99(qs)
		return nil
	}, "SELECT "+key+" AS k, "+bucket+" AS t, quantilesMerge("+schema.Quantiles+
		")(duration_ms_quantiles) FROM "+r.db+"."+schema.TableLatency+" WHERE "+cond+" GROUP BY k, t ORDER BY k, t", args...)
	if err != nil {
		return nil, err
	}
	whole := map[string][]float64{}
	err = r.each(ctx, func(scan func(...any) error) error {
		var k string
		var qs []float64
		if err := scan(&k, &qs); err != nil {
			return err
		}
		whole[k] = qs
		return nil
	}, "SELECT "+key+" AS k, quantilesMerge("+schema.Quantiles+")(duration_ms_quantiles) FROM "+
		r.db+"."+schema.TableLatency+" WHERE "+cond+" GROUP BY k", args...)
	if err != nil {
		return nil, err
	}
	out := &SeriesOutput{}
	out.Body.Window, out.Body.StepSeconds, out.Body.Series = q.Window, step, []Series{}
	if len(order) == 0 && q.By != "subscription" {
		order = append(order, "")
	}
	for _, k := range order {
		se := Series{Key: k, Points: make([]Point, 0, int(w.Span/w.Step))}
		se.P50MS, se.P99MS = medianAndP99(whole[k])
		for at := start; at.Before(end); at = at.Add(w.Step) {
			if p, ok := byKey[k][at.Unix()]; ok {
				se.Points = append(se.Points, *p)
			} else {
				se.Points = append(se.Points, Point{At: at})
			}
		}
		out.Body.Series = append(out.Body.Series, se)
	}
	return out, nil
}

// each runs query and hands each row's scan to row.
func (r *Reports) each(ctx context.Context, row func(scan func(...any) error) error, query string, args ...any) error {
	rows, err := r.ch.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("series: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return fmt.Errorf("series: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("series: %w", err)
	}
	return nil
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
