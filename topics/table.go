package topics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Table is a materialised view of the compacted subscriptions topic: every
// replica that holds one sees every subscription, kept up to date by a
// group-less consumer reading the topic from the start.
//
// Reads never block: they see an immutable snapshot, swapped after each
// fetch is applied. WaitCaughtUp waits until the view includes everything
// written to the topic before the call.
type Table struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	log   *zap.Logger

	snap atomic.Pointer[snapshot]

	mu       sync.Mutex
	next     map[int32]int64 // next offset to apply, per partition
	progress chan struct{}   // closed and replaced when next advances
}

// snapshot is an immutable view of the table with a matching index.
type snapshot struct {
	byID     map[string]*Subscription
	exact    map[string][]*Subscription // event type -> subscriptions with that exact pattern
	prefixes []prefixed                 // "prefix.*" patterns
	any      []*Subscription            // "*" patterns
}

type prefixed struct {
	prefix string // with the trailing '.'
	sub    *Subscription
}

// NewTable starts consuming the subscriptions topic. base are the
// connection options (seed brokers, TLS, SASL, logger); the table adds its
// own consuming options. Run must be called to apply records.
func NewTable(base []kgo.Opt, topic string, log *zap.Logger) (*Table, error) {
	opts := append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Control records (transaction markers) are returned so the table
		// can count them as applied: otherwise a log ending in a marker
		// would never look caught up.
		kgo.KeepControlRecords(),
		// Aborted or still-open transactions never change the table.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("subscription table client: %w", err)
	}
	t := &Table{
		cl:       cl,
		adm:      kadm.NewClient(cl),
		topic:    topic,
		log:      log.Named("subscriptions"),
		next:     map[int32]int64{},
		progress: make(chan struct{}),
	}
	t.snap.Store(build(map[string]*Subscription{}))
	return t, nil
}

// Run applies records until ctx is done.
func (t *Table) Run(ctx context.Context) {
	for {
		fs := t.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.log.Warn("fetching subscriptions", zap.Int32("partition", p), zap.Error(err))
		})
		if fs.NumRecords() == 0 {
			continue
		}
		cur := t.snap.Load().byID
		byID := make(map[string]*Subscription, len(cur))
		for k, v := range cur {
			byID[k] = v
		}
		advanced := map[int32]int64{}
		fs.EachRecord(func(r *kgo.Record) {
			advanced[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			id := string(r.Key)
			if r.Value == nil {
				delete(byID, id)
				return
			}
			s, err := DecodeSubscription(r.Value)
			if err == nil && s.ID != id {
				err = fmt.Errorf("record key %q differs from id %q", id, s.ID)
			}
			if err != nil {
				// The value may hold a secret: log the reason only.
				t.log.Warn("ignoring invalid subscription record", zap.String("key", id),
					zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(err))
				return
			}
			byID[id] = &s
		})
		t.snap.Store(build(byID))
		t.mu.Lock()
		for p, o := range advanced {
			t.next[p] = o
		}
		close(t.progress)
		t.progress = make(chan struct{})
		t.mu.Unlock()
	}
}

// Close stops the table's client.
func (t *Table) Close() { t.cl.Close() }

// WaitCaughtUp returns once every record written to the topic before the
// call has been applied, or when ctx is done.
func (t *Table) WaitCaughtUp(ctx context.Context) error {
	// The last stable offsets: an open transaction must not stall callers
	// (its records are not visible until it commits).
	ends, err := t.adm.ListCommittedOffsets(ctx, t.topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", t.topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list end offsets of %s: %w", t.topic, err)
	}
	for {
		t.mu.Lock()
		behind := false
		ends.Each(func(o kadm.ListedOffset) {
			if t.next[o.Partition] < o.Offset {
				behind = true
			}
		})
		wait := t.progress
		t.mu.Unlock()
		if !behind {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the subscription table to catch up: %w", ctx.Err())
		}
	}
}

// Get returns the subscription with the given id.
func (t *Table) Get(id string) (*Subscription, bool) {
	s, ok := t.snap.Load().byID[id]
	return s, ok
}

// Len is the number of subscriptions.
func (t *Table) Len() int { return len(t.snap.Load().byID) }

// All returns every subscription, in no particular order.
func (t *Table) All() []*Subscription {
	byID := t.snap.Load().byID
	out := make([]*Subscription, 0, len(byID))
	for _, s := range byID {
		out = append(out, s)
	}
	return out
}

// Match returns the subscriptions that want the event (see
// Subscription.Matches), each once. The returned subscriptions must not be
// modified.
func (t *Table) Match(e *Event) []*Subscription {
	s := t.snap.Load()
	var out []*Subscription
	seen := map[*Subscription]bool{}
	add := func(sub *Subscription) {
		if !seen[sub] && sub.Matches(e) {
			seen[sub] = true
			out = append(out, sub)
		}
	}
	for _, sub := range s.exact[e.Type] {
		add(sub)
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(e.Type, p.prefix) {
			add(p.sub)
		}
	}
	for _, sub := range s.any {
		add(sub)
	}
	return out
}

func build(byID map[string]*Subscription) *snapshot {
	s := &snapshot{byID: byID, exact: map[string][]*Subscription{}}
	for _, sub := range byID {
		if !sub.Enabled {
			continue
		}
		for _, p := range sub.EventTypes {
			switch {
			case p == "*":
				s.any = append(s.any, sub)
			case strings.HasSuffix(p, ".*"):
				s.prefixes = append(s.prefixes, prefixed{prefix: strings.TrimSuffix(p, "*"), sub: sub})
			default:
				s.exact[p] = append(s.exact[p], sub)
			}
		}
	}
	return s
}
