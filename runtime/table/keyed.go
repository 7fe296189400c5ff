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

// Keyed is a materialised view of a small compacted topic whose records
// decode one by one: key -> V, a tombstone deleting the key. Records that
// do not decode are logged and drop the key's earlier value (a writer must
// not be able to keep an old value alive by writing garbage).
type Keyed[V any] struct {
	v      *view
	log    *zap.Logger
	decode func(key string, value []byte) (V, error)

	mu    sync.RWMutex
	byKey map[string]V
}

// NewKeyed starts consuming topic; Run applies records. decode turns a
// record's value into V, and fails on a value that does not belong to key.
func NewKeyed[V any](base []kgo.Opt, topic string, log *zap.Logger, decode func(key string, value []byte) (V, error)) (*Keyed[V], error) {
	k := &Keyed[V]{log: log, decode: decode, byKey: map[string]V{}}
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

// WaitApplied returns once the record r (as produced: its partition and
// offset set) has been applied, or ctx is done.
func (k *Keyed[V]) WaitApplied(ctx context.Context, r *kgo.Record) error {
	return k.v.waitApplied(ctx, r.Partition, r.Offset)
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

// All returns every value, by key.
func (k *Keyed[V]) All() []V {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	keys := make([]string, 0, len(k.byKey))
	for key := range k.byKey {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, strings.Compare)
	out := make([]V, len(keys))
	for i, key := range keys {
		out[i] = k.byKey[key]
	}
	k.mu.RUnlock()
	return out
}

func (k *Keyed[V]) apply(recs []*kgo.Record) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range recs {
		key := string(r.Key)
		delete(k.byKey, key)
		if r.Value == nil {
			continue
		}
		v, err := k.decode(key, r.Value)
		if err != nil {
			k.log.Warn("ignoring invalid record", zap.String("topic", r.Topic), zap.String("key", key), zap.Error(err))
			continue
		}
		k.byKey[key] = v
	}
}
