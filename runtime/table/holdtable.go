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
//
// Holds are fenced (ADR 0027): a record carrying an epoch
// (topics.HeaderHoldEpoch) below the highest seen in its partition, from a
// hold or a fence, was written by a deliverer that had lost the partition
// to another and is ignored. Records without an epoch (written before the
// fence) apply as they come.
type HoldTable struct {
	v   *view
	log *zap.Logger

	mu       sync.RWMutex
	holds    map[string]topics.Hold
	epochs   map[int32]int32  // per partition, the highest epoch seen
	rejected map[string]int32 // keys whose last record was ignored: their partitions
}

// NewHoldTable starts consuming the holds topic; Run applies records.
func NewHoldTable(base []kgo.Opt, topic string, log *zap.Logger) (*HoldTable, error) {
	t := &HoldTable{log: log.Named("holds"), holds: map[string]topics.Hold{}, epochs: map[int32]int32{},
		rejected: map[string]int32{}}
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

// Rejected tells whether the last record written for key was ignored as
// a fenced writer's. Compaction keeps only the last record of a key, so the
// key's owner writes its hold again (or its release) over it.
func (t *HoldTable) Rejected(key string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.rejected[key]
	return ok
}

// RejectedIn lists the keys of a partition whose last record was ignored.
func (t *HoldTable) RejectedIn(partition int32) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var keys []string
	for k, p := range t.rejected {
		if p == partition {
			keys = append(keys, k)
		}
	}
	return keys
}

// Epoch is the highest epoch seen in a partition (0 before any).
func (t *HoldTable) Epoch(partition int32) int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.epochs[partition]
}

// Oldest is the key held longest (earliest Since) and its hold; false
// with none held.
func (t *HoldTable) Oldest() (string, topics.Hold, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var key string
	var oldest topics.Hold
	for k, h := range t.holds {
		if key == "" || h.Since.Before(oldest.Since) || h.Since.Equal(oldest.Since) && k < key {
			key, oldest = k, h
		}
	}
	return key, oldest, key != ""
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
		if e, ok := topics.EpochOf(r.Headers); ok {
			if e < t.epochs[r.Partition] {
				if !topics.IsFence(r.Key) {
					t.rejected[string(r.Key)] = r.Partition
				}
				t.log.Warn("ignoring a hold written by a deliverer that had lost its partition",
					zap.String("key", string(r.Key)), zap.Int32("partition", r.Partition),
					zap.Int32("epoch", e), zap.Int32("partition_epoch", t.epochs[r.Partition]))
				continue
			}
			t.epochs[r.Partition] = e
		}
		if topics.IsFence(r.Key) {
			continue
		}
		delete(t.rejected, string(r.Key))
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
