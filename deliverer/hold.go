package deliverer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// Ordered keys (invariant 4). When a delivery of an ordered subscription
// fails and goes to a retry tier, its key is held: the holds topic
// (compacted) records the head delivery whose outcome releases the key.
// Later deliveries of a held key are not attempted: they are appended to
// the parked topic, in arrival order, and the hold notes where the key's
// parked records start. When the head comes back from its tier and
// succeeds or is dead-lettered, the key's parked deliveries are attempted in
// order, in the key's lane; a parked delivery that fails becomes the new
// head and the rest stay parked. Holds and parked records live in Kafka, so
// they survive restarts of any component, and a held key never holds back
// other keys or its partition.

// holds is this process's view of the held keys.
type holds struct {
	table *table.HoldTable

	mu    sync.Mutex
	ready map[lanes.TP]bool   // partitions whose holds were caught up since assignment
	local map[string]ownWrite // holds written here that the table may not show yet
}

// ownWrite is a hold (nil: released) this process wrote, authoritative
// until the table has applied the write.
type ownWrite struct {
	hold      *topics.Hold
	partition int32
	offset    int64
}

func newHolds(t *table.HoldTable) *holds {
	return &holds{table: t, ready: map[lanes.TP]bool{}, local: map[string]ownWrite{}}
}

// get returns the hold of a key whose deliveries come from partition p.
// The first call after p was assigned waits until the table includes every
// hold written before, by whichever process owned p then.
func (h *holds) get(ctx context.Context, p lanes.TP, key string) (*topics.Hold, error) {
	h.mu.Lock()
	ready := h.ready[p]
	h.mu.Unlock()
	if !ready {
		if err := h.table.WaitCaughtUp(ctx); err != nil {
			return nil, err
		}
		h.mu.Lock()
		h.ready[p] = true
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.local[key]; ok {
		if h.table.Applied(w.partition) <= w.offset {
			return w.hold, nil
		}
		delete(h.local, key)
	}
	if v, ok := h.table.Get(key); ok {
		return &v, nil
	}
	return nil, nil
}

// wrote records an acknowledged write of a key's hold.
func (h *holds) wrote(key string, hold *topics.Hold, rec *kgo.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.local[key] = ownWrite{hold: hold, partition: rec.Partition, offset: rec.Offset}
}

// forget marks partitions as no longer assigned.
func (h *holds) forget(parts []lanes.TP) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range parts {
		delete(h.ready, p)
	}
}

func (d *deliverer) holdRecord(key []byte, h *topics.Hold) *kgo.Record {
	r := &kgo.Record{Topic: d.names.Holds(), Key: key}
	if h != nil {
		r.Value = h.Encode()
	}
	return r
}

// writeHold produces a key's hold (nil releases it) and remembers it.
func (d *deliverer) writeHold(ctx context.Context, key []byte, h *topics.Hold) bool {
	r := d.holdRecord(key, h)
	if !d.produce(ctx, []*kgo.Record{r}) {
		return false
	}
	d.holds.wrote(string(key), h, r)
	return true
}

// held tells whether rec's key is held (or its hold cannot be read now,
// which ordered then waits out).
func (d *deliverer) held(ctx context.Context, rec *kgo.Record) bool {
	h, err := d.holds.get(ctx, lanes.TPOf(rec), string(rec.Key))
	return err != nil || h != nil
}

// ordered handles a delivery of an ordered subscription that has an
// ordering key. It reports whether everything it caused was acknowledged.
func (d *deliverer) ordered(ctx context.Context, it *lanes.Item, del *topics.Delivery, rng *rand.Rand) bool {
	rec := it.Rec
	key := rec.Key
	var held *topics.Hold
	if !d.persist(ctx, "reading the hold of an ordering key", func() (err error) {
		held, err = d.holds.get(ctx, lanes.TPOf(rec), string(key))
		return err
	}) {
		return false
	}
	isHead := held != nil && del.EventID == held.Head && del.Attempt == held.HeadAttempt
	through := d.through(rec)
	if held != nil && !isHead {
		if through >= 0 && through <= held.Through || del.EventID == held.Head {
			// Redone after a crash (already parked, or the head's own
			// earlier record), or a stale copy of the head: handled.
			return true
		}
		return d.park(ctx, rec, del, held)
	}
	next := &topics.Hold{Head: del.EventID, ParkedFrom: -1, Through: through, Since: time.Now()}
	if isHead {
		next.ParkedFrom, next.ParkedPartition, next.Since = held.ParkedFrom, held.ParkedPartition, held.Since
		next.Through = max(held.Through, through)
	}
	if it.Spill {
		// Spilled unattempted: the key waits for it like for a failed head.
		next.HeadAttempt = del.Attempt
		return d.produceHold(ctx, d.spill(key, del, it.Wait), key, next)
	}
	recs, v := d.attempt(ctx, rec, del, rng)
	switch v {
	case cut:
		return false
	case retried, delayed:
		next.HeadAttempt = headAttempt(del, v)
		return d.produceHold(ctx, recs, key, next)
	}
	if !d.produce(ctx, recs) {
		return false
	}
	if !isHead {
		return true
	}
	after, ok := d.drain(ctx, key, held, rng)
	return ok && d.writeHold(ctx, key, after)
}

// through is what a record moves a hold's Through to: its offset on the
// deliveries topic; -1 for a due retry from the redeliveries topic, whose
// offsets are another topic's (a hold never skips one: a copy redone after
// a crash is a duplicate, never a loss).
func (d *deliverer) through(rec *kgo.Record) int64 {
	if rec.Topic == d.names.Deliveries() {
		return rec.Offset
	}
	return -1
}

// produceHold produces recs together with a key's new hold and remembers
// the hold once all are acknowledged (kgo sets the record's offset).
func (d *deliverer) produceHold(ctx context.Context, recs []*kgo.Record, key []byte, h *topics.Hold) bool {
	hr := d.holdRecord(key, h)
	if !d.produce(ctx, append(recs, hr)) {
		return false
	}
	d.holds.wrote(string(key), h, hr)
	return true
}

// park appends a delivery of a held key to the parked topic and moves the
// hold's Through past it.
func (d *deliverer) park(ctx context.Context, rec *kgo.Record, del *topics.Delivery, held *topics.Hold) bool {
	parked := &kgo.Record{Topic: d.names.Parked(), Key: rec.Key, Value: rec.Value}
	att := newAttempt(del, time.Now())
	att.Outcome, att.FailureCategory = topics.OutcomeBlocked, topics.FailureKeyHeld
	att.Error = "waiting behind event " + held.Head + " of the same ordering key"
	h := *held
	h.Through = max(h.Through, d.through(rec))
	if held.ParkedFrom >= 0 {
		return d.produceHold(ctx, []*kgo.Record{parked, d.attemptRecord(&att)}, rec.Key, &h)
	}
	if !d.produce(ctx, []*kgo.Record{parked, d.attemptRecord(&att)}) {
		return false
	}
	h.ParkedFrom, h.ParkedPartition = parked.Offset, parked.Partition
	return d.writeHold(ctx, rec.Key, &h)
}

// persist runs f until it succeeds, backing off from persistFirst to
// persistMax, and reports false only when ctx ended first. The ordered path
// uses it for reads that may fail for a moment (a broker moving): giving up
// would let the key's next delivery run ahead of this one.
func (d *deliverer) persist(ctx context.Context, what string, f func() error) bool {
	wait := persistFirst
	for failures := 0; ; failures++ {
		err := f()
		if err == nil {
			if failures > 0 {
				d.log.Info(what+": succeeded after failing", zap.Int("failures", failures))
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if failures == 0 {
			d.log.Warn(what+" failed; retrying", zap.Error(err))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, persistMax)
	}
}

const (
	persistFirst = 100 * time.Millisecond
	persistMax   = 5 * time.Second
)

// drainUpdateEvery is how many parked deliveries are attempted between
// progress writes of the hold, bounding what a crash mid-drain repeats.
const drainUpdateEvery = 100

// drain attempts a released key's parked deliveries in order. It returns
// the key's next hold (nil: released) once every parked delivery up to the
// end of the parked partition was attempted, or at the first one that went
// to a retry tier, which becomes the new head.
func (d *deliverer) drain(ctx context.Context, key []byte, h *topics.Hold, rng *rand.Rand) (*topics.Hold, bool) {
	if h.ParkedFrom < 0 {
		return nil, true
	}
	topic := d.names.Parked()
	var end kadm.ListedOffset
	if !d.persist(ctx, "listing the end of the parked topic", func() error {
		ends, err := kadm.NewClient(d.cl).ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		var ok bool
		if end, ok = ends.Lookup(topic, h.ParkedPartition); !ok {
			return fmt.Errorf("no end offset for partition %d", h.ParkedPartition)
		}
		return end.Err
	}) {
		return nil, false
	}
	cl, err := kgo.NewClient(append(baseOpts(d.cfg, d.log),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {h.ParkedPartition: kgo.NewOffset().At(h.ParkedFrom)}}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, false
	}
	defer cl.Close()
	progress := *h
	drained := 0
	for off := h.ParkedFrom; off < end.Offset; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, false
		}
		d.m.readParked(fs.NumRecords())
		for _, r := range fs.Records() {
			if r.Offset >= end.Offset {
				break
			}
			off = r.Offset + 1
			if string(r.Key) != string(key) {
				continue
			}
			del, dead := d.decode(r)
			if dead != nil {
				if !d.produce(ctx, []*kgo.Record{dead}) {
					return nil, false
				}
				continue
			}
			recs, v := d.attempt(ctx, r, del, rng)
			if v == cut || !d.produce(ctx, recs) {
				return nil, false
			}
			if v == retried || v == delayed {
				return &topics.Hold{Head: del.EventID, HeadAttempt: headAttempt(del, v), ParkedFrom: off,
					ParkedPartition: h.ParkedPartition, Through: h.Through, Since: h.Since}, true
			}
			if drained++; drained%drainUpdateEvery == 0 {
				progress.ParkedFrom = off
				if !d.writeHold(ctx, key, &progress) {
					return nil, false
				}
			}
		}
	}
	d.log.Debug("released ordered key", zap.String("key", string(key)), zap.Int("drained", drained))
	return nil, true
}
