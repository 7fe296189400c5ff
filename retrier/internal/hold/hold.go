// Package hold keeps the records of one retry-tier partition until they are
// due. Records arrive in offset order; due ones are taken in offset order,
// also from behind a record that is not due yet (jitter and Retry-After make
// due times only roughly grow within a tier), up to a look-ahead bound. The
// commit watermark is the first record not yet released.
package hold

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// Record is a held record and when it is due.
type Record struct {
	Rec *kgo.Record
	Due time.Time
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

// Add appends a fetched record.
func (p *Partition) Add(r *kgo.Record) {
	p.held = append(p.held, Record{Rec: r, Due: DueOf(r)})
	p.bytes += size(r)
	p.next, p.epoch, p.written = r.Offset+1, r.LeaderEpoch, r.Timestamp
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
// after the last added when nothing is held. ok is false before any record.
func (p *Partition) Watermark() (kgo.EpochOffset, bool) {
	if len(p.held) > 0 {
		return kgo.EpochOffset{Epoch: p.held[0].Rec.LeaderEpoch, Offset: p.held[0].Rec.Offset}, true
	}
	return kgo.EpochOffset{Epoch: p.epoch, Offset: p.next}, p.next > 0
}
