package table

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Keyed is a materialised view of a compacted topic whose records decode
// one by one: key -> V, a tombstone deleting the key. Records that do not
// decode are logged and drop the key's earlier value (a writer must not be
// able to keep an old value alive by writing garbage), unless the table's
// rules keep it.
//
// A fetched batch is decoded outside the lock, then applied in place under
// it: readers wait only for the maps to change, not for sealed secrets to
// open or schemas to compile, and see every batch whole or not at all.
type Keyed[V any] struct {
	v     *view
	log   *zap.Logger
	rules rules[V]

	mu      sync.RWMutex
	byKey   map[string]V
	changed chan struct{} // closed and replaced on every applied batch
	// mapped is, per partition, the offset after the last data record the
	// consumer applied to byKey.
	mapped map[int32]int64
	// own are the keys whose value is a record of this process's that the
	// table applied ahead of the consumer (Written), by the record's place.
	own map[string]place
}

// place is a record's partition and offset.
type place struct {
	partition int32
	offset    int64
}

// rules are what a table of this package adds to a Keyed view of its
// topic. Hooks run on the goroutine that calls Run; admit and index with
// the table locked for writing, so what they keep changes with the values
// and is read under the same lock.
type rules[V any] struct {
	// decode turns a record with a value into V; it may read the record's
	// headers.
	decode func(r *kgo.Record) (V, error)
	// keepInvalid leaves a key's earlier value when its record does not
	// decode, for tables whose readers would rather go on with the last
	// valid state than lose it (a subscription, an ordered key's hold).
	keepInvalid bool
	// admit, when set, is asked of each record in order before it is
	// applied; false ignores the record altogether.
	admit func(r *kgo.Record) bool
	// index, when set, is told of every value the table gains or loses.
	index index[V]
}

// index is a secondary view of a table's values, kept by Keyed.
type index[V any] interface {
	insert(key string, v V)
	remove(key string, v V)
}

// NewKeyed starts consuming topic; Run applies records. decode turns a
// record's value into V, and fails on a value that does not belong to key.
func NewKeyed[V any](base []kgo.Opt, topic string, log *zap.Logger, decode func(key string, value []byte) (V, error)) (*Keyed[V], error) {
	return newKeyed(base, topic, log, rules[V]{
		decode: func(r *kgo.Record) (V, error) { return decode(string(r.Key), r.Value) },
	})
}

func newKeyed[V any](base []kgo.Opt, topic string, log *zap.Logger, with rules[V]) (*Keyed[V], error) {
	k := &Keyed[V]{log: log, rules: with, byKey: map[string]V{}, changed: make(chan struct{}),
		mapped: map[int32]int64{}, own: map[string]place{}}
	v, err := newView(base, topic, k.apply)
	if err != nil {
		return nil, fmt.Errorf("%s table: %w", topic, err)
	}
	k.v = v
	return k, nil
}

// Run applies records until ctx is done.
func (k *Keyed[V]) Run(ctx context.Context) { k.v.run(ctx, k.log) }

// Close stops the table's client.
func (k *Keyed[V]) Close() { k.v.close() }

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done. A nil table has nothing to wait for.
func (k *Keyed[V]) WaitCaughtUp(ctx context.Context) error {
	if k == nil {
		return nil
	}
	return k.v.waitCaughtUp(ctx)
}

func (k *Keyed[V]) tailed() *view { return k.v }

// WaitApplied returns once the record r (as produced: its partition and
// offset set by the broker's acknowledgement) has been applied, or ctx is
// done: one write's read-your-write without a listing of end offsets.
func (k *Keyed[V]) WaitApplied(ctx context.Context, r *kgo.Record) error {
	return k.v.waitApplied(ctx, r.Partition, r.Offset)
}

// Written applies r, a record this process produced and the broker
// acknowledged (its partition and offset set), at once, ahead of the
// consumer: the writer reads its own write without waiting for the fetch
// that brings it back, and WaitApplied and WaitCaughtUp count it as
// applied. The consumer still applies the topic in order; until it reaches
// r, it skips the earlier records of r's key, so the table never shows one
// of them again, and once past r the table is what the topic says. A
// record the consumer applied already, or that does not decode, is left
// to the consumer; so are the records of a table whose rules admit records
// by their order.
func (k *Keyed[V]) Written(r *kgo.Record) {
	if k.rules.admit != nil {
		return
	}
	var v V
	if r.Value != nil {
		var err error
		if v, err = k.rules.decode(r); err != nil {
			return
		}
	}
	key := string(r.Key)
	k.mu.Lock()
	if k.mapped[r.Partition] > r.Offset {
		k.mu.Unlock()
		return
	}
	if o, ok := k.own[key]; ok && o.partition == r.Partition && o.offset > r.Offset {
		k.mu.Unlock()
		return // a later write of the key shows already
	}
	k.delete(key)
	if r.Value != nil {
		k.set(key, v)
	}
	k.own[key] = place{r.Partition, r.Offset}
	close(k.changed)
	k.changed = make(chan struct{})
	k.mu.Unlock()
	k.v.markAhead(r.Partition, r.Offset)
}

// Get returns a key's value; false when the table (or a nil table) has
// none.
func (k *Keyed[V]) Get(key string) (V, bool) {
	if k == nil {
		var zero V
		return zero, false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	v, ok := k.byKey[key]
	return v, ok
}

// Len is the number of keys with a value.
func (k *Keyed[V]) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.byKey)
}

// All returns every value, by key.
func (k *Keyed[V]) All() []V {
	if k == nil {
		return nil
	}
	all, _ := k.Watch()
	return all
}

// Watch returns every value, by key, and a channel closed when the table
// next changes: a reader that waits on it misses no change after what it
// was given.
func (k *Keyed[V]) Watch() ([]V, <-chan struct{}) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	keys := make([]string, 0, len(k.byKey))
	for key := range k.byKey {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, strings.Compare)
	out := make([]V, len(keys))
	for i, key := range keys {
		out[i] = k.byKey[key]
	}
	return out, k.changed
}

// decoded is a record's value as decode returned it.
type decoded[V any] struct {
	v   V
	err error
}

func (k *Keyed[V]) apply(recs []*kgo.Record) {
	values := make([]decoded[V], len(recs))
	for i, r := range recs {
		if r.Value != nil {
			values[i].v, values[i].err = k.rules.decode(r)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, r := range recs {
		k.mapped[r.Partition] = r.Offset + 1
		key := string(r.Key)
		if o, ok := k.own[key]; ok && o.partition == r.Partition {
			if r.Offset <= o.offset {
				if r.Offset == o.offset {
					delete(k.own, key)
				}
				continue // the key shows this record, or a later one, already
			}
			delete(k.own, key)
		}
		if k.rules.admit != nil && !k.rules.admit(r) {
			continue
		}
		if err := values[i].err; err != nil {
			// The value may hold a secret: log the reason only.
			k.log.Warn("ignoring invalid record", zap.String("topic", r.Topic), zap.String("key", key),
				zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(err))
			if k.rules.keepInvalid {
				continue
			}
		}
		k.delete(key)
		if r.Value != nil && values[i].err == nil {
			k.set(key, values[i].v)
		}
	}
	// An own record the consumer passed without meeting it (compacted
	// away under a later one) no longer holds its key.
	for key, o := range k.own {
		if k.mapped[o.partition] > o.offset {
			delete(k.own, key)
		}
	}
	close(k.changed)
	k.changed = make(chan struct{})
}

func (k *Keyed[V]) set(key string, v V) {
	k.byKey[key] = v
	if k.rules.index != nil {
		k.rules.index.insert(key, v)
	}
}

func (k *Keyed[V]) delete(key string) {
	old, ok := k.byKey[key]
	if !ok {
		return
	}
	delete(k.byKey, key)
	if k.rules.index != nil {
		k.rules.index.remove(key, old)
	}
}
