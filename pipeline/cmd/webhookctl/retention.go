package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/dlq"
	"github.com/hookpipe/hookpipe/topics"
)

// defaultRetentionDays is the recorder's default of envRetentionDays.
const defaultRetentionDays = 90

// mutationPoll is how often --wait asks system.mutations.
const mutationPoll = 200 * time.Millisecond

// expireSummary is what clickhouse expire prints.
type expireSummary struct {
	At          time.Time               `json:"at"`
	DryRun      bool                    `json:"dry_run"`
	DefaultDays int                     `json:"default_days"`
	Tenants     map[string]int          `json:"tenants"`
	Tables      []retention.TableExpiry `json:"tables"`
	Waited      bool                    `json:"waited"`
}

func expireCmd(fs *flag.FlagSet) runFunc {
	var chf clickhouseFlags
	chf.define(fs)
	defDays := fs.String("default-days", "", "retention of the tenants without an override, and of attempts without a tenant; 0 keeps them (default $"+
		envRetentionDays+" or "+strconv.Itoa(defaultRetentionDays)+")")
	dryRun := fs.Bool("dry-run", false, "count the rows due, delete nothing")
	wait := fs.Bool("wait", false, "wait until ClickHouse has carried out the deletes (within --timeout)")
	return func(ctx context.Context, c *cli, _ []string) error {
		days := defaultRetentionDays
		flagName, v := "--default-days", *defDays
		if v == "" {
			flagName, v = envRetentionDays, c.getenv(envRetentionDays)
		}
		if v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return usagef("%s %q: want a whole number of days, 0 or more", flagName, v)
			}
			days = n
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		t, err := k.tenants(ctx)
		if err != nil {
			return err
		}
		p := retention.PolicyOf(days, t.All())
		ch, err := c.connectClickHouse(ctx, &chf)
		if err != nil {
			return err
		}
		defer ch.Close()
		sum := expireSummary{At: time.Now().UTC().Truncate(time.Second), DryRun: *dryRun, DefaultDays: days, Tenants: p.Tenants}
		if sum.Tables, err = retention.Expire(ctx, ch, ch.db, p, sum.At, *dryRun); err != nil {
			return ch.explain(err)
		}
		if *wait && !*dryRun {
			if err := retention.Wait(ctx, ch, ch.db, mutationPoll); err != nil {
				return err
			}
			sum.Waited = true
		}
		if c.output == outputJSON {
			return c.printJSON(sum)
		}
		return c.printExpiry(sum)
	}
}

func (c *cli) printExpiry(sum expireSummary) error {
	keep := func(d int) string {
		if d == 0 {
			return "kept for good"
		}
		return strconv.Itoa(d) + " days"
	}
	fmt.Fprintf(c.stdout, "retention: %s by default, %d tenants of their own\n", keep(sum.DefaultDays), len(sum.Tenants))
	if len(sum.Tables) == 0 {
		fmt.Fprintln(c.stdout, "nothing can expire")
		return nil
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "TABLE\tROWS DUE\tDELETE")
	for _, e := range sum.Tables {
		state := "none due"
		switch {
		case e.Rows > 0 && sum.DryRun:
			state = "dry run"
		case e.Rows > 0 && sum.Waited:
			state = "done"
		case e.Rows > 0:
			state = "queued"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", e.Table, e.Rows, state)
	}
	return tw.Flush()
}

// expungeSummary is what messages expunge prints: what was removed, and
// what stays until when.
type expungeSummary struct {
	EventID        string    `json:"event_id"`
	Tenant         string    `json:"tenant,omitempty"`
	ExpungedAt     time.Time `json:"expunged_at"`
	SamplesCleared uint64    `json:"samples_cleared"`
	// EventsTopicUntil is when the events topic drops the event at the
	// latest, at the retention topics ensure gives it.
	EventsTopicUntil time.Time `json:"events_topic_until"`
	Waited           bool      `json:"waited"`
}

func expungeCmd(fs *flag.FlagSet) runFunc {
	var chf clickhouseFlags
	chf.define(fs)
	wait := fs.Bool("wait", false, "wait until ClickHouse has cleared the samples (within --timeout)")
	return func(ctx context.Context, c *cli, args []string) error {
		id := args[0]
		if err := topics.ValidateID("event", "id", id); err != nil {
			return usagef("%v", err)
		}
		ch, err := c.connectClickHouse(ctx, &chf)
		if err != nil {
			return err
		}
		defer ch.Close()
		var (
			n         uint64
			tenant    string
			published time.Time
		)
		err = ch.QueryRow(ctx, "SELECT count(), any(tenant), min(published_at) FROM "+ch.db+"."+schema.TableAttempts+
			" WHERE event_id = ?", id).Scan(&n, &tenant, &published)
		if err != nil {
			return ch.explain(err)
		}
		if n == 0 {
			return fmt.Errorf("no attempt of event %s recorded in %s: nothing to expunge", id, ch.db)
		}
		sum := expungeSummary{EventID: id, Tenant: tenant, ExpungedAt: time.Now().UTC().Truncate(time.Second)}
		if sum.SamplesCleared, err = retention.Expunge(ctx, ch, ch.db, id, tenant, sum.ExpungedAt); err != nil {
			return ch.explain(err)
		}
		if *wait {
			if err := retention.Wait(ctx, ch, ch.db, mutationPoll); err != nil {
				return err
			}
			sum.Waited = true
		}
		var names topics.Names // the events topic's retention is the same under any prefix
		sum.EventsTopicUntil = published.UTC().Add(names.Retention(names.Events()))
		if c.output == outputJSON {
			return c.printJSON(sum)
		}
		fmt.Fprintf(c.stdout, "expunged %s: the response samples of %d attempts cleared in ClickHouse, its payload hidden from the message log and refused to retries and replays\n",
			id, sum.SamplesCleared)
		fmt.Fprintf(c.stdout, "the events topic keeps the record until %s at the latest (its retention); the attempts' other columns stay until the tenant's retention\n",
			formatTime(sum.EventsTopicUntil))
		return nil
	}
}

// expungeCheck connects to ClickHouse when it is configured (--clickhouse
// or WEBHOOKS_CLICKHOUSE_ADDR), for replay and dlq redrive to skip the
// events expunged there; ok is false, and nothing is checked, when it is
// not. Configured but unreachable fails the command: resending what may
// have been expunged is worse than not resending.
func (c *cli) expungeCheck(ctx context.Context, f *clickhouseFlags) (ch *clickhouseConn, ok bool, err error) {
	if f.addr == "" && c.getenv(envClickHouseAddr) == "" {
		return nil, false, nil
	}
	if ch, err = c.connectClickHouse(ctx, f); err != nil {
		return nil, false, err
	}
	return ch, true, nil
}

// dropExpunged removes from dls the dead letters of events expunged in
// ch, and returns how many it removed.
func dropExpunged(ctx context.Context, ch *clickhouseConn, dls []*deadLetter) ([]*deadLetter, int, error) {
	ids := make([]string, len(dls))
	for i, e := range dls {
		ids[i] = eventIDOf(e)
	}
	expunged, err := retention.ExpungedAmong(ctx, ch, ch.db, ids)
	if err != nil {
		return nil, 0, ch.explain(err)
	}
	n := len(dls)
	dls = slices.DeleteFunc(dls, func(e *deadLetter) bool { return expunged[eventIDOf(e)] })
	return dls, n - len(dls), nil
}

// eventIDOf is the id of a dead letter's event: of its delivery, or of the
// event a schema refused; "" when it has neither.
func eventIDOf(e *dlq.Entry) string {
	if d := e.DeadLetter.Delivery; d != nil {
		return d.EventID
	}
	if ev, ok := e.DeadLetter.Event(); ok {
		return ev.ID
	}
	return ""
}
