package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/recorder/report"
	"github.com/hookpipe/hookpipe/topics"
)

// statsRow is one group of attempts; also the JSON shape of a row of stats.
type statsRow = report.Row

// statsReport is the JSON shape of stats.
type statsReport struct {
	By    string     `json:"by"`
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	Rows  []statsRow `json:"rows"`
}

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
		if _, ok := report.Keys[*by]; !ok {
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
		ch, err := c.connectClickHouse(ctx, &chf)
		if err != nil {
			return err
		}
		defer ch.Close()
		rows, err := report.Stats(ctx, ch, ch.db, *by, report.Filter{Since: since, Until: until, Subscription: *sub, Tenant: *tenant, Type: *typ})
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
