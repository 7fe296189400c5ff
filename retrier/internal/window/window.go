// Package window keeps the records of one retry-tier partition until they are
// due. Records arrive in offset order; due ones are taken in offset order,
// also from behind a record that is not due yet (jitter and Retry-After make
// due times only roughly grow within a tier), up to a look-ahead bound. The
// commit watermark is the first record not yet released; the records
// released above it are committed as finished runs (Finished), and a new
// owner of the partition does not hold them again (Resume).
package window

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// Record is a held record and when it is due.
type Record struct {
	Rec *kgo.Record
	Due time.Time
	// DeliverAt is a scheduled delivery's deliver_at (its header), zero
	// for a retry: the record is one of its waits, never released early.
	DeliverAt time.Time
}

// Partition holds one partition's fetched, unreleased records.
type Partition struct {
	held  []Record
	bytes int   // of the held records' keys and values
	next  int64 // offset after the last added record
	// epoch of the last added record
	epoch int32
	// written is the timestamp of the last added record
	written time.Time
	// skip are the runs above the committed watermark that the
	// partition's previous owner released, not fetched yet (Resume).
	skip []kafka.Run
}

// DueOf reads a record's not-before: the header, else the delivery value;
// a record carrying neither is due at once.
func DueOf(r *kgo.Record) time.Time {
	if t, ok := topics.NotBeforeOf(r); ok {
		return t
	}
	if d, err := topics.DecodeDelivery(r.Value); err == nil {
		return d.NotBefore
	}
	return time.Time{}
}

// Resume enters the runs above its committed watermark that the
// partition's previous owner released (kafka.FinishedAbove): records
// fetched in them are not held again, and the runs not reached yet stay in
// Finished.
func (p *Partition) Resume(runs []kafka.Run) { p.skip = runs }

// Add appends a fetched record, unless a previous owner released it.
func (p *Partition) Add(r *kgo.Record) {
	p.next, p.epoch, p.written = r.Offset+1, r.LeaderEpoch, r.Timestamp
	for len(p.skip) > 0 && p.skip[0].To < r.Offset {
		p.skip = p.skip[1:]
	}
	if len(p.skip) > 0 && p.skip[0].From <= r.Offset {
		return
	}
	at, _ := topics.DeliverAtOf(r)
	p.held = append(p.held, Record{Rec: r, Due: DueOf(r), DeliverAt: at})
	p.bytes += size(r)
}

// Finished are the runs of offsets above the watermark that hold no
// record (released, or no record a consumer is given), then the runs a
// previous owner released that were not fetched yet; in offset order.
func (p *Partition) Finished() []kafka.Run {
	var out []kafka.Run
	add := func(from, to int64) { // adjacent runs merged: the metadata needs gaps
		if n := len(out); n > 0 && out[n-1].To+1 == from {
			out[n-1].To = to
			return
		}
		out = append(out, kafka.Run{From: from, To: to})
	}
	for i := 1; i < len(p.held); i++ {
		if a, b := p.held[i-1].Rec.Offset, p.held[i].Rec.Offset; b > a+1 {
			add(a+1, b-1)
		}
	}
	if n := len(p.held); n > 0 && p.next > p.held[n-1].Rec.Offset+1 {
		add(p.held[n-1].Rec.Offset+1, p.next-1)
	}
	wm, _ := p.Watermark()
	for _, s := range p.skip {
		if from := max(s.From, p.next); from > wm.Offset && from <= s.To {
			add(from, s.To)
		}
	}
	return out
}

// Horizon is the soonest a record after the ones added to this partition
// of tier can be due: written no earlier than the last one added, and due
// no sooner than (1-RetryJitter) of the tier after it was written. Until
// then a full look-ahead window makes nothing late.
func (p *Partition) Horizon(tier time.Duration) time.Time {
	return p.written.Add(time.Duration(float64(tier) * (1 - topics.RetryJitter)))
}

// Len is the number of held records.
func (p *Partition) Len() int { return len(p.held) }

// Bytes is the size of the held records' keys and values.
func (p *Partition) Bytes() int { return p.bytes }

func size(r *kgo.Record) int { return len(r.Key) + len(r.Value) }

// Due returns, in offset order, the held records due at now. They stay held
// until Released.
func (p *Partition) Due(now time.Time) []Record {
	var out []Record
	for _, h := range p.held {
		if !h.Due.After(now) {
			out = append(out, h)
		}
	}
	return out
}

// Released drops records whose release was acknowledged.
func (p *Partition) Released(rs []Record) {
	gone := make(map[int64]bool, len(rs))
	for _, r := range rs {
		gone[r.Rec.Offset] = true
	}
	kept := p.held[:0]
	for _, h := range p.held {
		if gone[h.Rec.Offset] {
			p.bytes -= size(h.Rec)
		} else {
			kept = append(kept, h)
		}
	}
	clear(p.held[len(kept):])
	p.held = kept
}

// Earliest is the soonest due time among held records; ok is false when
// nothing is held.
func (p *Partition) Earliest() (t time.Time, ok bool) {
	for i, h := range p.held {
		if i == 0 || h.Due.Before(t) {
			t = h.Due
		}
	}
	return t, len(p.held) > 0
}

// Watermark is the offset to commit: the first held record, or the one
// after the last added when nothing is held (after a previous owner's run
// that starts there). ok is false before any record.
func (p *Partition) Watermark() (kgo.EpochOffset, bool) {
	if len(p.held) > 0 {
		return kgo.EpochOffset{Epoch: p.held[0].Rec.LeaderEpoch, Offset: p.held[0].Rec.Offset}, true
	}
	next := p.next
	if len(p.skip) > 0 && p.skip[0].From <= next {
		next = max(next, p.skip[0].To+1)
	}
	return kgo.EpochOffset{Epoch: p.epoch, Offset: next}, p.next > 0
}
