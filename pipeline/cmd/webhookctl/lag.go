package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/retrier"
	"github.com/hookpipe/hookpipe/runtime/config"

	flag "github.com/spf13/pflag"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// lagRow is one consumer group on one topic; also the JSON shape of lag.
type lagRow struct {
	Group string `json:"group"`
	// State is the group's state as the broker reports it: Stable,
	// PreparingRebalance, CompletingRebalance, Empty (no member: nothing
	// consumes) or Dead (the group does not exist).
	State      string `json:"state"`
	Members    int    `json:"members"`
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	// Lag is the records after the group's committed offsets.
	Lag int64 `json:"lag"`
	// Held is set on retry tiers: the records waiting in the tier, not yet
	// released (the retrier group's lag there).
	Held *int64 `json:"held,omitempty"`
	// OldestDue is set on retry tiers with held records when it could be
	// read: the earliest due time among the first unreleased record of each
	// partition (within a partition due times grow, give or take jitter).
	OldestDue *time.Time `json:"oldest_due,omitempty"`
	// Holds is set on the deliverer's deliveries row: the ordered keys
	// held behind a failed delivery (the holds topic).
	Holds *holdsRow `json:"holds,omitempty"`
}

// holdsRow sums up the held ordered keys: how many, and the one held
// longest, its head (the event whose outcome releases it) and since when.
type holdsRow struct {
	Keys    int        `json:"keys"`
	Longest string     `json:"longest,omitempty"`
	Head    string     `json:"head,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
}

// consumerGroup is a component's consumer group and the topics it consumes.
type consumerGroup struct {
	group  string
	topics []string
	tiers  bool // the topics are retry tiers: their lag is held records
}

// groupTopics lists the pipeline's consumer groups in pipeline order. The
// deliverer's, retrier's and recorder's group names follow the same environment
// variables as the components.
func groupTopics(n topics.Names, getenv func(string) string) []consumerGroup {
	var sc dispatcher.Config
	var dc deliverer.Config
	var rc retrier.Config
	var ac recorder.Config
	return []consumerGroup{
		{group: or(getenv(config.Name(&sc, &sc.Group)), topics.GroupDispatcher), topics: []string{n.Events()}},
		{group: or(getenv(config.Name(&dc, &dc.Group)), topics.GroupDeliverer), topics: append(n.DeliveryTopics(), n.Redeliveries())},
		{group: or(getenv(config.Name(&rc, &rc.Group)), topics.GroupRetrier), topics: n.RetryTopics(), tiers: true},
		{group: or(getenv(config.Name(&ac, &ac.Group)), topics.GroupRecorder), topics: []string{n.Attempts()}},
	}
}

func lagCmd(fs *flag.FlagSet) runFunc {
	group := fs.String("group", "", "only this consumer group (default: the four of the pipeline)")
	return func(ctx context.Context, c *cli, _ []string) error {
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		groups := groupTopics(k.names, c.getenv)
		if *group != "" {
			i := slices.IndexFunc(groups, func(g consumerGroup) bool { return g.group == *group })
			if i < 0 {
				var names []string
				for _, g := range groups {
					names = append(names, g.group)
				}
				return usagef("--group %q: want one of %s", *group, strings.Join(names, ", "))
			}
			groups = groups[i : i+1]
		}
		var rows []lagRow
		for _, g := range groups {
			r, err := k.lag(ctx, g)
			if err != nil {
				return err
			}
			rows = append(rows, r...)
		}
		if c.output == outputJSON {
			return c.printJSON(rows)
		}
		return c.printLag(rows, time.Now())
	}
}

// lag reads one group's lag per topic.
func (k *kafka) lag(ctx context.Context, g consumerGroup) ([]lagRow, error) {
	group, ts := g.group, g.topics
	described, err := k.adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	state, members := "Dead", 0
	if d, ok := described[group]; ok && d.Err == nil {
		state, members = d.State, len(d.Members)
	}
	lags, err := ops.GroupLag(ctx, k.adm, group, ts...)
	if missing := (*ops.UnknownTopicError)(nil); errors.As(err, &missing) {
		return nil, topicErr(missing.Topic, err)
	}
	if err != nil {
		return nil, fmt.Errorf("lag of %s: %w", group, err)
	}
	var due map[string]time.Time
	if g.tiers {
		due = k.oldestDue(ctx, lags)
	}
	var held *holdsRow
	if slices.Contains(ts, k.names.Deliveries()) {
		if held, err = k.holds(ctx); err != nil {
			return nil, err
		}
	}
	var rows []lagRow
	for _, t := range ts {
		row := lagRow{Group: group, State: state, Members: members, Topic: t}
		for _, l := range lags {
			if l.Topic == t {
				row.Partitions++
				row.Lag += l.Lag
			}
		}
		if t == k.names.Deliveries() {
			row.Holds = held
		}
		if g.tiers {
			held := row.Lag
			row.Held = &held
			if d, ok := due[t]; ok {
				row.OldestDue = &d
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// holds reads the holds topic up to its end.
func (k *kafka) holds(ctx context.Context) (*holdsRow, error) {
	topic := k.names.Holds()
	t, err := table.NewHoldTable(k.opts, topic, zap.NewNop())
	if err != nil {
		return nil, err
	}
	if err := readToEnd(ctx, topic, t); err != nil {
		return nil, err
	}
	row := &holdsRow{Keys: t.Len()}
	if key, h, ok := t.Oldest(); ok {
		row.Longest, row.Head, row.Since = key, h.Head, &h.Since
	}
	return row, nil
}

// oldestDueWait bounds the reading of due times: they are a hint, and a
// partition whose lag is only a transaction marker has no record to read.
const oldestDueWait = 3 * time.Second

// oldestDue reads the first unreleased record of every tier partition with
// a lag and returns, per topic, the earliest due time found. Partitions not
// read within oldestDueWait are left out.
func (k *kafka) oldestDue(ctx context.Context, lags []ops.PartitionLag) map[string]time.Time {
	from := map[string]map[int32]kgo.Offset{}
	want := 0
	for _, l := range lags {
		if l.Lag == 0 {
			continue
		}
		if from[l.Topic] == nil {
			from[l.Topic] = map[int32]kgo.Offset{}
		}
		at := l.Start
		if l.Committed >= 0 {
			at = max(at, l.Committed)
		}
		from[l.Topic][l.Partition] = kgo.NewOffset().At(at)
		want++
	}
	out := map[string]time.Time{}
	if want == 0 {
		return out
	}
	cl, err := kgo.NewClient(append(k.opts[:len(k.opts):len(k.opts)],
		kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return out
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, oldestDueWait)
	defer cancel()
	type tp struct {
		topic string
		p     int32
	}
	seen := map[tp]bool{}
	for len(seen) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			if seen[k] {
				return
			}
			seen[k] = true
			cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			d := dueOf(r)
			if cur, ok := out[r.Topic]; !ok || d.Before(cur) {
				out[r.Topic] = d
			}
		})
	}
	return out
}

// dueOf is when a tier record is due: its not-before header, else the
// delivery's own not-before.
func dueOf(r *kgo.Record) time.Time {
	if t, ok := topics.NotBeforeOf(r); ok {
		return t
	}
	if d, err := topics.DecodeDelivery(r.Value); err == nil {
		return d.NotBefore
	}
	return time.Time{}
}

func (c *cli) printLag(rows []lagRow, now time.Time) error {
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tTOPIC\tPARTITIONS\tLAG\tHELD\tOLDEST DUE")
	for _, r := range rows {
		held, due := "-", "-"
		if r.Held != nil {
			held = fmt.Sprint(*r.Held)
		}
		if r.OldestDue != nil {
			due = formatTime(*r.OldestDue) + " (" + relative(r.OldestDue.Sub(now)) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\n", r.Group, r.State, r.Members, r.Topic, r.Partitions, r.Lag, held, due)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Holds != nil && r.Holds.Since != nil {
			fmt.Fprintf(c.stdout, "\nOrdered keys held: %d; longest %s, behind event %s since %s (%s).\n", r.Holds.Keys,
				r.Holds.Longest, r.Holds.Head, formatTime(*r.Holds.Since), now.Sub(*r.Holds.Since).Round(time.Second))
		}
	}
	if slices.ContainsFunc(rows, func(r lagRow) bool { return r.Lag > 0 && r.Members == 0 }) {
		fmt.Fprintln(c.stdout, "\nA group with lag and no members is not consuming: is its component running?")
	}
	return nil
}

// relative renders a due time against now: "in 4m0s", "3m0s overdue".
func relative(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " overdue"
}
