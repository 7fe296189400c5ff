package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Watermarks commits a consumer's watermarks: per partition, the offset of
// the first record not yet finished, the only offset that may be committed
// when records finish out of order. It commits only the watermarks that
// moved past the last one committed, one commit at a time.
type Watermarks struct {
	cl  *kgo.Client
	log *zap.Logger

	commitMu  sync.Mutex // one commit at a time: a late answer never lowers an offset
	mu        sync.Mutex
	committed map[string]map[int32]int64
}

// NewWatermarks returns the committer of cl's group.
func NewWatermarks(cl *kgo.Client, log *zap.Logger) *Watermarks {
	return &Watermarks{cl: cl, log: log, committed: map[string]map[int32]int64{}}
}

// Commit commits those of wms (topic, partition, watermark) past the last
// committed ones and waits for the answer. A failed commit is logged,
// unless ctx is done, and left to the next one.
func (w *Watermarks) Commit(ctx context.Context, wms map[string]map[int32]kgo.EpochOffset) {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	w.mu.Lock()
	for t, ps := range wms {
		for p, wm := range ps {
			if last, ok := w.committed[t][p]; ok && wm.Offset <= last {
				continue
			}
			if offsets[t] == nil {
				offsets[t] = map[int32]kgo.EpochOffset{}
			}
			offsets[t][p] = wm
		}
	}
	w.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	w.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("commit failed", zap.Error(err))
			}
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					continue
				}
				if w.committed[t.Topic] == nil {
					w.committed[t.Topic] = map[int32]int64{}
				}
				w.committed[t.Topic][p.Partition] = offsets[t.Topic][p.Partition].Offset
			}
		}
	})
}

// Forget drops what was committed for partitions no longer owned, so that
// one assigned back is committed again from whatever it then reaches.
func (w *Watermarks) Forget(parts map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range parts {
		for _, p := range ps {
			delete(w.committed[t], p)
		}
	}
}
