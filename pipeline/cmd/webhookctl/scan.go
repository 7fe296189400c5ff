package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// window is the part of a topic a command reads: per partition, the first
// offset to read and the offset to stop before.
type window struct {
	topic       string
	start, stop map[int32]int64
}

// window returns what to read of topic: from its start, or from the first
// record at or after since; up to its last stable offset now (so records
// written later, or still in an open transaction, are never waited for), or
// up to the first record at or after until when that comes first. A zero
// since or until leaves that end open.
func (k *kafka) window(ctx context.Context, topic string, since, until time.Time) (window, error) {
	w := window{topic: topic}
	var err error
	// Listed first: a topic that does not exist fails here with a hint.
	if w.stop, err = listed(topic, "end", func() (kadm.ListedOffsets, error) {
		return k.adm.ListCommittedOffsets(ctx, topic)
	}); err != nil {
		return window{}, err
	}
	if w.start, err = listed(topic, "start", func() (kadm.ListedOffsets, error) {
		if since.IsZero() {
			return k.adm.ListStartOffsets(ctx, topic)
		}
		return k.adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	}); err != nil {
		return window{}, err
	}
	if !until.IsZero() {
		before, err := listed(topic, "until", func() (kadm.ListedOffsets, error) {
			return k.adm.ListOffsetsAfterMilli(ctx, until.UnixMilli(), topic)
		})
		if err != nil {
			return window{}, err
		}
		for p, o := range before {
			w.stop[p] = min(w.stop[p], o)
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
		return nil, topicErr(topic, fmt.Errorf("list %s offsets of %s: %w", which, topic, err))
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// scan reads w, read committed, calling fn with every data record in offset
// order per partition, and returns once every partition reached its stop
// offset, or at fn's first error. It never waits for new records.
func (k *kafka) scan(ctx context.Context, w window, fn func(*kgo.Record) error) error {
	from := map[int32]kgo.Offset{}
	for p, o := range w.start {
		if o < w.stop[p] {
			from[p] = kgo.NewOffset().At(o)
		}
	}
	if len(from) == 0 {
		return nil
	}
	opts := append(k.opts[:len(k.opts):len(k.opts)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: from}),
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
			return fmt.Errorf("reading %s: %w", w.topic, err)
		}
		for _, fe := range fs.Errors() {
			// The client retries retriable errors itself.
			if !kerr.IsRetriable(fe.Err) {
				return topicErr(w.topic, fmt.Errorf("reading %s partition %d: %w", w.topic, fe.Partition, fe.Err))
			}
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			if _, reading := from[r.Partition]; !reading || ferr != nil || r.Offset >= w.stop[r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				ferr = fn(r)
			}
			if r.Offset+1 >= w.stop[r.Partition] {
				delete(from, r.Partition)
				cl.PauseFetchPartitions(map[string][]int32{w.topic: {r.Partition}})
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}
