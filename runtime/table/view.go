package table

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// view consumes a compacted topic from its start with a group-less client,
// hands each fetched batch of data records to apply, and tracks how far it
// has applied, so callers can wait until it includes everything written
// before they asked.
type view struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	apply func([]*kgo.Record)

	mu       sync.Mutex
	next     map[int32]int64 // next offset to apply, per partition
	progress chan struct{}   // closed and replaced when next or ahead changes
	// ahead are, per partition and sorted, the offsets at or above next
	// whose records the table applied before the consumer reached them:
	// its own process's writes, handed over on the broker's
	// acknowledgement (Keyed.Written).
	ahead map[int32][]int64
	// round is the listing of end offsets the next callers of
	// waitCaughtUp share, listing whether one is being made.
	round   *endsRound
	listing bool
}

// endsRound is one listing of the topic's end offsets, shared by every
// caller of waitCaughtUp that asked before it was sent. A broker answers
// the requests of one connection in order: 16 API requests each listing
// on their own waited for each other, 16 round trips for the last one.
type endsRound struct {
	done chan struct{}
	ends kadm.ListedOffsets
	err  error
}

// listTimeout bounds one listing of end offsets.
const listTimeout = 30 * time.Second

func newView(base []kgo.Opt, topic string, apply func([]*kgo.Record)) (*view, error) {
	opts := append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Control records (transaction markers) are returned so the view
		// can count them as applied: otherwise a log ending in a marker
		// would never look caught up.
		kgo.KeepControlRecords(),
		// Aborted or still-open transactions never change the view.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &view{
		cl:       cl,
		adm:      kadm.NewClient(cl),
		topic:    topic,
		apply:    apply,
		next:     map[int32]int64{},
		progress: make(chan struct{}),
		ahead:    map[int32][]int64{},
	}, nil
}

func (v *view) run(ctx context.Context, log *zap.Logger) {
	for {
		fs := v.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, p int32, err error) {
			log.Warn("fetching", zap.String("topic", v.topic), zap.Int32("partition", p), zap.Error(err))
		})
		if fs.NumRecords() == 0 {
			continue
		}
		advanced := map[int32]int64{}
		var data []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			advanced[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				data = append(data, r)
			}
		})
		if len(data) > 0 {
			v.apply(data)
		}
		v.mu.Lock()
		for p, o := range advanced {
			v.next[p] = o
			if a := v.ahead[p]; len(a) > 0 {
				i, _ := slices.BinarySearch(a, o)
				v.ahead[p] = a[i:]
				if len(v.ahead[p]) == 0 {
					delete(v.ahead, p)
				}
			}
		}
		close(v.progress)
		v.progress = make(chan struct{})
		v.mu.Unlock()
	}
}

func (v *view) close() { v.cl.Close() }

// applied is the offset after the last record applied from a partition.
func (v *view) applied(p int32) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.next[p]
}

// markAhead records that the table applied the record at offset of
// partition p before the consumer reached it.
func (v *view) markAhead(p int32, offset int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.next[p] > offset {
		return // the consumer has been there since
	}
	a := v.ahead[p]
	i, found := slices.BinarySearch(a, offset)
	if found {
		return
	}
	v.ahead[p] = slices.Insert(a, i, offset)
	close(v.progress)
	v.progress = make(chan struct{})
}

// appliedTo reports, with v.mu held, whether every record of partition p
// below end has been applied: the consumer's next offset, then records
// applied ahead of it without a gap.
func (v *view) appliedTo(p int32, end int64) bool {
	next := v.next[p]
	if next >= end {
		return true
	}
	// ahead holds distinct offsets at or above next: those below end
	// cover [next, end) when there are end-next of them.
	a := v.ahead[p]
	i, _ := slices.BinarySearch(a, end)
	return int64(i) == end-next
}

// waitApplied waits until the record at offset of partition p has been
// applied: a writer that knows its record's offset waits for it without
// listing the topic's end offsets.
func (v *view) waitApplied(ctx context.Context, p int32, offset int64) error {
	for {
		v.mu.Lock()
		_, ahead := slices.BinarySearch(v.ahead[p], offset)
		done := v.next[p] > offset || ahead
		wait := v.progress
		v.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to catch up: %w", v.topic, ctx.Err())
		}
	}
}

func (v *view) waitCaughtUp(ctx context.Context) error {
	ends, err := v.endOffsets(ctx)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", v.topic, err)
	}
	return v.waitFor(ctx, ends[v.topic])
}

// waitFor waits until the view has applied its topic up to ends, by
// partition.
func (v *view) waitFor(ctx context.Context, ends map[int32]kadm.ListedOffset) error {
	for {
		v.mu.Lock()
		behind := false
		for p, o := range ends {
			if !v.appliedTo(p, o.Offset) {
				behind = true
			}
		}
		wait := v.progress
		v.mu.Unlock()
		if !behind {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to catch up: %w", v.topic, ctx.Err())
		}
	}
}

// Tailed is a table kept from its topic: a Keyed, or a type that embeds
// one (the subscription table, the catalog), not nil.
type Tailed interface{ tailed() *view }

// WaitAllCaughtUp returns once each of tables has applied every record
// written before the call, or ctx is done: WaitCaughtUp of each, with one
// listing of their topics' end offsets (a request to each broker) instead
// of one a table. For a caller that waits for the same tables before each
// batch (the dispatcher); it does not share the listings of concurrent
// callers as WaitCaughtUp does.
func WaitAllCaughtUp(ctx context.Context, tables ...Tailed) error {
	var views []*view
	var names []string
	for _, t := range tables {
		views = append(views, t.tailed())
		names = append(names, t.tailed().topic)
	}
	if len(views) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	// The last stable offsets, as in list.
	ends, err := views[0].adm.ListCommittedOffsets(lctx, names...)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", strings.Join(names, ", "), err)
	}
	for _, v := range views {
		if err := v.waitFor(ctx, ends[v.topic]); err != nil {
			return err
		}
	}
	return nil
}

// endOffsets returns the topic's end offsets from a listing sent after the
// call: it joins the round not yet sent, if any, else opens one. One
// listing is in flight at a time.
func (v *view) endOffsets(ctx context.Context) (kadm.ListedOffsets, error) {
	v.mu.Lock()
	r := v.round
	if r == nil {
		r = &endsRound{done: make(chan struct{})}
		v.round = r
		if !v.listing {
			v.listing = true
			go v.list()
		}
	}
	v.mu.Unlock()
	select {
	case <-r.done:
		return r.ends, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// list sends the rounds one after the other until none is waiting.
func (v *view) list() {
	for {
		v.mu.Lock()
		r := v.round
		v.round = nil
		if r == nil {
			v.listing = false
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
		// The last stable offsets: an open transaction must not stall
		// callers (its records are not visible until it commits).
		r.ends, r.err = v.adm.ListCommittedOffsets(ctx, v.topic)
		cancel()
		if r.err == nil {
			r.err = r.ends.Error()
		}
		close(r.done)
	}
}
