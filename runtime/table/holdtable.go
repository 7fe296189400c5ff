package table

import (
	"context"
	"fmt"
	"sync"

	"github.com/hookpipe/hookpipe/topics"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// HoldTable is a materialised view of the compacted holds topic.
type HoldTable struct {
	v   *view
	log *zap.Logger

	mu    sync.RWMutex
	holds map[string]topics.Hold
}

// NewHoldTable starts consuming the holds topic; Run applies records.
func NewHoldTable(base []kgo.Opt, topic string, log *zap.Logger) (*HoldTable, error) {
	t := &HoldTable{log: log.Named("holds"), holds: map[string]topics.Hold{}}
	v, err := newView(base, topic, t.apply)
	if err != nil {
		return nil, fmt.Errorf("hold table: %w", err)
	}
	t.v = v
	return t, nil
}

// Run applies records until ctx is done.
func (t *HoldTable) Run(ctx context.Context) { t.v.run(ctx, t.log) }

// Close stops the table's client.
func (t *HoldTable) Close() { t.v.close() }

// WaitCaughtUp returns once every record written before the call has been
// applied, or when ctx is done.
func (t *HoldTable) WaitCaughtUp(ctx context.Context) error { return t.v.waitCaughtUp(ctx) }

// Applied is the offset after the last record applied from a partition.
func (t *HoldTable) Applied(partition int32) int64 { return t.v.applied(partition) }

// Get returns the hold of a delivery key.
func (t *HoldTable) Get(key string) (topics.Hold, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h, ok := t.holds[key]
	return h, ok
}

// Len is the number of held keys.
func (t *HoldTable) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.holds)
}

func (t *HoldTable) apply(recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		if r.Value == nil {
			delete(t.holds, string(r.Key))
			continue
		}
		h, err := topics.DecodeHold(r.Value, r.Headers)
		if err != nil {
			t.log.Warn("ignoring invalid hold record", zap.String("key", string(r.Key)), zap.Error(err))
			continue
		}
		t.holds[string(r.Key)] = h
	}
}
