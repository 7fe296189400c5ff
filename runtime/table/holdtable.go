package table

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// HoldTable is a materialised view of the compacted holds topic. A record
// that does not decode leaves the key's hold as it was: an ordered key is
// not released by garbage.
//
// Holds are fenced (ADR 0027): a record carrying an epoch
// (topics.HeaderHoldEpoch) below the highest seen in its partition, from a
// hold or a fence, was written by a deliverer that had lost the partition
// to another and is ignored. Records without an epoch (written before the
// fence) apply as they come.
type HoldTable struct {
	*Keyed[topics.Hold]
	// Kept by admit, under the table's lock.
	epochs   map[int32]int32  // per partition, the highest epoch seen
	rejected map[string]int32 // keys whose last record was ignored: their partitions
}

// NewHoldTable starts consuming the holds topic; Run applies records.
func NewHoldTable(base []kgo.Opt, topic string, log *zap.Logger) (*HoldTable, error) {
	t := &HoldTable{epochs: map[int32]int32{}, rejected: map[string]int32{}}
	k, err := newKeyed(base, topic, log.Named("holds"), rules[topics.Hold]{
		decode:      func(r *kgo.Record) (topics.Hold, error) { return topics.DecodeHold(r.Value, r.Headers) },
		keepInvalid: true,
		admit:       t.admit,
	})
	if err != nil {
		return nil, err
	}
	t.Keyed = k
	return t, nil
}

// admit fences a record: false for a fenced writer's (its key marked
// rejected) and for a fence, which holds nothing.
func (t *HoldTable) admit(r *kgo.Record) bool {
	if e, ok := topics.EpochOf(r.Headers); ok {
		if e < t.epochs[r.Partition] {
			if !topics.IsFence(r.Key) {
				t.rejected[string(r.Key)] = r.Partition
			}
			t.log.Warn("ignoring a hold written by a deliverer that had lost its partition",
				zap.String("key", string(r.Key)), zap.Int32("partition", r.Partition),
				zap.Int32("epoch", e), zap.Int32("partition_epoch", t.epochs[r.Partition]))
			return false
		}
		t.epochs[r.Partition] = e
	}
	if topics.IsFence(r.Key) {
		return false
	}
	delete(t.rejected, string(r.Key))
	return true
}

// Applied is the offset after the last record applied from a partition.
func (t *HoldTable) Applied(partition int32) int64 { return t.v.applied(partition) }

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
	for k, h := range t.byKey {
		if key == "" || h.Since.Before(oldest.Since) || h.Since.Equal(oldest.Since) && k < key {
			key, oldest = k, h
		}
	}
	return key, oldest, key != ""
}
