// Package lanes schedules delivery records for the workers.
//
// Records with the same key run one after another in offset order; records
// with different keys run concurrently. Each subscription has its own
// in-flight cap, and subscriptions with runnable work take turns, so a slow
// subscription holds only its own lane. Records have a priority class, by
// the topic they came from: the classes share the workers by weighted
// turns (high, normal, low), and within a class subscriptions take turns.
// A subscription spread over several partitions (topics.Subscription
// Partitions) is here one subscription per shard, its lane, each with its
// share of the limits: replicas owning different shards together keep to
// the subscription's cap without coordinating.
// Per partition, the lanes keep the commit watermark: the offset of the
// lowest record not yet finished, which is the only offset that may be
// committed (invariant 1), and the runs of records above it that are
// finished, which a later owner of the partition skips (invariant 3).
//
// A subscription that batches (Shape.Batch) runs its ready records in
// batches: once Batch of them are ready, or Shape.BatchWait after the
// oldest became ready, a worker takes up to Batch of them as one item
// (Item.Batch), which holds one request slot. Only the head of a key is
// ever ready, so a key's next record waits for the batch holding its
// earlier one. Records marked as one batch's (topics.HeaderBatch: a failed
// batch's retries) are batched with each other only, so that a batch
// retried is sent again as it was.
package lanes

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// Item is one scheduled record.
type Item struct {
	Rec *kgo.Record
	Sub string // its lane: the key up to '/', the subscription id (and shard)
	// Spill is set when the record arrived while its subscription already
	// had its queue limit of records held and could not work them off
	// within the spill delay (see New): it is not attempted but handed to
	// the retry path, in key order, ahead of ordinary work (it is cheap)
	// and outside the subscription's in-flight cap.
	Spill bool
	// Wait is, for a spill, how long its subscription needed at its pace
	// to finish the records it held when this one arrived: sooner than
	// that, the record would only spill again.
	Wait time.Duration
	// Batch is, for an item that is a batch, its records, this one
	// first; nil for a single record. The batch runs, is Sent and is Done
	// as one: its first record stands for it.
	Batch []*Item

	key   string
	class Class
	state state
	entry *entry
	part  *partition
	sent  bool // Sent: the request is over, its outcome not yet acknowledged
	// unpaced: between Unpaced and Request, the item makes no request, so
	// its time says nothing of the endpoint's pace.
	unpaced bool
	// member: one of a batch's records other than its first, which
	// stands for the batch in the subscription's counts.
	member bool
	// group is the batch a failed batch's retry belongs to
	// (topics.HeaderBatch), of groupSize records; "" for any other.
	group     string
	groupSize int
	readyAt   time.Time
	// flush: kept by a hand-off to run before the partition goes, so its
	// batch does not wait for more.
	flush bool
}

// Class is a record's priority class, decided by its topic (SetClass).
type Class uint8

// The classes; Normal is the zero value, the class of every topic not set.
const (
	Normal Class = iota
	High
	Low
	// Retry is due retries (redeliveries): they share Normal's turns with
	// it, one for one, and run at most RetryLimit at a time.
	Retry
	classes // how many there are
)

// turns is the order in which the classes take their turns at the workers:
// of every ten records started, six are high, three normal and one low when
// all three have runnable work. A class with nothing runnable passes its
// turn on to the next in the order, so the others share its turns in their
// own proportion, no worker idles while a class has work, and a runnable
// class waits at most ten records for its turn.
var turns = [...]Class{High, Normal, High, High, Normal, High, Low, High, Normal, High}

type state uint8

const (
	waiting state = iota // behind an earlier record of the same key
	ready                // at the head of its key, in its subscription's ready list
	running
)

// entry is one offset in a partition's commit ledger.
type entry struct {
	offset int64
	epoch  int32
	done   bool
}

// TP names a partition of a consumed topic.
type TP struct {
	Topic     string
	Partition int32
}

// TPOf is the partition a record came from.
func TPOf(r *kgo.Record) TP { return TP{Topic: r.Topic, Partition: r.Partition} }

// partition is the commit ledger of one assigned partition. A revoked
// partition's ledger is detached: items still running finish against it,
// and a new assignment starts a fresh one.
type partition struct {
	tp       TP
	ledger   []*entry // in offset order, from the first unfinished one
	next     int64    // offset after the last added record
	epoch    int32    // leader epoch of the last added record
	inflight int
	detached bool
	items    int   // records held: waiting, ready or running
	started  int64 // highest offset started; -1 before any
	// lastDone is the highest offset finished: no entry after it is done,
	// so Finished stops there instead of reading every record held.
	lastDone int64
	// block is where the next entries are taken from (newEntry).
	block []entry
}

// entryBlock is how many entries newEntry allocates at once.
const entryBlock = 256

// newEntry is the ledger entry of a record. Entries are taken from blocks
// allocated a few hundred at a time, in offset order: one allocation per
// block instead of one per record, and a commit's read of the ledger
// (Finished), up to thousands of entries a partition, walks memory in
// order instead of following a pointer per record to wherever the heap put
// it. A block lives while one of its entries is held.
func (p *partition) newEntry(offset int64, epoch int32) *entry {
	if len(p.block) == cap(p.block) {
		p.block = make([]entry, 0, entryBlock)
	}
	p.block = append(p.block, entry{offset: offset, epoch: epoch})
	return &p.block[len(p.block)-1]
}

// watermark is the offset to commit: the first unfinished record, or the one
// after the last record when all are finished.
func (p *partition) watermark() kgo.EpochOffset {
	if len(p.ledger) > 0 {
		return kgo.EpochOffset{Epoch: p.ledger[0].epoch, Offset: p.ledger[0].offset}
	}
	return kgo.EpochOffset{Epoch: p.epoch, Offset: p.next}
}

func (p *partition) advance() {
	i := 0
	for i < len(p.ledger) && p.ledger[i].done {
		i++
	}
	// Re-slice rather than copy: copying the rest of the ledger on every
	// finished record is quadratic in the records held. Add's append
	// moves the live tail to a fresh array when this one runs out.
	clear(p.ledger[:i])
	p.ledger = p.ledger[i:]
}

type subscription struct {
	id       string
	limits   limits
	ready    [classes][]*Item // per class, in the order they became ready
	inflight int
	// acking counts its records whose request is over (Sent) and whose
	// outcome is not acknowledged yet (Done).
	acking int
	items  int           // waiting + ready + running
	queued [classes]bool // on the class's run queue

	// The pace (workOff): a moving average of how long its records ran,
	// the records running now and when the last of them finished, which
	// bound that from below (an endpoint that hangs finishes nothing to
	// average).
	took     time.Duration
	running  map[*Item]time.Time
	lastDone time.Time

	// parts counts the records held per partition they came from; crowded
	// is set while a fast subscription holds half the buffer (see Crowded).
	parts   map[TP]int
	crowded bool

	// Batching (Shape): the records of a batch at most, how long the
	// oldest ready one waits for more, the ready records per group and
	// per class of those in a group, and the timer that queues the
	// subscription when its oldest ready record has waited long enough.
	batch     int
	batchWait time.Duration
	grouped   map[string]int
	inGroups  [classes]int
	timer     *time.Timer
	timerAt   time.Time
	flushing  int // its records to flush (Item.flush) not started yet
}

// limits are a subscription's share of the per-subscription limits: all of
// them, or for a shard of a spread subscription its width's part of each.
type limits struct {
	inflight int // requests at a time
	queued   int // records held past which a slow one spills
	crowded  int // records held at which a fast one is crowded
}

// limitsOf returns the limits of a subscription spread over width shards.
func (l *Lanes) limitsOf(width int) limits {
	width = max(1, width)
	queued := max(1, l.maxQueuedSub/width)
	return limits{inflight: max(1, l.maxPerSub/width), queued: queued, crowded: max(queued, l.maxBuffered/2/width)}
}

// slow reports whether s needs more than slowFactor spill delays, at its
// pace, to finish what it holds; with no spill delay every subscription is.
func (l *Lanes) slow(s *subscription, now time.Time) bool {
	return l.spillAfter == 0 || s.workOff(now) > slowFactor*l.spillAfter
}

// slowFactor: a subscription is slow when it needs this many times the
// spill delay to finish what it holds. A pace measured while the whole
// process is busy (a burst to healthy endpoints) includes the time its
// records waited for the broker and the machine, not only the endpoint; the
// margin keeps such a subscription from spilling, while one that hangs
// passes it within a few spill delays.
const slowFactor = 4

// workOff estimates how long the subscription needs to finish the records
// it holds, running as many at a time as its limit, one record taking its
// pace: the moving average of how long its records ran, or, when longer,
// how long it has gone without finishing one while some ran (an endpoint
// that hangs finishes nothing to average). Without finishing one, not the
// age of the oldest running: one stalled request among quick ones (a lost
// packet, a pause of the endpoint's) is not the endpoint's pace, while an
// endpoint that hangs on some requests fills its slots with them until it
// finishes none.
func (s *subscription) workOff(now time.Time) time.Duration {
	per := s.took
	if len(s.running) > 0 {
		since := now // the oldest running started, or the last finished since
		for _, started := range s.running {
			if started.Before(since) {
				since = started
			}
		}
		if s.lastDone.After(since) {
			since = s.lastDone
		}
		per = max(per, now.Sub(since))
	}
	return per * time.Duration(s.items) / time.Duration(s.limits.inflight*max(1, s.batch))
}

// Lanes hold the records a deliverer consumed until a worker takes them
// (Next) and they finish (Done), per subscription and key, and keep each
// partition's commit watermark.
type Lanes struct {
	maxPerSub    int
	maxQueuedSub int
	maxBuffered  int
	spillAfter   time.Duration

	mu       sync.Mutex
	work     *sync.Cond // a subscription became runnable, or closed
	change   *sync.Cond // an item finished or was dropped
	closed   bool
	buffered int
	inTopic  map[string]int // records held per topic
	classOf  map[string]Class
	subs     map[string]*subscription
	keys     map[string][]*Item       // per key, in offset order; [0] is ready or running
	runq     [classes][]*subscription // per class, subscriptions with ready items of it and room
	turn     int                      // index in turns of the class whose turn is next
	spillq   []*Item                  // ready spill items
	parts    map[TP]*partition
	crowded  int // subscriptions crowded
	// Retry items that may still start (SetRetryBudget), which of Normal
	// and Retry has the next of Normal's turns, and the lateness of the
	// other classes' records as they started (FreshLateness).
	retryBudget int
	retryTurn   bool
	lateMax     time.Duration
	lateN       int
	// resumed holds, per partition, the runs of records above its
	// committed offset that its previous owner finished (Resume), up to
	// those that arrived.
	resumed map[TP][]kafka.Run
}

// New returns lanes that run at most maxPerSub records of one subscription
// at a time. Records of a subscription that holds maxQueuedSub or more
// spill when, at the pace its records run, it would need more than
// slowFactor times spillAfter to finish what it holds (a slow or hanging
// endpoint). A fast one keeps its records, however deep its backlog: a
// burst is not slowness, and spilling would only make its records later
// and out of order. Once a fast one holds half of maxBuffered, its
// partitions are crowded (Crowded) and the caller stops fetching them, so
// no subscription takes more than half of the memory all share. spillAfter
// is the shortest retry delay, the soonest a spilled record comes back;
// zero spills on the count alone. The shards of a spread subscription
// share each of these limits (Add).
func New(maxPerSub, maxQueuedSub, maxBuffered int, spillAfter time.Duration) *Lanes {
	l := &Lanes{
		maxPerSub:    max(1, maxPerSub),
		maxQueuedSub: max(1, maxQueuedSub),
		maxBuffered:  maxBuffered,
		spillAfter:   spillAfter,
		subs:         map[string]*subscription{},
		keys:         map[string][]*Item{},
		inTopic:      map[string]int{},
		classOf:      map[string]Class{},
		parts:        map[TP]*partition{},
		resumed:      map[TP][]kafka.Run{},
		retryBudget:  math.MaxInt,
	}
	l.work = sync.NewCond(&l.mu)
	l.change = sync.NewCond(&l.mu)
	return l
}

// SetClass gives the records of a topic a priority class; records of
// topics not set are Normal. Call it before adding records of the topic.
func (l *Lanes) SetClass(topic string, c Class) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.classOf[topic] = c
}

// Resume gives the runs of records of a partition, above its committed
// offset, that its previous owner finished (kafka.FinishedAbove): Add takes
// them as finished, without running them. Call it when the partition is
// assigned, before its records are added.
func (l *Lanes) Resume(tp TP, runs []kafka.Run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(runs) == 0 {
		delete(l.resumed, tp)
		return
	}
	l.resumed[tp] = slices.Clone(runs)
}

// finishedBefore tells whether a record at off of tp was finished by the
// partition's previous owner, and forgets the runs below it.
func (l *Lanes) finishedBefore(tp TP, off int64) bool {
	runs, ok := l.resumed[tp]
	if !ok {
		return false
	}
	for len(runs) > 0 && runs[0].To < off {
		runs = runs[1:]
	}
	if len(runs) == 0 {
		delete(l.resumed, tp)
		return false
	}
	l.resumed[tp] = runs
	return runs[0].From <= off
}

// Shape is what a lane's subscription asks of it, as of its last record
// added: Width, how many shards it is spread over (the lane has that share
// of each per-subscription limit); and when it batches, Batch, the records
// of a batch at most, and BatchWait, how long the oldest ready record
// waits for more. The zero Shape is one shard without batches.
type Shape struct {
	Width     int
	Batch     int
	BatchWait time.Duration
}

// maxBatchBytes bounds the records of a batch, and so its request's body:
// a thousand events of up to 256 KiB each would be a quarter of a
// gigabyte. A batch takes one record however large.
const maxBatchBytes = 1 << 20

// Add schedules a record. sub is its lane (topics.LaneOfKey). A record the
// partition's previous owner finished (Resume) is only entered in the
// ledger, as finished.
func (l *Lanes) Add(r *kgo.Record, sub string, shape Shape) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tp := TPOf(r)
	p := l.parts[tp]
	if p == nil {
		p = &partition{tp: tp, started: -1, lastDone: -1}
		l.parts[tp] = p
	}
	e := p.newEntry(r.Offset, r.LeaderEpoch)
	p.ledger = append(p.ledger, e)
	p.next, p.epoch = r.Offset+1, r.LeaderEpoch
	if l.finishedBefore(tp, r.Offset) {
		e.done = true
		p.lastDone = max(p.lastDone, e.offset)
		p.advance()
		return
	}
	p.items++

	now := time.Now()
	s := l.subs[sub]
	if s == nil {
		s = &subscription{id: sub, running: map[*Item]time.Time{}, parts: map[TP]int{}}
		l.subs[sub] = s
	}
	s.limits = l.limitsOf(shape.Width)
	s.batch, s.batchWait = shape.Batch, shape.BatchWait
	spill := s.items >= s.limits.queued && l.slow(s, now)
	it := &Item{Rec: r, Sub: sub, Spill: spill, key: string(r.Key), class: l.classOf[r.Topic], entry: e, part: p}
	if s.batch > 1 {
		it.group, it.groupSize, _ = topics.BatchOf(r.Headers)
	}
	if spill {
		it.Wait = s.workOff(now)
	} else if s.items >= s.limits.crowded && !s.crowded {
		s.crowded = true
		l.crowded++
	}
	s.items++
	s.parts[tp]++
	l.buffered++
	l.inTopic[r.Topic]++
	q := l.keys[it.key]
	l.keys[it.key] = append(q, it)
	if len(q) == 0 {
		l.makeReady(s, it)
	}
}

func (l *Lanes) makeReady(s *subscription, it *Item) {
	it.state = ready
	if it.Spill {
		l.spillq = append(l.spillq, it)
		l.work.Signal()
		return
	}
	if s.batch > 1 {
		it.readyAt = time.Now()
	}
	if it.group != "" {
		if s.grouped == nil {
			s.grouped = map[string]int{}
		}
		s.grouped[it.group]++
		s.inGroups[it.class]++
	}
	s.ready[it.class] = append(s.ready[it.class], it)
	l.enqueue(s)
}

// unready counts out a record taken off its subscription's ready list.
func (l *Lanes) unready(s *subscription, it *Item) {
	if it.group == "" {
		return
	}
	if s.grouped[it.group]--; s.grouped[it.group] <= 0 {
		delete(s.grouped, it.group)
	}
	s.inGroups[it.class]--
}

// room tells whether s may start a record: fewer requests than its cap,
// and fewer than twice the cap of records not yet acknowledged, so that
// what a crash can repeat of it stays bounded (invariant 3).
func (s *subscription) room() bool {
	return s.inflight < s.limits.inflight && s.inflight+s.acking < 2*s.limits.inflight
}

// enqueue puts s on the run queue of every class it has ready items of, if
// it has room and, when it batches, the class's batch is due; a batch not
// due yet queues it when it will be.
func (l *Lanes) enqueue(s *subscription) {
	if !s.room() {
		return
	}
	var wake time.Time
	for c := range classes {
		if s.queued[c] || len(s.ready[c]) == 0 {
			continue
		}
		if at, due := s.due(c); !due {
			if wake.IsZero() || at.Before(wake) {
				wake = at
			}
			continue
		}
		s.queued[c] = true
		l.runq[c] = append(l.runq[c], s)
		l.work.Signal()
	}
	if !wake.IsZero() {
		l.wakeAt(s, wake)
	}
}

// due tells whether the ready records of class c make a batch now: as many
// as a batch takes (of a retried batch: all of it), or the oldest waited
// BatchWait, which is at. A subscription that does not batch always is.
func (s *subscription) due(c Class) (at time.Time, due bool) {
	if s.batch <= 1 || s.flushing > 0 {
		return time.Time{}, true
	}
	head := s.ready[c][0]
	ready, want := len(s.ready[c])-s.inGroups[c], s.batch
	if head.group != "" {
		ready, want = s.grouped[head.group], min(s.batch, head.groupSize)
	}
	at = head.readyAt.Add(s.batchWait)
	return at, ready >= want || !time.Now().Before(at)
}

// wakeAt queues s at at, when its oldest ready record has waited long
// enough for a batch, unless a wake-up is due sooner.
func (l *Lanes) wakeAt(s *subscription, at time.Time) {
	if s.timer != nil && !s.timerAt.After(at) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timerAt = at
	s.timer = time.AfterFunc(time.Until(at), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.subs[s.id] != s || !s.timerAt.Equal(at) {
			return // forgotten, or a sooner wake-up replaced this one
		}
		s.timer = nil
		l.enqueue(s)
	})
}

// pick takes the next subscription off the run queue of the class whose
// turn it is, or of the next class in turns with one that can run. It
// passes over the subscriptions that reached their cap while queued (they
// are queued again when a record of theirs finishes). It returns nil when
// nothing can run.
func (l *Lanes) pick() (*subscription, Class) {
	for i := range len(turns) {
		c := turns[(l.turn+i)%len(turns)]
		cs := []Class{c}
		if c == Normal {
			cs = []Class{Normal, Retry}
			if l.retryTurn {
				cs = []Class{Retry, Normal}
			}
		}
		for _, c := range cs {
			if c == Retry && l.retryBudget <= 0 {
				continue
			}
			if s := l.take(c); s != nil {
				l.turn = (l.turn + i + 1) % len(turns)
				if len(cs) > 1 { // the next of Normal's turns goes first to the other
					l.retryTurn = c == Normal
				}
				return s, c
			}
		}
	}
	return nil, 0
}

// take takes the first subscription with room off the run queue of c.
func (l *Lanes) take(c Class) *subscription {
	for len(l.runq[c]) > 0 {
		s := l.runq[c][0]
		l.runq[c][0] = nil
		l.runq[c] = l.runq[c][1:]
		s.queued[c] = false
		if s.room() {
			return s
		}
	}
	return nil
}

// runnable reports whether a worker may find something to run.
func (l *Lanes) runnable() bool {
	if len(l.spillq) > 0 {
		return true
	}
	for c := range classes {
		if len(l.runq[c]) > 0 && (c != Retry || l.retryBudget > 0) {
			return true
		}
	}
	return false
}

// Next blocks until a record may run and returns it; ok is false once the
// lanes are closed. Spills come first, then the classes by their turns.
func (l *Lanes) Next() (it *Item, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s *subscription
	var c Class
	for !l.closed && len(l.spillq) == 0 {
		if s, c = l.pick(); s != nil {
			break
		}
		l.work.Wait()
	}
	if l.closed {
		return nil, false
	}
	if s == nil {
		it = l.spillq[0]
		l.spillq[0] = nil
		l.spillq = l.spillq[1:]
		it.state = running
		it.part.inflight++
		it.part.started = max(it.part.started, it.Rec.Offset)
		if l.runnable() {
			l.work.Signal()
		}
		return it, true
	}
	if s.batch > 1 {
		it = l.takeBatch(s, c)
	} else {
		it = s.ready[c][0]
		s.ready[c][0] = nil
		s.ready[c] = s.ready[c][1:]
	}
	for _, m := range it.records() {
		if m.flush {
			m.flush = false
			s.flushing--
		}
		m.state = running
		m.part.inflight++
		m.part.started = max(m.part.started, m.Rec.Offset)
	}
	s.inflight++
	now := time.Now()
	s.running[it] = now
	if c == Retry {
		l.retryBudget--
	} else if !it.Rec.Timestamp.IsZero() {
		l.lateMax = max(l.lateMax, now.Sub(it.Rec.Timestamp))
		l.lateN++
	}
	l.enqueue(s)
	if l.runnable() {
		l.work.Signal()
	}
	return it, true
}

// takeBatch takes the records of a batch off the ready list of class c:
// the oldest, and those after it of the same group, up to the batch's
// count and maxBatchBytes.
func (l *Lanes) takeBatch(s *subscription, c Class) *Item {
	ready := s.ready[c]
	head := ready[0]
	batch, size := []*Item{head}, len(head.Rec.Value)
	kept := ready[:0]
	for _, it := range ready[1:] {
		if len(batch) < s.batch && it.group == head.group && size+len(it.Rec.Value) <= maxBatchBytes {
			it.member = true
			batch, size = append(batch, it), size+len(it.Rec.Value)
			continue
		}
		kept = append(kept, it)
	}
	clear(ready[len(kept):])
	s.ready[c] = kept
	for _, it := range batch {
		l.unready(s, it)
	}
	head.Batch = batch
	return head
}

// records are the records an item runs: its batch's, or itself.
func (it *Item) records() []*Item {
	if it.Batch != nil {
		return it.Batch
	}
	return []*Item{it}
}

// Done finishes a running item, every record of it when it is a batch.
// With committed true their offsets may be committed; with false (their
// effects were not acknowledged) the partitions' watermarks stay below
// them, so they are redone after a restart or rebalance. Either way the
// next record of each key may run.
func (l *Lanes) Done(it *Item, committed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range it.records() {
		p := m.part
		p.inflight--
		if committed && !p.detached {
			m.entry.done = true
			p.lastDone = max(p.lastDone, m.entry.offset)
			p.advance()
		}
	}
	s := l.subs[it.Sub]
	switch {
	case it.sent:
		s.acking--
	case !it.Spill:
		l.requestOver(s, it)
	}
	for _, m := range it.records() {
		l.release(s, m)
	}
	l.enqueue(s)
	l.change.Broadcast()
}

// SetRetryBudget sets how many more Retry records may start until the
// next call (at least one): due retries take what the fresh deliveries
// leave (see the deliverer's retry pacing). A budget of starts, not a
// limit of requests at a time: one request at a time to a fast endpoint
// is still a thousand a second.
func (l *Lanes) SetRetryBudget(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retryBudget = max(1, n)
	if l.runnable() {
		l.work.Broadcast()
	}
}

// FreshLateness returns the largest lateness (start minus the record's
// timestamp: when the dispatcher wrote it) of the records of the other
// classes started since the last call, and how many there were.
func (l *Lanes) FreshLateness() (worst time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	worst, n = l.lateMax, l.lateN
	l.lateMax, l.lateN = 0, 0
	return worst, n
}

// Sent says that a running item's request is over and only its outcome's
// acknowledgement is awaited: the subscription's request slot is free for
// its next record, while the item keeps its key and its offset until Done.
// Waiting for the acknowledgement (a produce round trip) in the slot held
// a fast subscription to cap / (request + round trip) deliveries a second.
func (l *Lanes) Sent(it *Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.subs[it.Sub]
	if it.sent || it.Spill || it.member || s == nil {
		return
	}
	it.sent = true
	s.acking++
	l.requestOver(s, it)
	l.enqueue(s)
}

// Unpaced takes a running item out of its subscription's pace until its
// request starts (Request), if it makes one: the ordered path reads the
// key's hold and may park the record instead, and a broker slow to answer
// (restarting, say) is not the endpoint's pace. The item keeps its request
// slot.
func (l *Lanes) Unpaced(it *Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.subs[it.Sub]
	if s == nil || it.Spill || it.sent || it.member {
		return
	}
	it.unpaced = true
	delete(s.running, it)
}

// Request says that an Unpaced item's request starts now: from now on it
// counts in its subscription's pace.
func (l *Lanes) Request(it *Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.subs[it.Sub]
	if s == nil || !it.unpaced {
		return
	}
	it.unpaced = false
	s.running[it] = time.Now()
}

// requestOver frees its request slot of s and counts how long it ran in
// the subscription's pace, unless it made no request (Unpaced).
func (l *Lanes) requestOver(s *subscription, it *Item) {
	s.inflight--
	if it.unpaced {
		return
	}
	s.lastDone = time.Now()
	took := s.lastDone.Sub(s.running[it])
	delete(s.running, it)
	if s.took == 0 {
		s.took = took
	} else {
		// One record counts at most twice the pace: a single stalled
		// request among quick ones does not make the endpoint slow (see
		// workOff for one that slows down or hangs).
		s.took = (4*s.took + min(took, 2*s.took)) / 5
	}
}

// release removes it from its key queue and the buffer count, readying the
// next record of the key.
func (l *Lanes) release(s *subscription, it *Item) {
	q := l.keys[it.key]
	for i, x := range q {
		if x == it {
			if i == 0 { // the usual case: the head finished; no copy
				q[0] = nil
				q = q[1:]
			} else {
				q = append(q[:i:i], q[i+1:]...)
			}
			break
		}
	}
	if len(q) == 0 {
		delete(l.keys, it.key)
	} else {
		l.keys[it.key] = q
		if q[0].state == waiting {
			l.makeReady(l.subs[q[0].Sub], q[0])
		}
	}
	l.unbuffer(s, it)
	if s.items == 0 {
		l.forgetSub(s)
	}
}

// forgetSub drops a subscription that holds nothing.
func (l *Lanes) forgetSub(s *subscription) {
	if s.crowded {
		l.crowded--
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	delete(l.subs, s.id)
}

// unbuffer takes it out of the counts of records held.
func (l *Lanes) unbuffer(s *subscription, it *Item) {
	if it.flush {
		it.flush = false
		s.flushing--
	}
	s.items--
	if s.parts[it.part.tp]--; s.parts[it.part.tp] == 0 {
		delete(s.parts, it.part.tp)
	}
	l.buffered--
	it.part.items--
	if l.inTopic[it.Rec.Topic]--; l.inTopic[it.Rec.Topic] == 0 {
		delete(l.inTopic, it.Rec.Topic)
	}
}

// Buffered is the number of records held: waiting, ready or running.
func (l *Lanes) Buffered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buffered
}

// Crowded lists the partitions to stop fetching: those a fast subscription
// holding half the buffer takes records from. A subscription stays crowded
// until it holds less than a quarter of the buffer, or it turns slow (its
// records arriving then spill, and other subscriptions of its partitions
// must not wait for it).
func (l *Lanes) Crowded() []TP {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.crowded == 0 {
		return nil
	}
	var out []TP
	now := time.Now()
	for _, s := range l.subs {
		if !s.crowded {
			continue
		}
		if s.items < s.limits.crowded/2 || l.slow(s, now) {
			s.crowded = false
			l.crowded--
			continue
		}
		for tp := range s.parts {
			if !slices.Contains(out, tp) {
				out = append(out, tp)
			}
		}
	}
	return out
}

// BufferedIn is the number of records of one topic held.
func (l *Lanes) BufferedIn(topic string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inTopic[topic]
}

// WaitBelow blocks until fewer than n records are buffered or ctx is done.
func (l *Lanes) WaitBelow(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.change.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.buffered >= n && ctx.Err() == nil {
		l.change.Wait()
	}
	return ctx.Err()
}

// Drop removes every record of the given partitions that has not started;
// running ones finish. It returns the number dropped.
func (l *Lanes) Drop(parts []TP) int { return l.drop(parts, false) }

// HandOff prepares partitions for a clean hand-over (revocation, shutdown):
// it drops the records that have not started, except those below the
// highest offset started in their partition, which stay to run. Once they
// and the running ones are done (WaitIdle), the watermark is past every
// record this process started, so the next owner redoes none of them. The
// records kept of a slow subscription (at its pace, it needs more than
// slowFactor spill delays to finish what it holds) become spills: a
// hanging endpoint's queue would otherwise hold up the shutdown or the
// group's rebalance for as long as the shutdown budget, and spills take
// one produce each. A batching subscription's kept records go without
// waiting for more. It returns the number dropped.
func (l *Lanes) HandOff(parts []TP) int { return l.drop(parts, true) }

// HandOffAll hands off every partition.
func (l *Lanes) HandOffAll() int {
	l.mu.Lock()
	parts := make([]TP, 0, len(l.parts))
	for p := range l.parts {
		parts = append(parts, p)
	}
	l.mu.Unlock()
	return l.HandOff(parts)
}

func (l *Lanes) drop(parts []TP, handOff bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	drop := map[TP]bool{}
	for _, p := range parts {
		drop[p] = true
	}
	dropped := func(it *Item) bool {
		return drop[it.part.tp] && it.state != running && (!handOff || it.Rec.Offset >= it.part.started)
	}
	n := 0
	keptSpills := l.spillq[:0]
	for _, it := range l.spillq {
		if !dropped(it) {
			keptSpills = append(keptSpills, it)
		}
	}
	clear(l.spillq[len(keptSpills):])
	l.spillq = keptSpills
	for _, s := range l.subs {
		for c, ready := range s.ready {
			kept := ready[:0]
			for _, it := range ready {
				if !dropped(it) {
					kept = append(kept, it)
					continue
				}
				l.unready(s, it)
			}
			clear(ready[len(kept):])
			s.ready[c] = kept
		}
	}
	for key, q := range l.keys {
		var kept []*Item
		for _, it := range q {
			if dropped(it) {
				l.unbuffer(l.subs[it.Sub], it)
				n++
				continue
			}
			kept = append(kept, it)
		}
		if len(kept) == 0 {
			delete(l.keys, key)
			continue
		}
		l.keys[key] = kept
		for _, it := range kept {
			if s := l.subs[it.Sub]; handOff && drop[it.part.tp] && it.state != running && !it.flush && s.batch > 1 {
				it.flush = true
				s.flushing++
			}
		}
		if kept[0].state == waiting {
			l.makeReady(l.subs[kept[0].Sub], kept[0])
		}
	}
	for _, s := range l.subs {
		if s.items == 0 {
			l.forgetSub(s)
		}
	}
	if handOff {
		l.spillSlow(drop)
	}
	for c := range l.runq {
		clear(l.runq[c])
		l.runq[c] = l.runq[c][:0]
	}
	for _, s := range l.subs {
		s.queued = [classes]bool{}
		l.enqueue(s)
	}
	l.change.Broadcast()
	return n
}

// spillSlow turns the records not started in the given partitions of
// every slow subscription into spills, in key order.
func (l *Lanes) spillSlow(parts map[TP]bool) {
	now := time.Now()
	waits := map[string]time.Duration{}
	for _, s := range l.subs {
		if w := s.workOff(now); w > slowFactor*l.spillAfter {
			waits[s.id] = w
		}
	}
	if len(waits) == 0 {
		return
	}
	for _, q := range l.keys {
		for _, it := range q {
			if w, slow := waits[it.Sub]; slow && parts[it.part.tp] && it.state != running && !it.Spill {
				it.Spill, it.Wait = true, w
			}
		}
	}
	for _, s := range l.subs {
		for c, ready := range s.ready {
			kept := ready[:0]
			for _, it := range ready {
				if it.Spill {
					l.unready(s, it)
					l.spillq = append(l.spillq, it)
				} else {
					kept = append(kept, it)
				}
			}
			clear(ready[len(kept):])
			s.ready[c] = kept
		}
	}
	l.work.Broadcast()
}

// DropAll drops every record that has not started.
func (l *Lanes) DropAll() int {
	l.mu.Lock()
	parts := make([]TP, 0, len(l.parts))
	for p := range l.parts {
		parts = append(parts, p)
	}
	l.mu.Unlock()
	return l.Drop(parts)
}

// WaitIdle blocks until no record of the given partitions (all partitions
// when parts is nil) is held, or ctx is done. After Drop the records held
// are the running ones; after HandOff also those kept to run.
func (l *Lanes) WaitIdle(ctx context.Context, parts []TP) error {
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.change.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for ctx.Err() == nil && l.running(parts) {
		l.change.Wait()
	}
	return ctx.Err()
}

func (l *Lanes) running(parts []TP) bool {
	if parts == nil {
		for _, p := range l.parts {
			if p.items > 0 {
				return true
			}
		}
		return false
	}
	for _, id := range parts {
		if p := l.parts[id]; p != nil && p.items > 0 {
			return true
		}
	}
	return false
}

// Watermarks returns the commit watermark of every partition with a ledger
// (all of them when parts is nil).
func (l *Lanes) Watermarks(parts []TP) map[TP]kgo.EpochOffset {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[TP]kgo.EpochOffset{}
	if parts == nil {
		for id, p := range l.parts {
			out[id] = p.watermark()
		}
		return out
	}
	for _, id := range parts {
		if p := l.parts[id]; p != nil {
			out[id] = p.watermark()
		}
	}
	return out
}

// Finished returns, for every partition with a ledger (those of parts
// when not nil), the runs of records above its watermark that are
// finished, in offset order, the lowest kafka.MaxFinishedRuns of them:
// offsets between two finished records that were never added (transaction
// markers, aborted records) count as finished, and so do the runs its
// previous owner finished that were not added yet.
func (l *Lanes) Finished(parts []TP) map[TP][]kafka.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[TP][]kafka.Run{}
	for id, p := range l.parts {
		if parts != nil && !slices.Contains(parts, id) {
			continue
		}
		// No more than a commit's metadata can carry (kafka.MaxFinishedRuns):
		// where records finish out of order the runs are many and short,
		// and a commit reads them all again.
		var runs []kafka.Run
		full := func() bool { return len(runs) >= kafka.MaxFinishedRuns }
		add := func(r kafka.Run) {
			if n := len(runs); n > 0 && runs[n-1].To+1 >= r.From {
				runs[n-1].To = max(runs[n-1].To, r.To)
				return
			}
			if !full() {
				runs = append(runs, r)
			}
		}
		for i, e := range p.ledger {
			if e.offset > p.lastDone {
				break
			}
			if e.done && i > 0 && p.ledger[i-1].done {
				runs[len(runs)-1].To = e.offset
			} else if e.done {
				if full() {
					break
				}
				runs = append(runs, kafka.Run{From: e.offset, To: e.offset})
			}
		}
		for _, r := range l.resumed[id] {
			if r.To >= p.next {
				add(kafka.Run{From: max(r.From, p.next), To: r.To})
			}
		}
		if len(runs) > 0 {
			out[id] = runs
		}
	}
	return out
}

// Forget detaches the ledgers of partitions no longer assigned, and drops
// what their previous owner finished. Their remaining records must have
// been dropped first.
func (l *Lanes) Forget(parts []TP) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range parts {
		delete(l.resumed, id)
		if p := l.parts[id]; p != nil {
			p.detached = true
			delete(l.parts, id)
		}
	}
}

// Close wakes every worker blocked in Next; Next returns false from now on.
func (l *Lanes) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.work.Broadcast()
	l.change.Broadcast()
}
