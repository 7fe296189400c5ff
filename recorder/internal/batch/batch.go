// Package batch holds the attempt records the recorder has read but not yet
// inserted into ClickHouse, and the offsets that become committable once
// they are: one batch at a time, bounded in rows.
package batch

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// Row is one decoded attempt record.
type Row struct {
	topics.Attempt
	// Suspect rows may already be in ClickHouse: they were read again after
	// a partition changed hands, or an insert of them failed in a way that
	// may have landed. The writer checks them before inserting.
	Suspect bool

	partition int32
	topic     string
}

type tp struct {
	topic     string
	partition int32
}

// Batch is the rows of the records read since the last insert, plus the
// records skipped as undecodable, and the next offset of every partition
// they came from. Not safe for concurrent use.
type Batch struct {
	rows    []Row
	skipped map[tp]int
	next    map[tp]kgo.EpochOffset
	start   map[tp]kgo.EpochOffset // the offset of the first record of every partition
	first   time.Time
}

// New returns an empty batch with room for capacity rows.
func New(capacity int) *Batch {
	return &Batch{rows: make([]Row, 0, capacity), skipped: map[tp]int{}, next: map[tp]kgo.EpochOffset{},
		start: map[tp]kgo.EpochOffset{}}
}

// Add appends a decoded record.
func (b *Batch) Add(rec *kgo.Record, a *topics.Attempt, suspect bool, now time.Time) {
	b.rows = append(b.rows, Row{Attempt: *a, Suspect: suspect, topic: rec.Topic, partition: rec.Partition})
	b.advance(rec, now)
}

// Skip accounts for a record that is not inserted (undecodable): its offset
// is committed with the batch, so it never blocks its partition.
func (b *Batch) Skip(rec *kgo.Record, now time.Time) {
	b.advance(rec, now)
	b.skipped[tp{rec.Topic, rec.Partition}]++
}

func (b *Batch) advance(rec *kgo.Record, now time.Time) {
	if len(b.next) == 0 {
		b.first = now
	}
	k := tp{rec.Topic, rec.Partition}
	if _, ok := b.start[k]; !ok {
		b.start[k] = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset}
	}
	b.next[k] = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}
}

// Records is the number of records in the batch, skipped ones included.
func (b *Batch) Records() int {
	n := len(b.rows)
	for _, s := range b.skipped {
		n += s
	}
	return n
}

// Empty reports whether the batch holds no record at all.
func (b *Batch) Empty() bool { return len(b.next) == 0 }

// Rows are the rows to insert.
func (b *Batch) Rows() []Row { return b.rows }

// First is when the first record of the batch was added.
func (b *Batch) First() time.Time { return b.first }

// MarkSuspect marks every row as possibly inserted already.
func (b *Batch) MarkSuspect() {
	for i := range b.rows {
		b.rows[i].Suspect = true
	}
}

// Partitions calls f with every partition of the batch, the offset of its
// first record and the offset after its last.
func (b *Batch) Partitions(f func(topic string, partition int32, start, next kgo.EpochOffset)) {
	for k, n := range b.next {
		f(k.topic, k.partition, b.start[k], n)
	}
}

// Has reports whether the batch holds records of any of the partitions.
func (b *Batch) Has(parts map[string][]int32) bool {
	for t, ps := range parts {
		for _, p := range ps {
			if _, ok := b.next[tp{t, p}]; ok {
				return true
			}
		}
	}
	return false
}

// Drop forgets the records of the given partitions (revoked or lost: their
// next owner reads them again from the committed offset).
func (b *Batch) Drop(parts map[string][]int32) {
	gone := map[tp]bool{}
	for t, ps := range parts {
		for _, p := range ps {
			if _, ok := b.next[tp{t, p}]; ok {
				gone[tp{t, p}] = true
				delete(b.next, tp{t, p})
				delete(b.start, tp{t, p})
				delete(b.skipped, tp{t, p})
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	kept := b.rows[:0]
	for _, r := range b.rows {
		if !gone[tp{r.topic, r.partition}] {
			kept = append(kept, r)
		}
	}
	clear(b.rows[len(kept):])
	b.rows = kept
	if len(b.next) == 0 {
		b.Reset()
	}
}

// Reset empties the batch after its rows were inserted and its offsets
// committed, keeping the row storage.
func (b *Batch) Reset() {
	clear(b.rows)
	b.rows = b.rows[:0]
	clear(b.skipped)
	clear(b.next)
	clear(b.start)
	b.first = time.Time{}
}
