package recorder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The recorder says in its commits' metadata what a crash may have left in
// ClickHouse (ADR 0044). Before an insert it commits, for every partition
// of the batch, the batch's first offset marked "in flight up to" the
// batch's end; after the insert, the batch's end marked clean. A recorder
// assigned a partition reads the mark and looks up exactly what it names:
//
//   - in flight up to E: the records before E (the previous owner may have
//     inserted them and died before its commit);
//   - clean, or no commit at all: nothing (every insert of ours is marked
//     first);
//   - anything else (a commit of an older recorder, an operator's reset):
//     the first Config.BatchRows records, as before marks.
const (
	markPrefix   = "hookpipe.recorder/1 "
	markClean    = markPrefix + "clean"
	markInFlight = markPrefix + "inflight "
)

// window is what a newly assigned partition's records may already be in
// ClickHouse: those with an offset below below (when it is set), or else
// the next count records.
type window struct {
	below int64 // -1: count decides
	count int
}

// suspect reports whether a record at offset falls in the window, and
// whether the window goes on after it.
func (w *window) suspect(offset int64) (suspect, more bool) {
	if w.below >= 0 {
		return offset < w.below, offset+1 < w.below
	}
	w.count--
	return true, w.count > 0
}

// windowOf is the window of a partition whose last commit carried meta;
// ok is false where nothing needs a look-up.
func windowOf(meta string, batchRows int) (w window, ok bool) {
	if meta == markClean {
		return window{}, false
	}
	if end, found := strings.CutPrefix(meta, markInFlight); found {
		if e, err := strconv.ParseInt(end, 10, 64); err == nil && e >= 0 {
			return window{below: e}, e > 0
		}
	}
	return window{below: -1, count: batchRows}, true
}

// windows reads the group's commits of parts and returns the window of
// every partition that needs one. Where a commit cannot be read, the
// partition gets the widest window: a look-up too many costs a query, one
// too few a copy.
func (r *recorder) windows(ctx context.Context, cl *kgo.Client, parts map[string][]int32) map[tp]window {
	out := map[tp]window{}
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, r.cfg.Group)
	if err != nil {
		r.log.Warn("could not read the commits' marks: looking up the first batch of every partition assigned", zap.Error(err))
	}
	for t, ps := range parts {
		for _, p := range ps {
			meta := ""
			if err == nil {
				o, found := fetched.Lookup(t, p)
				if !found || o.Err == nil && o.At < 0 {
					continue // never committed: none of our inserts is unmarked
				}
				if o.Err == nil {
					meta = o.Metadata
				}
			}
			if w, ok := windowOf(meta, r.cfg.BatchRows); ok {
				out[tp{t, p}] = w
			}
		}
	}
	return out
}

// commitMarked commits offsets for the group with a mark per partition, as
// the member the client is in the group (so the broker fences a recorder
// that lost its partitions). kgo's own commits carry no metadata of ours.
func (r *recorder) commitMarked(ctx context.Context, offsets map[tp]kgo.EpochOffset, mark func(tp) string) error {
	member, generation := r.cl.GroupMetadata()
	if member == "" {
		return errors.New("not in the group")
	}
	id, err := r.topicIDOf(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = r.cfg.Group, member, generation
	byTopic := map[string]int{}
	for k, o := range offsets {
		i, ok := byTopic[k.topic]
		if !ok {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = k.topic
			if k.topic == r.topic {
				t.TopicID = id
			}
			i = len(req.Topics)
			byTopic[k.topic] = i
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = k.partition, o.Offset, o.Epoch
		m := mark(k)
		p.Metadata = &m
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicID) {
					r.topicID = [16]byte{} // recreated: looked up again next time
				}
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// topicIDOf returns the attempts topic's ID, which commits name it by
// (OffsetCommit v10), looking it up once.
func (r *recorder) topicIDOf(ctx context.Context) ([16]byte, error) {
	if r.topicID != ([16]byte{}) {
		return r.topicID, nil
	}
	ts, err := kadm.NewClient(r.cl).ListTopics(ctx, r.topic)
	if err != nil {
		return r.topicID, err
	}
	t, ok := ts[r.topic]
	if !ok || t.Err != nil {
		return r.topicID, fmt.Errorf("topic %s: not found (%v)", r.topic, t.Err)
	}
	r.topicID = t.ID
	return r.topicID, nil
}
