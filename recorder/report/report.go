// Package report computes delivery statistics from the attempts table, for
// `webhookctl stats` and the API's /v1/stats alike.
package report

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/schema"
)

// Row is one group of attempts.
type Row struct {
	// Key is the subscription id, tenant or event type the row is about.
	Key string `json:"key"`
	// Requests are the attempts that made an HTTP request (outcomes
	// success, retry and dead).
	Requests  uint64 `json:"requests"`
	Succeeded uint64 `json:"succeeded"`
	// SuccessRate is succeeded / requests; null without requests.
	SuccessRate *float64 `json:"success_rate"`
	// FirstRequests and FirstSucceeded count first attempts (attempt 1).
	FirstRequests    uint64   `json:"first_attempts"`
	FirstSucceeded   uint64   `json:"first_attempts_succeeded"`
	FirstSuccessRate *float64 `json:"first_attempt_success_rate"`
	// P50MS and P99MS are request durations in milliseconds; null without
	// requests.
	P50MS *float64 `json:"p50_ms"`
	P99MS *float64 `json:"p99_ms"`
	// Dead counts attempts that sent the delivery to the dead-letter topic.
	Dead uint64 `json:"dead"`
	// HeldBack counts attempts not made: blocked, throttled or skipped.
	HeldBack uint64 `json:"held_back"`
	// Failures counts failed requests (retry and dead) by failure category.
	Failures map[string]uint64 `json:"failures"`
}

// Keys are the groupings: subscription, tenant or type, to their column.
var Keys = map[string]string{"subscription": "subscription_id", "tenant": "tenant", "type": "event_type"}

// Filter narrows the attempts counted: [Since, Until), and, when set, one
// subscription, one tenant, one type or prefix.* pattern.
type Filter struct {
	Since, Until               time.Time
	Subscription, Tenant, Type string
}

// Querier is what a report needs of a ClickHouse connection.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
}

const requested = "outcome IN ('success', 'retry', 'dead')"

// Stats runs the two queries of a report on database db, grouped by (a
// key of Keys): the counts and durations per key, then the failures per
// key and category. FINAL folds copies of replayed attempts, so the
// numbers are exact.
func Stats(ctx context.Context, ch Querier, db, by string, f Filter) ([]Row, error) {
	key := Keys[by]
	until := f.Until.Unix()
	if f.Until.Nanosecond() > 0 {
		until++
	}
	where := []string{"ts >= toDateTime(?)", "ts < toDateTime(?)"}
	args := []any{f.Since.Unix(), until}
	if f.Subscription != "" {
		where, args = append(where, "subscription_id = ?"), append(args, f.Subscription)
	}
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	switch {
	case f.Type == "" || f.Type == "*":
	case strings.HasSuffix(f.Type, ".*"):
		where, args = append(where, "startsWith(event_type, ?)"), append(args, strings.TrimSuffix(f.Type, "*"))
	default:
		where, args = append(where, "event_type = ?"), append(args, f.Type)
	}
	from := " FROM " + db + "." + schema.TableAttempts + " FINAL WHERE " + strings.Join(where, " AND ")
	q := `SELECT ` + key + ` AS k,
    countIf(` + requested + `) AS requests,
    countIf(outcome = 'success') AS succeeded,
    countIf(attempt = 1 AND ` + requested + `) AS first_requests,
    countIf(attempt = 1 AND outcome = 'success') AS first_succeeded,
    countIf(outcome = 'dead') AS dead,
    countIf(outcome IN ('blocked', 'throttled', 'skipped')) AS held_back,
    quantilesIf(0.5, 0.99)(duration_ms, ` + requested + `) AS q` + from + `
GROUP BY k ORDER BY k`
	res, err := ch.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	out := []Row{}
	index := map[string]int{}
	for res.Next() {
		var r Row
		var q []float64
		if err := res.Scan(&r.Key, &r.Requests, &r.Succeeded, &r.FirstRequests, &r.FirstSucceeded, &r.Dead, &r.HeldBack, &q); err != nil {
			return nil, err
		}
		r.SuccessRate = ratio(r.Succeeded, r.Requests)
		r.FirstSuccessRate = ratio(r.FirstSucceeded, r.FirstRequests)
		if r.Requests > 0 && len(q) == 2 {
			r.P50MS, r.P99MS = finite(q[0]), finite(q[1])
		}
		r.Failures = map[string]uint64{}
		index[r.Key] = len(out)
		out = append(out, r)
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	fres, err := ch.Query(ctx, `SELECT `+key+` AS k, failure_category, count()`+from+
		` AND outcome IN ('retry', 'dead') GROUP BY k, failure_category`, args...)
	if err != nil {
		return nil, err
	}
	defer fres.Close()
	for fres.Next() {
		var k, category string
		var n uint64
		if err := fres.Scan(&k, &category, &n); err != nil {
			return nil, err
		}
		if category == "" {
			category = "unknown"
		}
		if i, ok := index[k]; ok {
			out[i].Failures[category] = n
		}
	}
	return out, fres.Err()
}

func ratio(n, d uint64) *float64 {
	if d == 0 {
		return nil
	}
	r := float64(n) / float64(d)
	return &r
}

func finite(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}
