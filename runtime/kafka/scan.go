package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Window is the part of a topic to read: per partition, the first offset
// to read and the offset to stop before.
type Window struct {
	Topic       string
	Start, Stop map[int32]int64
}

// ReadWindow returns what to read of topic: from its start, or from the
// first record at or after since; up to its last stable offset now (so
// records written later, or still in an open transaction, are never waited
// for), or up to the first record at or after until when that comes first.
// A zero since or until leaves that end open. A missing topic's error
// wraps kerr.UnknownTopicOrPartition.
func ReadWindow(ctx context.Context, adm *kadm.Client, topic string, since, until time.Time) (Window, error) {
	w := Window{Topic: topic}
	var err error
	// Listed first: a topic that does not exist fails here with a hint.
	if w.Stop, err = listed(topic, "end", func() (kadm.ListedOffsets, error) {
		return adm.ListCommittedOffsets(ctx, topic)
	}); err != nil {
		return Window{}, err
	}
	if w.Start, err = listed(topic, "start", func() (kadm.ListedOffsets, error) {
		if since.IsZero() {
			return adm.ListStartOffsets(ctx, topic)
		}
		return adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	}); err != nil {
		return Window{}, err
	}
	if !until.IsZero() {
		before, err := listed(topic, "until", func() (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, until.UnixMilli(), topic)
		})
		if err != nil {
			return Window{}, err
		}
		for p, o := range before {
			w.Stop[p] = min(w.Stop[p], o)
		}
	}
	return w, nil
}

// listed runs list and turns its offsets into a map, failing on any
// partition's error.
func listed(topic, which string, list func() (kadm.ListedOffsets, error)) (map[int32]int64, error) {
	l, err := list()
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list %s offsets of %s: %w", which, topic, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// Scan reads w with a client of base's options, read committed, calling fn
// with every data record in offset order per partition, and returns once
// every partition reached its stop offset, or at fn's first error. It never
// waits for new records.
func Scan(ctx context.Context, base []kgo.Opt, w Window, fn func(*kgo.Record) error) error {
	from := map[int32]kgo.Offset{}
	for p, o := range w.Start {
		if o < w.Stop[p] {
			from[p] = kgo.NewOffset().At(o)
		}
	}
	if len(from) == 0 {
		return nil
	}
	opts := append(base[:len(base):len(base)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.Topic: from}),
		// Records deleted by retention since the offsets were listed are
		// skipped, not waited for.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Aborted and still-open transactions are never read.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers take offsets too: they are returned so that a
		// partition ending in one is seen to reach its stop offset.
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	for len(from) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s: %w", w.Topic, err)
		}
		for _, fe := range fs.Errors() {
			// The client retries retriable errors itself.
			if !kerr.IsRetriable(fe.Err) {
				return fmt.Errorf("reading %s partition %d: %w", w.Topic, fe.Partition, fe.Err)
			}
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			if _, reading := from[r.Partition]; !reading || ferr != nil || r.Offset >= w.Stop[r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				ferr = fn(r)
			}
			if r.Offset+1 >= w.Stop[r.Partition] {
				delete(from, r.Partition)
				cl.PauseFetchPartitions(map[string][]int32{w.Topic: {r.Partition}})
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}
