package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

// statsRow is one group of attempts; also the JSON shape of a row of stats.
type statsRow struct {
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

// statsReport is the JSON shape of stats.
type statsReport struct {
	By    string     `json:"by"`
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	Rows  []statsRow `json:"rows"`
}

// statsKeys maps --by to the column grouped by.
var statsKeys = map[string]string{"subscription": "subscription_id", "tenant": "tenant", "type": "event_type"}

const requested = "outcome IN ('success', 'retry', 'dead')"

func statsCmd(fs *flag.FlagSet) runFunc {
	var chf clickhouseFlags
	chf.define(fs)
	by := fs.String("by", "subscription", "group by subscription, tenant or type")
	sub := fs.String("subscription", "", "only this subscription")
	tenant := fs.String("tenant", "", "only this tenant")
	typ := fs.String("type", "", "only this event type: a type or prefix.*")
	var times timeRange
	times.define(fs, "attempts made")
	if f := fs.Lookup("since"); f != nil {
		f.Usage += " (default 24h)"
	}
	return func(ctx context.Context, c *cli, _ []string) error {
		key, ok := statsKeys[*by]
		if !ok {
			return usagef("--by %q: want subscription, tenant or type", *by)
		}
		if *typ != "" && topics.ValidatePattern(*typ) != nil {
			return usagef("--type %q: want a type or prefix.*", *typ)
		}
		if times.since == "" {
			times.since = "24h"
		}
		now := time.Now()
		since, until, err := times.resolve(now)
		if err != nil {
			return err
		}
		if until.IsZero() {
			until = now
		}
		if !since.Before(until) {
			return usagef("--since %s is not before now", times.since)
		}
		where := []string{"ts >= toDateTime(?)", "ts < toDateTime(?)"}
		args := []any{since.Unix(), until.Unix() + boolInt(until.Nanosecond() > 0)}
		if *sub != "" {
			where, args = append(where, "subscription_id = ?"), append(args, *sub)
		}
		if *tenant != "" {
			where, args = append(where, "tenant = ?"), append(args, *tenant)
		}
		switch {
		case *typ == "*":
		case strings.HasSuffix(*typ, ".*"):
			where, args = append(where, "startsWith(event_type, ?)"), append(args, strings.TrimSuffix(*typ, "*"))
		case *typ != "":
			where, args = append(where, "event_type = ?"), append(args, *typ)
		}
		ch, err := c.connectClickHouse(ctx, &chf)
		if err != nil {
			return err
		}
		defer ch.Close()
		rows, err := ch.stats(ctx, key, strings.Join(where, " AND "), args)
		if err != nil {
			return fmt.Errorf("querying ClickHouse: %w", ch.explain(err))
		}
		rep := statsReport{By: *by, Since: since.UTC(), Until: until.UTC(), Rows: rows}
		if c.output == outputJSON {
			return c.printJSON(rep)
		}
		return c.printStats(rep)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// stats runs the two queries of a report: the counts and durations per
// key, then the failures per key and category. FINAL folds copies of
// replayed attempts, so the numbers are exact.
func (ch *clickhouseConn) stats(ctx context.Context, key, where string, args []any) ([]statsRow, error) {
	from := " FROM " + ch.db + "." + schema.TableAttempts + " FINAL WHERE " + where
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
	out := []statsRow{}
	index := map[string]int{}
	for res.Next() {
		var r statsRow
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
		if i, ok := index[k]; ok {
			out[i].Failures[or(category, "unknown")] = n
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

func (c *cli) printStats(rep statsReport) error {
	fmt.Fprintf(c.stdout, "attempts from %s to %s\n\n", formatTime(rep.Since), formatTime(rep.Until))
	if len(rep.Rows) == 0 {
		fmt.Fprintln(c.stdout, "no attempts recorded in this window")
		return nil
	}
	tw := newTable(c.stdout)
	fmt.Fprintf(tw, "%s\tREQUESTS\tSUCCESS\tFIRST TRY\tP50\tP99\tDEAD\tHELD BACK\tFAILURES\n", strings.ToUpper(rep.By))
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", orDash(r.Key), r.Requests, percent(r.SuccessRate),
			percent(r.FirstSuccessRate), millis(r.P50MS), millis(r.P99MS), r.Dead, r.HeldBack, failures(r.Failures))
	}
	return tw.Flush()
}

func percent(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", *p*100)
}

func millis(ms *float64) string {
	if ms == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fms", *ms)
}

// failures renders counts by category, largest first: "server_error:12 timeout:3".
func failures(m map[string]uint64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
