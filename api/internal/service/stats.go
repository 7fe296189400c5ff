package service

import (
	"context"
	"fmt"
	"time"

	"github.com/hookpipe/hookpipe/recorder/report"
	"github.com/hookpipe/hookpipe/topics"
)

// Reports are the delivery statistics of the recorder's tables in
// ClickHouse: per subscription, tenant or type (Stats) and step by step
// (Series).
type Reports struct {
	ch report.Querier // nil: no ClickHouse
	db string
}

// NewReports reads the recorder's tables in database db of ch; a nil ch
// answers every read Unavailable.
func NewReports(ch report.Querier, db string) *Reports { return &Reports{ch: ch, db: db} }

// noClickHouse refuses a read of the statistics without ClickHouse.
func (r *Reports) noClickHouse() error {
	if r.ch == nil {
		return unavailable("statistics need ClickHouse (WEBHOOKS_CLICKHOUSE_ADDR)")
	}
	return nil
}

// StatsQuery selects the statistics: grouped By subscription, tenant or
// type (report.Keys), of one subscription, tenant or type (or prefix.*)
// when set, from Since (24 hours before Until by default) to Until (now).
type StatsQuery struct {
	By, Subscription, Tenant, Type string
	Since, Until                   time.Time
}

// StatsOutput is the answer of GET /v1/stats.
type StatsOutput struct {
	Body struct {
		By    string       `json:"by"`
		Since time.Time    `json:"since"`
		Until time.Time    `json:"until"`
		Rows  []report.Row `json:"rows"`
	}
}

// Stats are the statistics q selects, of the tenants c sees: a tenant key
// asking for another tenant's gets none.
func (r *Reports) Stats(ctx context.Context, c Caller, q StatsQuery) (*StatsOutput, error) {
	if err := r.noClickHouse(); err != nil {
		return nil, err
	}
	if _, ok := report.Keys[q.By]; !ok {
		return nil, invalidQuery("statistics", "by", "subscription, tenant or type", q.By)
	}
	out := &StatsOutput{}
	out.Body.By, out.Body.Rows = q.By, []report.Row{}
	f := report.Filter{Since: q.Since, Until: q.Until, Subscription: q.Subscription, Tenant: q.Tenant, Type: q.Type}
	if !c.Admin() {
		if q.Tenant != "" && q.Tenant != c.Tenant {
			out.Body.Since, out.Body.Until = q.Since, q.Until
			return out, nil
		}
		f.Tenant = c.Tenant
	}
	if f.Until.IsZero() {
		f.Until = time.Now()
	}
	if f.Since.IsZero() {
		f.Since = f.Until.Add(-24 * time.Hour)
	}
	if f.Type != "" && f.Type != "*" && topics.ValidatePattern(f.Type) != nil {
		return nil, invalidQuery("statistics", "event_type", "a type or prefix.*", f.Type)
	}
	rows, err := report.Stats(ctx, r.ch, r.db, q.By, f)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out.Body.Since, out.Body.Until, out.Body.Rows = f.Since.UTC(), f.Until.UTC(), rows
	return out, nil
}
