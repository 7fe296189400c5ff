package deliverer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// Ordered keys (invariant 4). When a delivery of an ordered subscription
// fails and goes to a retry tier, its key is held: the holds topic
// (compacted) records the head delivery whose outcome releases the key.
// Later deliveries of a held key are not attempted: they are appended to
// the parked topic, in arrival order, and the hold notes where the key's
// parked records start. When the head comes back from its tier and
// succeeds or is dead-lettered, the key's parked deliveries are copied to
// the redeliveries topic and attempted in order as they come back, each
// a record of its own, in the key's lane; a parked delivery that fails
// becomes the new head and the rest stay parked. Holds and parked records
// live in Kafka, so they survive restarts of any component, and a held
// key never holds back other keys or its partition.

// holds is this process's view of the held keys, and its right to write
// them. A deliverer writes the hold of a key only while it owns the key's
// partition number (its slot: the co-partitioned balancer gives partition
// i of every consumed topic to one member), and marks each hold record
// with its epoch for the slot: one more than the highest epoch in the
// slot's partition of the holds topic when it was assigned the slot.
// Before it reads the slot's holds, it writes a fence with that epoch
// there, so that every hold a previous owner writes after that (it lost
// the slot without knowing yet: its session ended during a long pause, a
// network partition, a join the broker held) is ignored by every reader
// (ADR 0027).
type holds struct {
	table *table.HoldTable

	mu    sync.Mutex
	slots map[int32]*slot     // the partition numbers assigned here
	ready map[lanes.TP]bool   // partitions whose holds were caught up since assignment
	local map[string]ownWrite // holds written here that the table may not show yet
	width int                 // partitions of the holds topic; 0 until read
}

// slot is a partition number assigned here: its epoch (0 until fenced)
// and which of its topics' partitions are assigned.
type slot struct {
	epoch int32
	parts map[lanes.TP]bool
}

// ownWrite is a hold (nil: released) this process wrote, authoritative
// until the table has applied the write, for records of its epoch or an
// older one: a record running since a later assignment of the slot does
// not take a write its own fence made readers ignore.
type ownWrite struct {
	hold      *topics.Hold
	partition int32
	offset    int64
	epoch     int32
}

func newHolds(t *table.HoldTable) *holds {
	return &holds{table: t, slots: map[int32]*slot{}, ready: map[lanes.TP]bool{}, local: map[string]ownWrite{}}
}

// assign notes partitions assigned and returns the partition numbers new
// here, to fence; a slot kept keeps its epoch, so that what its records
// still running write is not fenced by its own owner.
func (h *holds) assign(parts []lanes.TP) []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var fresh []int32
	for _, p := range parts {
		s := h.slots[p.Partition]
		if s == nil {
			s = &slot{parts: map[lanes.TP]bool{}}
			h.slots[p.Partition] = s
			fresh = append(fresh, p.Partition)
		}
		s.parts[p] = true
	}
	return fresh
}

// fenced sets the epochs of slots and marks their assigned partitions as
// caught up.
func (h *holds) fenced(epochs map[int32]int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, e := range epochs {
		if s := h.slots[p]; s != nil {
			s.epoch = e
			for tp := range s.parts {
				h.ready[tp] = true
			}
		}
	}
}

// forget marks partitions as no longer assigned; a slot none of whose
// partitions is left is no longer this process's to write.
func (h *holds) forget(parts []lanes.TP) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range parts {
		delete(h.ready, p)
		if s := h.slots[p.Partition]; s != nil {
			delete(s.parts, p)
			if len(s.parts) == 0 {
				delete(h.slots, p.Partition)
			}
		}
	}
}

// epoch is the epoch of the slot of partition number p; false when it is
// not assigned here, or not fenced.
func (h *holds) epoch(p int32) (int32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.slots[p]
	if s == nil || s.epoch == 0 {
		return 0, false
	}
	return s.epoch, true
}

// get returns the hold of a key whose deliveries come from partition p.
// The first call for a partition not caught up since its assignment waits
// until the table includes every hold written before. rejected tells that
// the key's last hold record was a fenced writer's, which the caller writes
// over.
func (h *holds) get(ctx context.Context, p lanes.TP, key string) (hold *topics.Hold, rejected bool, err error) {
	h.mu.Lock()
	ready := h.ready[p]
	h.mu.Unlock()
	if !ready {
		if err := h.table.WaitCaughtUp(ctx); err != nil {
			return nil, false, err
		}
		h.mu.Lock()
		h.ready[p] = true
		h.mu.Unlock()
	}
	rejected = h.table.Rejected(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.local[key]; ok {
		if w.epoch >= writeEpoch(ctx) && h.table.Applied(w.partition) <= w.offset {
			return w.hold, rejected, nil
		}
		delete(h.local, key)
	}
	if v, ok := h.table.Get(key); ok {
		return &v, rejected, nil
	}
	return nil, rejected, nil
}

// wrote records an acknowledged write of a key's hold.
func (h *holds) wrote(key string, hold *topics.Hold, rec *kgo.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, _ := topics.EpochOf(rec.Headers)
	h.local[key] = ownWrite{hold: hold, partition: rec.Partition, offset: rec.Offset, epoch: e}
}

// epochKey carries, in a worker's context, the epoch of the slot of the
// record it runs (writeEpoch).
type epochKey struct{}

// withSlot returns ctx carrying the epoch of the slot of rec; false when
// rec's partition is not assigned here any more.
func (d *deliverer) withSlot(ctx context.Context, rec *kgo.Record) (context.Context, bool) {
	e, ok := d.holds.epoch(rec.Partition)
	if !ok {
		return ctx, false
	}
	return context.WithValue(ctx, epochKey{}, e), true
}

// writeEpoch is the epoch a worker's hold writes carry.
func writeEpoch(ctx context.Context) int32 {
	e, _ := ctx.Value(epochKey{}).(int32)
	return e
}

// fenceSlots takes over the holds of the slots new here, before their
// records are fetched. With the table caught up, each slot's epoch is one
// more than the highest in its partition; the state of every key whose
// last hold record a fenced writer wrote is written again (so that the
// fence that follows, compacting the one that fenced that writer away,
// does not let a reader starting afresh take the record); then the slots'
// fences, and the table catches up again. It persists until it succeeds
// or the client closes; then the slots stay unfenced and their records
// are left to their next owner.
func (d *deliverer) fenceSlots(ctx context.Context, parts []lanes.TP) {
	slots := d.holds.assign(parts)
	if len(slots) == 0 {
		return
	}
	var epochs map[int32]int32
	var rewritten int
	var fatal error // the holds topic cannot serve these slots: retrying will not help
	if !d.persist(ctx, "fencing the holds of assigned partitions", func() error {
		if err := d.holds.table.WaitCaughtUp(ctx); err != nil {
			return err
		}
		epochs = map[int32]int32{}
		var recs []*kgo.Record
		for _, p := range slots {
			epochs[p] = d.holds.table.Epoch(p) + 1
			ectx := context.WithValue(ctx, epochKey{}, epochs[p])
			for _, key := range d.holds.table.RejectedIn(p) {
				var h *topics.Hold
				if v, ok := d.holds.table.Get(key); ok {
					h = &v
				}
				recs = append(recs, d.holdRecord(ectx, []byte(key), h))
			}
			fence, err := d.fenceRecord(ctx, p, epochs[p])
			if errors.Is(err, errFewHolds) {
				fatal = err
				return nil
			}
			if err != nil {
				return err
			}
			recs = append(recs, fence)
		}
		if err := d.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		rewritten = len(recs) - len(slots)
		return d.holds.table.WaitCaughtUp(ctx)
	}) {
		return
	}
	if fatal != nil {
		select {
		case d.fatal <- fatal:
		default:
		}
		return
	}
	d.holds.fenced(epochs)
	if rewritten > 0 {
		d.log.Info("wrote the holds of ordering keys over a fenced writer's", zap.Int("keys", rewritten))
	}
}

// errFewHolds: the holds topic has fewer partitions than the topics the
// deliverer consumes, so some keys' holds have no partition of their own.
var errFewHolds = errors.New("the holds topic needs as many partitions as the deliveries topics")

// fenceRecord is the fence of slot p at epoch e on the holds topic.
func (d *deliverer) fenceRecord(ctx context.Context, p, e int32) (*kgo.Record, error) {
	d.holds.mu.Lock()
	width := d.holds.width
	d.holds.mu.Unlock()
	if width == 0 {
		td, err := kadm.NewClient(d.cl).ListTopics(ctx, d.names.Holds())
		if err != nil {
			return nil, err
		}
		t, ok := td[d.names.Holds()]
		if !ok || t.Err != nil || len(t.Partitions) == 0 {
			return nil, fmt.Errorf("reading the partitions of %s: %v", d.names.Holds(), t.Err)
		}
		width = len(t.Partitions)
		d.holds.mu.Lock()
		d.holds.width = width
		d.holds.mu.Unlock()
	}
	if int(p) >= width {
		return nil, fmt.Errorf("%w: %s has %d, partition %d of the deliveries topics has none", errFewHolds, d.names.Holds(), width, p)
	}
	return &kgo.Record{Topic: d.names.Holds(), Key: topics.FenceKey(p, width), Value: []byte{},
		Headers: []kgo.RecordHeader{topics.EpochHeader(e)}}, nil
}

func (d *deliverer) holdRecord(ctx context.Context, key []byte, h *topics.Hold) *kgo.Record {
	r := &kgo.Record{Topic: d.names.Holds(), Key: key, Headers: []kgo.RecordHeader{topics.EpochHeader(writeEpoch(ctx))}}
	if h != nil {
		r.Value, r.Headers = h.Encode(), append(h.Headers(), r.Headers...)
	}
	return r
}

// writeHold produces a key's hold (nil releases it) and remembers it.
func (d *deliverer) writeHold(ctx context.Context, key []byte, h *topics.Hold) bool {
	r := d.holdRecord(ctx, key, h)
	if !d.produce(ctx, []*kgo.Record{r}) {
		return false
	}
	d.holds.wrote(string(key), h, r)
	return true
}

// held tells whether rec's key is held (or its hold cannot be read now,
// which ordered then waits out).
func (d *deliverer) held(ctx context.Context, rec *kgo.Record) bool {
	h, _, err := d.holds.get(ctx, lanes.TPOf(rec), string(rec.Key))
	return err != nil || h != nil
}

// ordered handles a delivery of an ordered subscription that has an
// ordering key. It reports whether everything it caused was acknowledged.
func (d *deliverer) ordered(ctx context.Context, it *lanes.Item, del *topics.Delivery, rng *rand.Rand) bool {
	// Reading the hold, parking, writing it are the broker's time, not the
	// endpoint's: only the request counts in the subscription's pace.
	d.lanes.Unpaced(it)
	t, ok := d.place(ctx, it.Rec, del)
	if t == nil || !ok {
		return ok
	}
	if it.Spill {
		// Spilled unattempted: the key waits for it like for a failed head.
		return d.produceHold(ctx, d.spill(ctx, it.Rec, del, it.Wait), t.key, t.failed(del.EventID, del.Attempt))
	}
	recs, v := d.request(ctx, it, del, rng)
	if v == cut {
		return false
	}
	return d.outcome(ctx, t, del.EventID, recs, v, headAttempt(del, v))
}

// turn is an ordered delivery's place in its key's order, read from the
// key's hold before its attempt: what its outcome makes of the hold.
type turn struct {
	key    []byte
	held   *topics.Hold // the key's hold before the attempt; nil: free
	next   topics.Hold  // the hold after it, as far as known before
	isHead bool         // the key's failed head, back from its tier
	copied bool         // a parked delivery a release copied (releasedOne)
}

// place reads the hold of an ordered delivery's key and settles the
// delivery when it is not the key's turn: parked behind a held key, or
// skipped as handled already (redone after a crash, a stale copy), or its
// key's parked deliveries copied again (the head's record redone while
// its key is released). Otherwise it returns its turn, to attempt it. ok
// reports whether everything it caused was acknowledged.
func (d *deliverer) place(ctx context.Context, rec *kgo.Record, del *topics.Delivery) (*turn, bool) {
	key := rec.Key
	var held *topics.Hold
	var rejected bool
	if !d.persist(ctx, "reading the hold of an ordering key", func() (err error) {
		held, rejected, err = d.holds.get(ctx, lanes.TPOf(rec), string(key))
		return err
	}) {
		return nil, false
	}
	if rejected {
		// The key's last hold record is a fenced writer's, which
		// compaction would keep over the hold it ignored: written over.
		d.log.Info("writing the hold of an ordering key over a fenced writer's", zap.String("key", string(key)))
		if !d.writeHold(ctx, key, held) {
			return nil, false
		}
	}
	if at, ok := d.releasedCopy(rec); ok {
		return d.releasedTurn(key, held, at)
	}
	isHead := held != nil && held.ReleasingTo < 0 && del.EventID == held.Head && del.Attempt == held.HeadAttempt
	through := d.through(rec)
	if held != nil && held.ReleasingTo >= 0 && del.EventID == held.Head && del.Attempt == held.HeadAttempt &&
		(through < 0 || through > held.Through) {
		// The head's record redone while its key is released: its
		// outcome was written with the hold (releaseHead), the copies
		// perhaps not. Copies made twice are skipped as they come back.
		return nil, d.copyParked(ctx, key, held)
	}
	if held != nil && !isHead {
		if through >= 0 && through <= held.Through || del.EventID == held.Head {
			// Redone after a crash (already parked, or the head's own
			// earlier record), or a stale copy of the head: handled.
			return nil, true
		}
		return nil, d.park(ctx, rec, del, held)
	}
	t := &turn{key: key, held: held, isHead: isHead,
		next: topics.Hold{ParkedFrom: -1, ParkedLast: -1, ReleasingTo: -1, Through: through, Since: time.Now()}}
	if isHead {
		t.next.ParkedFrom, t.next.ParkedPartition, t.next.ParkedLast, t.next.Since = held.ParkedFrom, held.ParkedPartition, held.ParkedLast, held.Since
		t.next.Through = max(held.Through, through)
	}
	return t, true
}

// releasedTurn is the turn of a parked delivery that a release copied to
// the redeliveries topic, at offset at of the parked topic: the next of
// its key when at is at or past the hold's ParkedFrom and within the
// release. Any other copy was attempted before (redone after a crash), or
// belongs to a release that a failure ended, whose deliveries are still
// parked and are copied again by the next release: it is skipped (nil).
func (d *deliverer) releasedTurn(key []byte, held *topics.Hold, at int64) (*turn, bool) {
	if held == nil || held.ReleasingTo < 0 || at < held.ParkedFrom || at > held.ReleasingTo {
		return nil, true
	}
	t := &turn{key: key, held: held, next: *held, copied: true}
	t.next.ParkedFrom = at + 1
	return t, true
}

// failed is the key's hold once the delivery eventID of turn t went to a
// retry tier for its attempt number attempt: it is the key's head.
func (t *turn) failed(eventID string, attempt int) *topics.Hold {
	h := t.next
	h.Head, h.HeadAttempt, h.ReleasingTo = eventID, attempt, -1
	return &h
}

// outcome produces recs, the outcome v of the delivery eventID of turn t,
// with what it makes of the key's hold. Sent to a retry tier (for attempt
// number attempt), it holds the key. Delivered or dead-lettered: the key's
// head releases the key; a released copy moves the release past itself,
// and the last one releases what was parked meanwhile; a free key stays
// free. A success moves ParkedFrom past a copy with its attempt record, so
// that a crash repeats one request at most.
func (d *deliverer) outcome(ctx context.Context, t *turn, eventID string, recs []*kgo.Record, v verdict, attempt int) bool {
	switch {
	case v == retried || v == delayed:
		return d.produceHold(ctx, recs, t.key, t.failed(eventID, attempt))
	case t.copied && t.next.ParkedFrom <= t.held.ReleasingTo:
		return d.produceHold(ctx, recs, t.key, &t.next)
	case t.copied:
		next := t.next
		next.ReleasingTo = -1
		return d.release(ctx, t.key, &next, recs)
	case t.isHead:
		next := t.next
		next.Head, next.HeadAttempt = eventID, t.held.HeadAttempt
		return d.releaseHead(ctx, t.key, &next, recs)
	}
	return d.produce(ctx, recs)
}

// request attempts an ordered delivery: its request is the part of the
// record that counts in the subscription's pace, and once it is over the
// subscription's slot is free while the outcome and the hold are written
// (lanes.Sent), as for a plain attempt.
func (d *deliverer) request(ctx context.Context, it *lanes.Item, del *topics.Delivery, rng *rand.Rand) ([]*kgo.Record, verdict) {
	d.lanes.Request(it)
	recs, v := d.attempt(ctx, it.Rec, del, rng)
	if v != cut {
		d.lanes.Sent(it)
	}
	return recs, v
}

// releasedCopy tells whether rec is a parked delivery a release copied to
// the redeliveries topic, and its offset on the parked topic.
func (d *deliverer) releasedCopy(rec *kgo.Record) (int64, bool) {
	if rec.Topic != d.names.Redeliveries() {
		return 0, false
	}
	return topics.OffsetOf(rec.Headers, topics.HeaderParkedAt)
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
	hr := d.holdRecord(ctx, key, h)
	if !d.produce(ctx, append(recs, hr)) {
		return false
	}
	d.holds.wrote(string(key), h, hr)
	return true
}

// park appends a delivery of a held key to the parked topic, chained to the
// key's previous parked delivery (topics.Hold.ParkedLast), and then moves
// the hold's Through past it and its ParkedLast to it. A crash between the
// two leaves a parked copy no chain reaches; the delivery, redone, is
// parked again.
func (d *deliverer) park(ctx context.Context, rec *kgo.Record, del *topics.Delivery, held *topics.Hold) bool {
	parked := &kgo.Record{Topic: d.names.Parked(), Key: rec.Key, Value: rec.Value}
	chained := held.ParkedFrom < 0 || held.ParkedLast >= 0
	switch {
	case held.ParkedFrom < 0:
		parked.Headers = []kgo.RecordHeader{topics.OffsetHeader(topics.HeaderParkedAfter, -1)}
	case chained:
		parked.Headers = []kgo.RecordHeader{topics.OffsetHeader(topics.HeaderParkedAfter, held.ParkedLast)}
	}
	tracing.Carry(ctx, &parked.Headers, rec.Headers)
	att := newAttempt(del, time.Now())
	att.Outcome, att.FailureCategory = topics.OutcomeBlocked, topics.FailureKeyHeld
	att.Error = "waiting behind event " + held.Head + " of the same ordering key"
	if !d.produce(ctx, []*kgo.Record{parked, d.attemptRecord(ctx, rec, &att)}) {
		return false
	}
	h := *held
	h.Through = max(h.Through, d.through(rec))
	if held.ParkedFrom < 0 {
		h.ParkedFrom, h.ParkedPartition = parked.Offset, parked.Partition
	}
	if chained {
		h.ParkedLast = parked.Offset
	}
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

// release produces recs (the outcome of the head, or of the last
// delivery of a release) and releases the key's parked deliveries from
// h.ParkedFrom on: it copies them, in order, to the redeliveries topic,
// each naming its parked offset, and then writes the hold that expects
// them (ReleasingTo). Each copy comes back as a record of its own, so the
// head's record finishes now, and the partitions' watermarks never wait
// for a whole release. With nothing parked, the key is free: its hold is
// removed. A crash before the hold leaves copies it does not expect,
// which are skipped.
func (d *deliverer) release(ctx context.Context, key []byte, h *topics.Hold, recs []*kgo.Record) bool {
	var parked []*kgo.Record
	if h.ParkedFrom >= 0 && !d.persist(ctx, "reading the parked deliveries of an ordering key", func() (err error) {
		parked, err = d.parkedOf(ctx, key, h)
		return err
	}) {
		return false
	}
	if len(parked) == 0 {
		d.log.Debug("released ordered key", zap.String("key", string(key)))
		return d.produceHold(ctx, recs, key, nil)
	}
	if !d.produce(ctx, append(recs, d.copies(ctx, key, parked)...)) {
		return false
	}
	next := *h
	next.ParkedFrom, next.ReleasingTo = parked[0].Offset, parked[len(parked)-1].Offset
	return d.writeHold(ctx, key, &next)
}

// releaseHead releases the key of a head that succeeded or was
// dead-lettered. With deliveries parked behind it in a chain, it writes
// the head's outcome first, with the hold that expects their copies up to
// the last one (ReleasingTo is ParkedLast), and then reads and copies
// them (copyParked): reading a chain takes a round trip per parked
// delivery, and from the outcome on, a crash no longer repeats the head's
// request (its record, redone, copies again). Otherwise it releases as
// release does.
func (d *deliverer) releaseHead(ctx context.Context, key []byte, h *topics.Hold, recs []*kgo.Record) bool {
	if h.ParkedFrom < 0 || h.ParkedLast < h.ParkedFrom {
		return d.release(ctx, key, h, recs)
	}
	next := *h
	next.ReleasingTo = h.ParkedLast
	if !d.produceHold(ctx, recs, key, &next) {
		return false
	}
	return d.copyParked(ctx, key, &next)
}

// copyParked copies the key's parked deliveries from h.ParkedFrom to
// h.ReleasingTo to the redeliveries topic, for the hold h, written
// already, that expects them. With none of them left (deleted by
// retention), the key is free.
func (d *deliverer) copyParked(ctx context.Context, key []byte, h *topics.Hold) bool {
	var parked []*kgo.Record
	if !d.persist(ctx, "reading the parked deliveries of an ordering key", func() (err error) {
		parked, err = d.parkedOf(ctx, key, h)
		return err
	}) {
		return false
	}
	parked = slices.DeleteFunc(parked, func(r *kgo.Record) bool { return r.Offset > h.ReleasingTo })
	if len(parked) == 0 {
		d.log.Debug("released ordered key", zap.String("key", string(key)))
		return d.writeHold(ctx, key, nil)
	}
	return d.produce(ctx, d.copies(ctx, key, parked))
}

// copies are the records that copy parked deliveries to the redeliveries
// topic, each naming its parked offset.
func (d *deliverer) copies(ctx context.Context, key []byte, parked []*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, 0, len(parked))
	for _, r := range parked {
		c := &kgo.Record{Topic: d.names.Redeliveries(), Key: key, Value: r.Value,
			Headers: []kgo.RecordHeader{topics.OffsetHeader(topics.HeaderParkedAt, r.Offset)}}
		tracing.Carry(ctx, &c.Headers, r.Headers)
		out = append(out, c)
	}
	return out
}

// parkedOf returns the key's parked deliveries from h.ParkedFrom on, in
// order: by walking the chain back from h.ParkedLast, reading the key's own
// records only; or, for deliveries parked before the chain (or a chain that
// does not hold), by reading the partition from h.ParkedFrom to its end.
func (d *deliverer) parkedOf(ctx context.Context, key []byte, h *topics.Hold) ([]*kgo.Record, error) {
	if h.ParkedLast >= 0 {
		recs, ok, err := d.walkParked(ctx, key, h)
		if err != nil || ok {
			return recs, err
		}
		d.log.Warn("parked deliveries of an ordering key are not chained; reading the partition",
			zap.String("key", string(key)), zap.Int64("from", h.ParkedFrom))
	}
	return d.scanParked(ctx, key, h)
}

// walkParked follows the chain; ok is false when it breaks (a record
// without the header, or another key's).
func (d *deliverer) walkParked(ctx context.Context, key []byte, h *topics.Hold) (recs []*kgo.Record, ok bool, err error) {
	for off := h.ParkedLast; off >= h.ParkedFrom; {
		r, read, err := d.parked.at(ctx, h.ParkedPartition, off)
		d.m.readParked(read)
		switch {
		case err != nil:
			return nil, false, err
		case r == nil:
			// Deleted by retention (30 days): so is everything before it.
			d.log.Warn("parked delivery gone", zap.String("key", string(key)), zap.Int64("offset", off))
			slices.Reverse(recs)
			return recs, true, nil
		case string(r.Key) != string(key):
			return nil, false, nil
		}
		prev, chained := topics.OffsetOf(r.Headers, topics.HeaderParkedAfter)
		if !chained || prev >= off {
			return nil, false, nil
		}
		recs = append(recs, r)
		off = prev
	}
	slices.Reverse(recs)
	return recs, true, nil
}

// scanParked reads the key's parked deliveries from h.ParkedFrom to the
// partition's end as it is when the scan starts.
func (d *deliverer) scanParked(ctx context.Context, key []byte, h *topics.Hold) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	end := int64(-1)
	for off := h.ParkedFrom; end < 0 || off < end; {
		batch, hw, err := d.parked.fetch(ctx, h.ParkedPartition, off, scanBytes)
		if err != nil {
			return nil, err
		}
		d.m.readParked(len(batch))
		if end < 0 {
			end = hw
		}
		if len(batch) == 0 {
			break
		}
		for _, r := range batch {
			if r.Offset >= end {
				break
			}
			if string(r.Key) == string(key) {
				recs = append(recs, r)
			}
		}
		off = batch[len(batch)-1].Offset + 1
	}
	return recs, nil
}
