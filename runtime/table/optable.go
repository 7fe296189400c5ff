package table

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// OpTable is a materialised view of the compacted operations topic.
type OpTable struct {
	v   *view
	log *zap.Logger

	mu      sync.RWMutex
	byID    map[string]topics.Operation
	changed chan struct{} // closed and replaced on every applied batch
}

// NewOpTable starts consuming the operations topic; Run applies records.
func NewOpTable(base []kgo.Opt, topic string, log *zap.Logger) (*OpTable, error) {
	t := &OpTable{log: log.Named("operations"), byID: map[string]topics.Operation{}, changed: make(chan struct{})}
	v, err := newView(base, topic, t.apply)
	if err != nil {
		return nil, fmt.Errorf("operation table: %w", err)
	}
	t.v = v
	return t, nil
}

// Run applies records until ctx is done.
func (t *OpTable) Run(ctx context.Context) { t.v.run(ctx, t.log) }

// Close stops the table's client.
func (t *OpTable) Close() { t.v.close() }

// WaitCaughtUp returns once every record written before the call has been
// applied, or ctx is done.
func (t *OpTable) WaitCaughtUp(ctx context.Context) error { return t.v.waitCaughtUp(ctx) }

// Get returns an operation by id.
func (t *OpTable) Get(id string) (topics.Operation, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, ok := t.byID[id]
	return o, ok
}

// All returns every operation, oldest first, and a channel closed when the
// table next changes.
func (t *OpTable) All() ([]topics.Operation, <-chan struct{}) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]topics.Operation, 0, len(t.byID))
	for _, o := range t.byID {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b topics.Operation) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, t.changed
}

func (t *OpTable) apply(recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		id := string(r.Key)
		if r.Value == nil {
			delete(t.byID, id)
			continue
		}
		o, err := topics.DecodeOperation(r.Value)
		if err != nil || o.ID != id {
			t.log.Warn("ignoring invalid operation record", zap.String("id", id), zap.Error(err))
			continue
		}
		t.byID[id] = o
	}
	close(t.changed)
	t.changed = make(chan struct{})
}
