package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/topics"
)

// envMaxEventBytes is the dispatcher's limit on event size (default
// topics.DefaultMaxEventBytes); replay applies the same one, so it skips
// exactly the events the dispatcher dead-lettered.
const envMaxEventBytes = "WEBHOOKS_MAX_EVENT_BYTES"

// replayStats counts what replay did, while the progress line reads it.
type replayStats struct {
	scanned, replayed, notMatching, undecodable, expunged atomic.Int64
}

// replaySummary is what replay did; the JSON shape of its output.
type replaySummary struct {
	Subscription string `json:"subscription"`
	// Scanned counts the events read in the time range.
	Scanned int64 `json:"scanned"`
	// Replayed counts the deliveries produced.
	Replayed int64 `json:"replayed"`
	// NotMatching counts events the subscription (its types, tenant and
	// filter, or --types) does not want.
	NotMatching int64 `json:"not_matching"`
	// Undecodable counts events the dispatcher could not dispatch either.
	Undecodable int64 `json:"undecodable"`
	// Expunged counts events skipped because they were expunged (checked
	// when ClickHouse is configured).
	Expunged int64 `json:"expunged"`
}

func (s *replayStats) progress() string {
	return fmt.Sprintf("replayed %d, scanned %d, skipped %d", s.replayed.Load(), s.scanned.Load(),
		s.notMatching.Load()+s.undecodable.Load()+s.expunged.Load())
}

func replayCmd(fs *flag.FlagSet) runFunc {
	id := fs.String("subscription", "", "the one subscription to re-dispatch events to (required)")
	var times timeRange
	times.define(fs, "events published")
	fs.Lookup("since").Usage += " (required)"
	types := fs.String("types", "", "comma-separated type patterns (type, prefix.* or *) to replay, within the subscription's (default: all of the subscription's)")
	perSecond := defineRate(fs, 100, "deliveries produced")
	var chf clickhouseFlags
	chf.define(fs)
	return func(ctx context.Context, c *cli, _ []string) error {
		if *id == "" {
			return usagef("--subscription is required")
		}
		if times.since == "" {
			return usagef("--since is required")
		}
		patterns := config.SplitList(*types)
		for _, pt := range patterns {
			if topics.ValidatePattern(pt) != nil {
				return usagef("--types: %q is not a type, prefix.* or *", pt)
			}
		}
		p, err := newPace(*perSecond)
		if err != nil {
			return err
		}
		since, until, err := times.resolve(time.Now())
		if err != nil {
			return err
		}
		maxBytes := topics.DefaultMaxEventBytes
		if v := c.getenv(envMaxEventBytes); v != "" {
			if maxBytes, err = strconv.Atoi(v); err != nil || maxBytes < 1 {
				return fmt.Errorf("%s: %q is not a positive number of bytes", envMaxEventBytes, v)
			}
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		sub, err := k.enabledSubscription(ctx, *id)
		if err != nil {
			return err
		}
		w, err := k.window(ctx, k.names.Events(), since, until)
		if err != nil {
			return err
		}
		// An event is expunged after it is published: since bounds the
		// expunges that concern the range.
		expunged := map[string]bool{}
		ch, check, err := c.expungeCheck(ctx, &chf)
		if err != nil {
			return err
		}
		if check {
			expunged, err = retention.ExpungedSince(ctx, ch, ch.db, since)
			ch.Close()
			if err != nil {
				return ch.explain(err)
			}
		}
		prod, err := kgo.NewClient(append(k.opts[:len(k.opts):len(k.opts)], kgo.RecordPartitioner(topics.Partitioner()))...)
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		defer prod.Close()

		st := &replayStats{}
		stop := c.progress(st.progress)
		defer stop()
		batch := make([]*kgo.Record, 0, p.batch)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			if err := p.wait(ctx, len(batch)); err != nil {
				return err
			}
			if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				return topicErr(k.names.Deliveries(), fmt.Errorf("produce to %s: %w", k.names.Deliveries(), err))
			}
			st.replayed.Add(int64(len(batch)))
			batch = batch[:0]
			return nil
		}
		filters := filter.NewCache()
		err = k.scan(ctx, w, func(r *kgo.Record) error {
			st.scanned.Add(1)
			ev, err := topics.DecodeEvent(r.Value, maxBytes)
			if err != nil {
				st.undecodable.Add(1)
				return nil
			}
			if expunged[ev.ID] {
				st.expunged.Add(1)
				return nil
			}
			// As the dispatcher matches: types, tenant, filter.
			ok, _ := filters.Matches(sub, filter.NewInput(&ev))
			if !ok || (len(patterns) > 0 && !slices.ContainsFunc(patterns, func(pt string) bool {
				return topics.MatchType(pt, ev.Type)
			})) {
				st.notMatching.Add(1)
				return nil
			}
			batch = append(batch, topics.DeliveryRecord(r, &ev, sub, k.names))
			if len(batch) < p.batch {
				return nil
			}
			return flush()
		})
		if err == nil {
			err = flush()
		}
		stop()
		if err != nil {
			if st.scanned.Load() > 0 {
				err = fmt.Errorf("%s, then: %w", st.progress(), err)
			}
			return err
		}
		sum := replaySummary{Subscription: sub.ID, Scanned: st.scanned.Load(), Replayed: st.replayed.Load(),
			NotMatching: st.notMatching.Load(), Undecodable: st.undecodable.Load(), Expunged: st.expunged.Load()}
		if c.output == outputJSON {
			return c.printJSON(sum)
		}
		fmt.Fprintf(c.stdout, "replayed %d to %s, scanned %d, skipped %d (not matching %d, undecodable %d, expunged %d)\n",
			sum.Replayed, sum.Subscription, sum.Scanned, sum.NotMatching+sum.Undecodable+sum.Expunged, sum.NotMatching, sum.Undecodable, sum.Expunged)
		return nil
	}
}

// enabledSubscription reads subscription id, which must exist and be
// enabled: a replay or recover of a disabled one would send deliveries the
// deliverer skips.
func (k *kafka) enabledSubscription(ctx context.Context, id string) (*topics.Subscription, error) {
	sub, err := k.subscription(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sub.Enabled {
		return nil, fmt.Errorf("subscription %s is disabled: the deliverer would skip its deliveries (enable it first)", id)
	}
	return sub, nil
}
