package kafka

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Watermarks commits a consumer's watermarks: per partition, the offset of
// the first record not yet finished, the only offset that may be committed
// when records finish out of order. With each watermark it may commit the
// runs of records above it that are finished already (CommitFinished), in
// the offset commit's metadata, so that a consumer taking the partition
// over skips them instead of redoing them (FinishedAbove). It commits only
// what changed since the last commit, one commit at a time.
type Watermarks struct {
	cl  *kgo.Client
	log *zap.Logger

	commitMu   sync.Mutex // one commit at a time: a late answer never lowers an offset
	mu         sync.Mutex
	committed  map[string]map[int32]mark
	noMetadata bool // the brokers refused metadata this long: commit offsets alone
}

// mark is what was last committed of a partition.
type mark struct {
	offset   int64
	metadata string
}

// Run is a range of offsets, From to To inclusive, whose records are all
// finished (or are no records a consumer is given: transaction markers,
// aborted or compacted records).
type Run struct{ From, To int64 }

// NewWatermarks returns the committer of cl's group.
func NewWatermarks(cl *kgo.Client, log *zap.Logger) *Watermarks {
	return &Watermarks{cl: cl, log: log, committed: map[string]map[int32]mark{}}
}

// Commit commits those of wms (topic, partition, watermark) past the last
// committed ones and waits for the answer. A failed commit is logged,
// unless ctx is done, and left to the next one.
func (w *Watermarks) Commit(ctx context.Context, wms map[string]map[int32]kgo.EpochOffset) {
	_ = w.CommitFinished(ctx, wms, nil)
}

// CommitFinished is Commit with, per partition, the runs of records above
// its watermark that are finished (in offset order). A partition whose
// watermark stands still is committed again when its runs changed. It
// returns nil when the broker took every offset it asked to commit (or
// there was nothing to commit), else the first error.
func (w *Watermarks) CommitFinished(ctx context.Context, wms map[string]map[int32]kgo.EpochOffset, finished map[string]map[int32][]Run) error {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	metadata := map[string]map[int32]string{}
	w.mu.Lock()
	for t, ps := range wms {
		for p, wm := range ps {
			md := ""
			if !w.noMetadata {
				md = finishedMetadata(wm.Offset, finished[t][p])
			}
			if last, ok := w.committed[t][p]; ok && (wm.Offset < last.offset || wm.Offset == last.offset && md == last.metadata) {
				continue
			}
			if offsets[t] == nil {
				offsets[t], metadata[t] = map[int32]kgo.EpochOffset{}, map[int32]string{}
			}
			offsets[t][p], metadata[t][p] = wm, md
		}
	}
	w.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	var failed error
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				if md := metadata[t.Topic][t.Partitions[j].Partition]; md != "" {
					t.Partitions[j].Metadata = &md
				}
			}
		}
		return nil
	})
	w.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			if ctx.Err() == nil {
				w.log.Warn("commit failed", zap.Error(err))
			}
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if errors.Is(kerr.ErrorForCode(p.ErrorCode), kerr.OffsetMetadataTooLarge) && !w.noMetadata {
					// A broker with offset.metadata.max.bytes below
					// maxMetadata: the watermarks go on alone, and
					// a takeover redoes what finished above them.
					w.noMetadata = true
					w.log.Warn("the brokers refuse the finished records in commit metadata; committing watermarks alone",
						zap.Int("metadata_bytes", len(metadata[t.Topic][p.Partition])))
				}
				if p.ErrorCode != 0 {
					failed = cmp.Or(failed, kerr.ErrorForCode(p.ErrorCode))
					continue
				}
				if w.committed[t.Topic] == nil {
					w.committed[t.Topic] = map[int32]mark{}
				}
				w.committed[t.Topic][p.Partition] = mark{offsets[t.Topic][p.Partition].Offset, metadata[t.Topic][p.Partition]}
			}
		}
	})
	return failed
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

// maxMetadata bounds the metadata of a partition's commit, well below
// Kafka's default offset.metadata.max.bytes (4096): the runs past it are
// left out, and redone after a takeover.
const maxMetadata = 1024

// MaxFinishedRuns is the most runs of one partition a commit's metadata
// can carry (each takes at least four bytes, " 1+1"): a committer need not
// gather more.
const MaxFinishedRuns = maxMetadata / len(" 1+1")

// finishedPrefix starts the metadata of a commit with finished runs; any
// other metadata (kgo commits its member id) has none.
const finishedPrefix = "hookpipe-finished/1 "

// finishedMetadata renders the runs above watermark wm: the watermark,
// then each run as the gap from the end of the one before (from wm) and
// its length, "gap+length". Empty without runs. It runs for every
// partition of every commit, with up to MaxFinishedRuns runs: appended
// digits, no formatting.
func finishedMetadata(wm int64, runs []Run) string {
	if len(runs) == 0 {
		return ""
	}
	b := make([]byte, 0, maxMetadata)
	b = strconv.AppendInt(append(b, finishedPrefix...), wm, 10)
	end := wm // offset after the last run written; wm itself is unfinished
	n := 0
	var run []byte
	for _, r := range runs {
		if r.From <= end || r.To < r.From {
			break // not above the watermark, or out of order: stop here
		}
		run = strconv.AppendInt(append(run[:0], ' '), r.From-end, 10)
		run = strconv.AppendInt(append(run, '+'), r.To-r.From+1, 10)
		if len(b)+len(run) > maxMetadata {
			break
		}
		b = append(b, run...)
		end = r.To + 1
		n++
	}
	if n == 0 {
		return ""
	}
	return string(b)
}

// FinishedAbove returns the runs of records above a partition's committed
// offset that the committer had finished, from the commit's metadata; nil
// when the metadata names none, or was written for another offset.
func FinishedAbove(metadata string, committed int64) []Run {
	rest, ok := strings.CutPrefix(metadata, finishedPrefix)
	if !ok {
		return nil
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return nil
	}
	if wm, err := strconv.ParseInt(fields[0], 10, 64); err != nil || wm != committed {
		return nil
	}
	var runs []Run
	end := committed
	for _, f := range fields[1:] {
		g, l, ok := strings.Cut(f, "+")
		gap, err1 := strconv.ParseInt(g, 10, 64)
		length, err2 := strconv.ParseInt(l, 10, 64)
		if !ok || err1 != nil || err2 != nil || gap < 1 || length < 1 {
			return nil
		}
		from := end + gap
		runs = append(runs, Run{From: from, To: from + length - 1})
		end = from + length
	}
	return runs
}
