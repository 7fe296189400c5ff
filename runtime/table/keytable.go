package table

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// KeyTable is a materialised view of the compacted apikeys topic, looked up
// by a key's hash.
type KeyTable struct {
	v   *view
	log *zap.Logger

	mu     sync.RWMutex
	byID   map[string]topics.APIKey
	byHash map[string]string // hash to id
}

// NewKeyTable starts consuming the apikeys topic; Run applies records.
func NewKeyTable(base []kgo.Opt, topic string, log *zap.Logger) (*KeyTable, error) {
	t := &KeyTable{log: log.Named("apikeys"), byID: map[string]topics.APIKey{}, byHash: map[string]string{}}
	v, err := newView(base, topic, t.apply)
	if err != nil {
		return nil, fmt.Errorf("api key table: %w", err)
	}
	t.v = v
	return t, nil
}

// Run applies records until ctx is done.
func (t *KeyTable) Run(ctx context.Context) { t.v.run(ctx, t.log) }

// Close stops the table's client.
func (t *KeyTable) Close() { t.v.close() }

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done.
func (t *KeyTable) WaitCaughtUp(ctx context.Context) error { return t.v.waitCaughtUp(ctx) }

// ByHash returns the key whose hash is h (revoked ones too: the caller
// refuses them).
func (t *KeyTable) ByHash(h string) (topics.APIKey, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	k, ok := t.byID[t.byHash[h]]
	return k, ok
}

// Get returns a key by id.
func (t *KeyTable) Get(id string) (topics.APIKey, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	k, ok := t.byID[id]
	return k, ok
}

// All returns every key, by id.
func (t *KeyTable) All() []topics.APIKey {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]topics.APIKey, 0, len(t.byID))
	for _, k := range t.byID {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b topics.APIKey) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (t *KeyTable) apply(recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		id := string(r.Key)
		if old, ok := t.byID[id]; ok {
			delete(t.byHash, old.Hash)
			delete(t.byID, id)
		}
		if r.Value == nil {
			continue
		}
		k, err := topics.DecodeAPIKey(r.Value)
		if err != nil || k.ID != id {
			t.log.Warn("ignoring invalid api key record", zap.String("id", id), zap.Error(err))
			continue
		}
		t.byID[id] = k
		t.byHash[k.Hash] = id
	}
}
