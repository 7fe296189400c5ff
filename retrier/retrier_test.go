package retrier

import (
	"bytes"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/retrier/internal/window"
	"github.com/hookpipe/hookpipe/topics"
)

// checkReleased checks what a released record must be: the produced key and
// value, no not-before header, not released before its due time (neither by
// the retrier's produce timestamp nor by when the tail read it).
func checkReleased(tb testing.TB, got received, want *kgo.Record, due time.Time) {
	tb.Helper()
	if !bytes.Equal(got.rec.Key, want.Key) || !bytes.Equal(got.rec.Value, want.Value) {
		tb.Errorf("released key/value = %q/%s, want %q/%s", got.rec.Key, got.rec.Value, want.Key, want.Value)
	}
	if hasNotBefore(got.rec) {
		tb.Errorf("released %s still carries the not-before header: %v", got.rec.Value, got.rec.Headers)
	}
	if got.at.Before(due) {
		tb.Errorf("%s read at %v, before its not-before %v", got.rec.Value, got.at, due)
	}
	if got.rec.Timestamp.Before(due) {
		tb.Errorf("%s produced to redeliveries at %v, before its not-before %v", got.rec.Value, got.rec.Timestamp, due)
	}
}

// warmUp starts a retrier and waits until it released a due record, so the
// group is joined and the tiers are being fetched.
func (h *harness) warmUp(sub string) {
	h.t.Helper()
	m := h.produce(h.retryRecord(time.Second, sub, "evt_warmup", time.Now(), true))[0]
	h.waitReceived(15*time.Second, m)
}

// TestNeverEarly: every record is released at or after its not-before, in
// due order, unchanged but for the not-before header; the JSON not_before
// counts when the header is absent; every tier is consumed.
func TestNeverEarly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	h.start(h.config())
	h.warmUp("sub")

	now := time.Now()
	type want struct {
		rec *kgo.Record
		due time.Time
	}
	var ws []want
	add := func(tier time.Duration, ev string, after time.Duration, header bool) {
		due := now.Add(after)
		ws = append(ws, want{h.retryRecord(tier, "sub", ev, due, header), due.Truncate(time.Millisecond)})
	}
	// Tier-topic offset order is not due order: the due-now record is
	// behind two that are not due yet.
	add(time.Second, "evt_800ms", 800*time.Millisecond, true)
	add(time.Second, "evt_1500ms", 1500*time.Millisecond, true)
	add(time.Second, "evt_now", 0, true)
	add(time.Second, "evt_json_1850ms", 1850*time.Millisecond, false) // due only by its JSON not_before
	add(time.Minute, "evt_other_tier_1150ms", 1150*time.Millisecond, true)
	for _, w := range ws {
		h.produce(w.rec)
	}

	for _, w := range ws {
		h.waitReceived(15*time.Second, w.rec)
	}
	h.drain()
	dueOf := map[string]time.Time{}
	for _, w := range ws {
		got := h.receivedOf(w.rec.Value)
		if len(got) != 1 {
			t.Fatalf("%s released %d times, want once", w.rec.Value, len(got))
		}
		checkReleased(t, got[0], w.rec, w.due)
		dueOf[string(w.rec.Value)] = w.due
	}

	// One subscription, one redeliveries partition: its offsets are the
	// release order, which must follow the due times.
	var order []received
	for _, r := range h.all() {
		if _, ok := dueOf[string(r.rec.Value)]; ok {
			order = append(order, r)
		}
	}
	slices.SortFunc(order, func(a, b received) int { return int(a.rec.Offset - b.rec.Offset) })
	for i := 1; i < len(order); i++ {
		a, b := order[i-1], order[i]
		if a.rec.Partition != b.rec.Partition {
			t.Fatalf("one subscription's deliveries landed on redeliveries partitions %d and %d", a.rec.Partition, b.rec.Partition)
		}
		if dueOf[string(b.rec.Value)].Before(dueOf[string(a.rec.Value)]) {
			t.Errorf("%s (due %v) was released before %s (due %v)", a.rec.Value, dueOf[string(a.rec.Value)], b.rec.Value, dueOf[string(b.rec.Value)])
		}
		if b.at.Before(a.at) {
			t.Errorf("%s was read before %s, which was released earlier", b.rec.Value, a.rec.Value)
		}
	}
}

// TestLookAhead: a record not due for an hour at the head of a partition does
// not hold back a due record behind it.
func TestLookAhead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	now := time.Now()
	far := h.produce(h.retryRecord(time.Second, "sub", "evt_far", now.Add(time.Hour), true))[0]
	near := h.produce(h.retryRecord(time.Second, "sub", "evt_near", now, true))[0]
	if far.Partition != near.Partition || far.Offset >= near.Offset {
		t.Fatalf("setup: far at %d/%d, near at %d/%d; want near behind far", far.Partition, far.Offset, near.Partition, near.Offset)
	}
	h.start(h.config())

	checkReleased(t, h.waitReceived(15*time.Second, near), near, now.Truncate(time.Millisecond))
	h.drain()
	if got := h.receivedOf(far.Value); len(got) != 0 {
		t.Fatalf("the record due in an hour was released at %v", got[0].at)
	}
}

// TestPartitionIsolationWithPausing: with a look-ahead window of 2, a tier
// partition whose window is full of records not yet due is paused (what is
// produced to it later is not even fetched) while the other partitions keep
// flowing; a paused partition resumes once releases free its window.
func TestPartitionIsolationWithPausing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "2"}, nil)
	h.tail()
	subA := subOn(t, 0)
	subB := subOn(t, 1)
	subC := subOn(t, 2)
	now := time.Now()
	hour := now.Add(time.Hour)
	soon := now.Add(2 * time.Second).Truncate(time.Millisecond)
	var farA []*kgo.Record
	for i := range 5 {
		farA = append(farA, h.retryRecord(time.Second, subA, fmt.Sprintf("evt_a_far%d", i), hour, true))
	}
	h.produce(farA...)
	// Markers due now behind the full windows: once one is released, the
	// records ahead of it in its partition are held.
	markA := h.produce(h.retryRecord(time.Second, subA, "evt_a_mark", now, true))[0]
	bs := h.produce(
		h.retryRecord(time.Second, subB, "evt_b1", now, true),
		h.retryRecord(time.Second, subB, "evt_b2", now, true),
	)
	// C: two records due soon and one in an hour ahead of a due marker.
	cs := h.produce(
		h.retryRecord(time.Second, subC, "evt_c1", soon, true),
		h.retryRecord(time.Second, subC, "evt_c2", soon, true),
	)
	farC := h.produce(h.retryRecord(time.Second, subC, "evt_c_far", hour, true))[0]
	markC := h.produce(h.retryRecord(time.Second, subC, "evt_c_mark", now, true))[0]

	h.start(h.config())
	for _, r := range append([]*kgo.Record{markA, markC}, bs...) {
		checkReleased(t, h.waitReceived(15*time.Second, r), r, now.Truncate(time.Millisecond))
	}

	// A and C are paused now (3 and 5 held, window 2). Records due now
	// produced to them wait; B's does not.
	late := time.Now().Truncate(time.Millisecond)
	xA := h.retryRecord(time.Second, subA, "evt_a_late", late, true)
	xC := h.retryRecord(time.Second, subC, "evt_c_late", late, true)
	yB := h.retryRecord(time.Second, subB, "evt_b_late", late, true)
	h.produce(xA, xC, yB)
	checkReleased(t, h.waitReceived(15*time.Second, yB), yB, late)

	// C resumes once c1 and c2 are released (1 held < 2): its late record
	// is released after them, never before, since it was not fetched.
	gotXC := h.waitReceived(15*time.Second, xC)
	checkReleased(t, gotXC, xC, late)
	for _, c := range cs {
		got := h.waitReceived(15*time.Second, c)
		checkReleased(t, got, c, soon)
		if got.rec.Partition != gotXC.rec.Partition || got.rec.Offset > gotXC.rec.Offset {
			t.Errorf("%s (released at offset %d) came after %s (offset %d): the paused partition was fetched", c.Value, got.rec.Offset, xC.Value, gotXC.rec.Offset)
		}
	}
	if gotXC.rec.Timestamp.Before(soon) {
		t.Errorf("%s was released at %v, before the paused partition's window freed at %v", xC.Value, gotXC.rec.Timestamp, soon)
	}

	// Another round on B, then everything released so far has been read.
	zB := h.produce(h.retryRecord(time.Second, subB, "evt_b_later", time.Now(), true))[0]
	h.waitReceived(15*time.Second, zB)
	h.drain()
	for _, r := range append([]*kgo.Record{xA, farC}, farA...) {
		if got := h.receivedOf(r.Value); len(got) != 0 {
			t.Errorf("%s was released at %v; its partition should be paused", r.Value, got[0].at)
		}
	}
}

// TestProcessBoundPausesTheLargest: at the process bound the partition
// holding the most pauses and the others go on fetching, so a record due
// now on another partition is released while the held ones wait an hour.
func TestProcessBoundPausesTheLargest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION": "2", "WEBHOOKS_RETRIER_MAX_HELD": "2"}, nil)
	h.tail()
	subA, subB := subOn(t, 0), subOn(t, 1)
	now := time.Now().Truncate(time.Millisecond)
	later := now.Add(time.Hour)
	as := h.produce(
		h.retryRecord(time.Second, subA, "evt_a1", later, true),
		h.retryRecord(time.Second, subA, "evt_a2", later, true),
	)
	markA := h.produce(h.retryRecord(time.Second, subA, "evt_a_mark", now, true))[0]
	h.start(h.config())
	checkReleased(t, h.waitReceived(15*time.Second, markA), markA, now)

	// Two held: the process bound. B's partition holds nothing, so it is
	// not paused, and its record due now goes out.
	due := time.Now().Truncate(time.Millisecond)
	yB := h.produce(h.retryRecord(time.Second, subB, "evt_b_due", due, true))[0]
	checkReleased(t, h.waitReceived(15*time.Second, yB), yB, due)
	for _, a := range as {
		if got := h.receivedOf(a.Value); len(got) != 0 {
			t.Errorf("%s released at %v, due %v", a.Value, got[0].at, later)
		}
	}
}

// TestPauseDecision: a partition pauses when its window is full, or when
// the process is at its bound (records or bytes) and the partition holds
// its share of that bound.
func TestPauseDecision(t *testing.T) {
	cfg := Config{MaxHeldPerPartition: 10, MaxHeld: 12, MaxHeldMB: 1}
	holding := func(n, size int) *window.Partition {
		var p window.Partition
		for i := range n {
			p.Add(&kgo.Record{Offset: int64(i), Value: make([]byte, size)})
		}
		return &p
	}
	for _, tc := range []struct {
		name    string
		p       *window.Partition
		atBound bool
		n       int
		want    bool
	}{
		{"window full", holding(10, 1), false, 1, true},
		{"window not full, below the bound", holding(9, 1), false, 1, false},
		{"at the bound, its share of records", holding(6, 1), true, 2, true},
		{"at the bound, below its share", holding(5, 1), true, 2, false},
		{"at the bound, its share of bytes", holding(1, 512<<10), true, 2, true},
		{"at the bound, below its share of bytes", holding(1, 512<<10-1), true, 2, false},
		{"empty, at the bound", holding(0, 0), true, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cfg.full(tc.p, tc.atBound, tc.n); got != tc.want {
				t.Errorf("full(%d records, %d bytes, at bound %v, of %d) = %v, want %v",
					tc.p.Len(), tc.p.Bytes(), tc.atBound, tc.n, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		records, bytes int
		want           bool
	}{{11, 1<<20 - 1, false}, {12, 0, true}, {0, 1 << 20, true}} {
		if got := cfg.atBound(tc.records, tc.bytes); got != tc.want {
			t.Errorf("atBound(%d records, %d bytes) = %v, want %v", tc.records, tc.bytes, got, tc.want)
		}
	}
}

// TestKilledWhileHolding: a retrier stopped while holding records releases
// none of them and commits nothing past them; the next retrier of the group
// releases each exactly once, when due, and not the record the first one
// released behind them.
func TestKilledWhileHolding(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	cfg := h.config()
	sub := subOn(t, 1)
	now := time.Now()
	due := now.Add(2500 * time.Millisecond).Truncate(time.Millisecond)
	held := h.produce(
		h.retryRecord(time.Second, sub, "evt_held1", due, true),
		h.retryRecord(time.Second, sub, "evt_held2", due, true),
	)
	mark := h.produce(h.retryRecord(time.Second, sub, "evt_mark", now, true))[0]
	tier := mark.Topic

	first := h.start(cfg)
	// The marker is behind the held records: once it is out, they are held.
	h.waitReceived(time.Until(due)-500*time.Millisecond, mark)
	first.StopOK(t)
	if !time.Now().Before(due) {
		t.Fatalf("setup: the first retrier stopped after the held records were due")
	}
	h.drain()
	for _, r := range held {
		if got := h.receivedOf(r.Value); len(got) != 0 {
			t.Fatalf("%s was released by the stopped retrier at %v, before %v", r.Value, got[0].at, due)
		}
	}
	for topic, ps := range h.committed(cfg.Group) {
		for p, off := range ps {
			if topic == tier && p == mark.Partition && off > held[0].Offset {
				t.Fatalf("committed %s/%d at %d, past the unreleased record at %d", topic, p, off, held[0].Offset)
			}
		}
	}

	h.start(cfg)
	for _, r := range held {
		checkReleased(t, h.waitReceived(15*time.Second, r), r, due)
	}
	ends := h.tierEnds()
	waitFor(t, 10*time.Second, "the second retrier to commit the tier partition to its end", func() bool {
		return h.committed(cfg.Group)[tier][mark.Partition] == ends[tier][mark.Partition]
	})
	h.drain()
	for _, r := range held {
		if n := len(h.receivedOf(r.Value)); n != 1 {
			t.Errorf("%s released %d times, want exactly once", r.Value, n)
		}
	}
	// The marker was released by the first retrier above the held
	// records ahead of it: committed as a finished run with their
	// watermark, it is not released again (ADR 0029).
	if n := len(h.receivedOf(mark.Value)); n != 1 {
		t.Errorf("%s released %d times, want once", mark.Value, n)
	}
}

// TestReleasedThenCommitted: once released, the tier partitions are
// committed to their ends, so a restarted group does not release again.
func TestReleasedThenCommitted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	cfg := h.config()
	now := time.Now()
	var rs []*kgo.Record
	for p := range int32(partitions) {
		sub := subOn(t, p)
		for _, tier := range h.names.Tiers {
			for i := range 3 {
				due := now.Add(time.Duration(i) * 300 * time.Millisecond)
				rs = append(rs, h.retryRecord(tier, sub, fmt.Sprintf("evt_%s_%s_%d", sub, tier, i), due, true))
			}
		}
	}
	h.produce(rs...)
	first := h.start(cfg)
	for _, r := range rs {
		h.waitReceived(15*time.Second, r)
	}
	ends := h.tierEnds()
	waitFor(t, 10*time.Second, "the committed offsets to reach the ends of the tier partitions", func() bool {
		c := h.committed(cfg.Group)
		for topic, ps := range ends {
			for p, end := range ps {
				if c[topic][p] > end {
					t.Fatalf("committed %s/%d at %d, past its end %d", topic, p, c[topic][p], end)
				}
				if c[topic][p] != end {
					return false
				}
			}
		}
		return true
	})
	first.StopOK(t)

	// A new retrier of the group starts from the commits: only the new
	// record is released.
	h.start(cfg)
	m := h.produce(h.retryRecord(time.Second, subOn(t, 0), "evt_after_restart", time.Now(), true))[0]
	h.waitReceived(15*time.Second, m)
	h.drain()
	for _, r := range rs {
		if n := len(h.receivedOf(r.Value)); n != 1 {
			t.Errorf("%s released %d times, want once", r.Value, n)
		}
	}
}

// TestReleaseCommittedAtOnce (invariant 1, ADR 0029): a release is
// committed as soon as it is acknowledged, not at the next commit
// interval (an hour here), so a killed retrier repeats no release whose
// commit the broker acknowledged.
func TestReleaseCommittedAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	cfg := h.config()
	cfg.CommitInterval = time.Hour
	r := h.produce(h.retryRecord(time.Second, subOn(t, 1), "evt_committed_at_once", time.Now(), true))[0]
	h.start(cfg)
	h.waitReceived(15*time.Second, r)
	waitFor(t, 10*time.Second, "the release committed", func() bool {
		return h.committed(cfg.Group)[r.Topic][r.Partition] == r.Offset+1
	})
}

// TestCommitsOnlyAfterAck: while the broker refuses to acknowledge the
// release of a due record, its tier offset is not committed, neither while
// the retrier keeps trying nor when it is stopped; the next retrier releases
// it once acknowledgements are back.
func TestCommitsOnlyAfterAck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	cfg := h.config()
	r := h.produce(h.retryRecord(time.Second, subOn(t, 2), "evt_unacked", time.Now(), true))[0]

	// From now on every produce is answered with a retriable error.
	var refusing atomic.Bool
	var refused atomic.Int64
	refusing.Store(true)
	h.cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	notPast := func(when string) {
		t.Helper()
		if off, ok := h.committed(cfg.Group)[r.Topic][r.Partition]; ok && off > r.Offset {
			t.Fatalf("%s: committed %s/%d at %d, past the unacknowledged record at %d", when, r.Topic, r.Partition, off, r.Offset)
		}
	}
	first := h.start(cfg)
	// The commit must not precede the produce; kgo then retries the
	// refused produce only every few seconds, while the loop waits.
	waitFor(t, 15*time.Second, "the retrier to try releasing the due record", func() bool { return refused.Load() >= 1 })
	notPast("while the release is refused")
	first.StopOK(t)
	notPast("after the retrier stopped")

	refusing.Store(false)
	h.start(cfg)
	checkReleased(t, h.waitReceived(15*time.Second, r), r, time.Time{})
	ends := h.tierEnds()
	waitFor(t, 10*time.Second, "the tier partition to be committed to its end", func() bool {
		return h.committed(cfg.Group)[r.Topic][r.Partition] == ends[r.Topic][r.Partition]
	})
}

// TestReleaseKeepsTheBatchMark: a failed batch's retries keep its mark
// when released, so the deliverer batches them again as they were.
func TestReleaseKeepsTheBatchMark(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	h.start(h.config())
	r := h.retryRecord(time.Second, "sub", "evt_batched", time.Now(), true)
	mark := topics.BatchHeader(topics.BatchID([]string{"evt_batched", "evt_other"}), 2)
	r.Headers = append(r.Headers, mark)
	h.produce(r)
	got := h.waitReceived(15*time.Second, r)
	if id, n, ok := topics.BatchOf(got.rec.Headers); !ok || id+" 2" != string(mark.Value) || n != 2 {
		t.Fatalf("released with headers %v, want the batch's mark %s", got.rec.Headers, mark.Value)
	}
}
