package lanes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
)

// rec is a synthetic delivery record; its subscription is the key up to '/'.
func rec(part int32, off int64, key string) *kgo.Record {
	return &kgo.Record{Topic: "deliveries", Partition: part, Offset: off, Key: []byte(key), LeaderEpoch: 3}
}

func subOf(key string) string {
	s, _, _ := strings.Cut(key, "/")
	return s
}

func add(l *Lanes, part int32, off int64, key string) {
	l.Add(rec(part, off, key), subOf(key), Shape{})
}

// waitBlocked waits until n goroutines are parked in fn (a method name as
// it appears in a stack trace) waiting on a sync.Cond: the only way to know
// a call is blocked, and not merely slow to start, without timing.
func waitBlocked(tb testing.TB, fn string, n int) {
	tb.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 1<<20)
	for {
		got := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "sync.(*Cond).Wait") && strings.Contains(g, "lanes."+fn) {
				got++
			}
		}
		if got >= n {
			return
		}
		select {
		case <-deadline.C:
			tb.Fatalf("%d goroutines blocked in %s, want %d", got, fn, n)
		case <-tick.C:
		}
	}
}

// canRun reports whether Next would return at once: some subscription has
// a ready record and room under its cap. It reads the scheduler's state
// under its lock, so a negative answer is not a matter of timing.
func canRun(l *Lanes) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.runq {
		for _, s := range q {
			if s.room() {
				return true
			}
		}
	}
	return false
}

// next calls Next, failing the test if it does not return within a few
// seconds (closing the lanes so the goroutine ends).
func next(tb testing.TB, l *Lanes) *Item {
	tb.Helper()
	type res struct {
		it *Item
		ok bool
	}
	ch := make(chan res, 1)
	go func() {
		it, ok := l.Next()
		ch <- res{it, ok}
	}()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case r := <-ch:
		if !r.ok {
			tb.Fatal("Next returned ok=false")
		}
		return r.it
	case <-timer.C:
		l.Close()
		tb.Fatal("Next did not return")
		return nil
	}
}

// nextAsync starts a Next call and returns where its result arrives.
func nextAsync(l *Lanes) <-chan *Item {
	ch := make(chan *Item, 1)
	go func() {
		it, ok := l.Next()
		if !ok {
			it = nil
		}
		ch <- it
	}()
	return ch
}

// recv waits for a value from ch, failing the test after a few seconds.
func recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// notYet fails if ch already has a value. It cannot prove a goroutine will
// never send, only that it has not sent so far, so the tests pair it with
// canRun, which is exact.
func notYet[T any](tb testing.TB, ch <-chan T, what string) {
	tb.Helper()
	select {
	case v := <-ch:
		tb.Fatalf("%s happened too early (%v)", what, v)
	default:
	}
}

func desc(it *Item) string {
	if it == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s@%d/%d", it.Rec.Key, it.Rec.Partition, it.Rec.Offset)
}

func wm(tb testing.TB, l *Lanes, part int32) int64 {
	tb.Helper()
	w, ok := l.Watermarks(tps(part))[TP{Topic: "deliveries", Partition: part}]
	if !ok {
		tb.Fatalf("no watermark for partition %d", part)
	}
	return w.Offset
}

func TestSameKeyRunsOneAtATimeInOffsetOrder(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	for off := range int64(5) {
		add(l, 0, off, "A/k")
	}
	it := next(t, l)
	for want := int64(0); ; want++ {
		if it.Rec.Offset != want {
			t.Fatalf("Next = %s, want offset %d", desc(it), want)
		}
		if canRun(l) {
			t.Fatalf("a second record of key A/k is runnable while offset %d runs", want)
		}
		if want == 4 {
			l.Done(it, true)
			break
		}
		// A Next already waiting gets the following record once this
		// one is done, and not before.
		ch := nextAsync(l)
		waitBlocked(t, "(*Lanes).Next", 1)
		notYet(t, ch, "Next while the key's head runs")
		l.Done(it, true)
		if it = recv(t, ch, "the next record of the key"); it == nil {
			t.Fatal("Next returned ok=false")
		}
	}
	if l.Buffered() != 0 {
		t.Fatalf("Buffered = %d after all done, want 0", l.Buffered())
	}
	if got := wm(t, l, 0); got != 5 {
		t.Fatalf("watermark = %d, want 5", got)
	}
}

func TestDifferentKeysRunConcurrently(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	add(l, 0, 0, "A/k1")
	add(l, 0, 1, "A/k2")
	add(l, 1, 0, "B/k3")
	got := map[string]bool{}
	for range 3 {
		got[string(next(t, l).Rec.Key)] = true // none is Done
	}
	if len(got) != 3 {
		t.Fatalf("running keys = %v, want all three at once", got)
	}
}

func TestPerSubscriptionCap(t *testing.T) {
	l := New(2, 1<<20, 0, 0)
	for i := range 5 {
		add(l, 0, int64(i), fmt.Sprintf("A/k%d", i))
	}
	add(l, 0, 5, "B/x")

	running := map[string][]*Item{}
	start := func() *Item {
		it := next(t, l)
		running[it.Sub] = append(running[it.Sub], it)
		if n := len(running["A"]); n > 2 {
			t.Fatalf("%d records of subscription A run at once, cap is 2", n)
		}
		return it
	}
	for range 3 {
		start()
	}
	if len(running["B"]) != 1 {
		t.Fatalf("subscription B was not started beside A's two (running: A=%d, B=%d)", len(running["A"]), len(running["B"]))
	}
	if canRun(l) {
		t.Fatal("a third record of A is runnable while two run (cap 2)")
	}
	// Drain: every Done of an A record lets exactly one more A start.
	for done := 0; done < 5; done++ {
		a := running["A"][0]
		running["A"] = running["A"][1:]
		l.Done(a, true)
		if done+2 < 5 {
			start()
		}
		if len(running["A"]) == 2 && canRun(l) {
			t.Fatal("a third record of A is runnable while two run (cap 2)")
		}
	}
	l.Done(running["B"][0], true)
	if got := wm(t, l, 0); got != 6 {
		t.Fatalf("watermark = %d, want 6", got)
	}
}

// The shards of a spread subscription share its cap: each lane of width w
// runs at most cap/w records at a time (at least one), so that replicas
// owning different shards together keep to the cap; a replica owning every
// shard gets all of it. The share follows the width of the last record
// added.
// TestSentFreesTheRequestSlot: once a record's request is over (Sent), its
// subscription may start its next one while the outcome is acknowledged;
// the record keeps its offset below the watermark until Done, and at most
// twice the cap of records are unacknowledged at once.
func TestSentFreesTheRequestSlot(t *testing.T) {
	l := New(2, 1<<20, 0, 0)
	for i := range 6 {
		l.Add(rec(0, int64(i), fmt.Sprintf("s/k%d", i)), "s", Shape{})
	}
	a, b := next(t, l), next(t, l)
	if canRun(l) {
		t.Fatal("a third record runs beside two with a cap of 2")
	}
	l.Sent(a)
	l.Sent(b)
	c, d := next(t, l), next(t, l)
	if canRun(l) {
		t.Fatal("more than the cap of requests at once")
	}
	l.Sent(c)
	l.Sent(d)
	if canRun(l) {
		t.Fatal("a record starts with twice the cap of outcomes unacknowledged")
	}
	if wm := l.Watermarks([]TP{{"deliveries", 0}})[TP{"deliveries", 0}]; wm.Offset != 0 {
		t.Fatalf("watermark %d before any outcome was acknowledged, want 0", wm.Offset)
	}
	l.Done(a, true)
	l.Done(b, true)
	if wm := l.Watermarks([]TP{{"deliveries", 0}})[TP{"deliveries", 0}]; wm.Offset != 2 {
		t.Fatalf("watermark %d after the first two were acknowledged, want 2", wm.Offset)
	}
	if e := next(t, l); e.Rec.Offset != 4 {
		t.Fatalf("next record at offset %d, want 4", e.Rec.Offset)
	}
}

func TestSpreadSubscriptionSharesItsCap(t *testing.T) {
	l := New(8, 1<<20, 0, 0)
	off := int64(0)
	addTo := func(lane string, width, n int) {
		for i := range n {
			l.Add(rec(0, off, fmt.Sprintf("%s/k%d", lane, i)), lane, Shape{Width: width})
			off++
		}
	}
	running := map[string]int{}
	drain := func() {
		for canRun(l) {
			running[next(t, l).Sub]++
		}
	}
	addTo("hot 1", 4, 10) // this replica owns one shard of four
	drain()
	if running["hot 1"] != 2 {
		t.Fatalf("a shard of width 4 with cap 8 runs %d at once, want 2", running["hot 1"])
	}
	for _, lane := range []string{"hot 0", "hot 2", "hot 3"} { // and now all four
		addTo(lane, 4, 10)
	}
	drain()
	total := 0
	for lane, n := range running {
		if n != 2 {
			t.Errorf("lane %q runs %d at once, want 2", lane, n)
		}
		total += n
	}
	if total != 8 {
		t.Fatalf("the four shards run %d at once, want the cap, 8", total)
	}
	// Width 64 over a cap of 8: a lane still runs one.
	addTo("wide 5", 64, 3)
	drain()
	if running["wide 5"] != 1 {
		t.Fatalf("a shard of width 64 with cap 8 runs %d at once, want 1", running["wide 5"])
	}
	// Narrowed to width 1, the lane has the whole cap again.
	addTo("wide 5", 1, 20)
	drain()
	if running["wide 5"] != 8 {
		t.Fatalf("a lane narrowed to width 1 runs %d at once, want 8", running["wide 5"])
	}
}

func TestRoundRobinAcrossSubscriptions(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	for i := range 100 {
		add(l, 0, int64(i), fmt.Sprintf("A/k%d", i))
	}
	add(l, 1, 0, "B/only")
	var subs []string
	for range 3 {
		subs = append(subs, next(t, l).Sub)
	}
	if !slices.Contains(subs, "B") {
		t.Fatalf("first three Next results are %v: B waits behind A's 100 records", subs)
	}
}

func TestWatermark(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	if got := l.Watermarks(nil); len(got) != 0 {
		t.Fatalf("Watermarks of empty lanes = %v", got)
	}
	items := map[int64]*Item{}
	for off := range int64(5) {
		add(l, 0, off, fmt.Sprintf("A/k%d", off))
	}
	for range 5 {
		it := next(t, l)
		items[it.Rec.Offset] = it
	}
	for _, step := range []struct {
		done []int64
		want int64
	}{
		{nil, 0},
		{[]int64{2, 3}, 0},
		{[]int64{0}, 1},
		{[]int64{1}, 4},
		{[]int64{4}, 5},
	} {
		for _, off := range step.done {
			l.Done(items[off], true)
		}
		w := l.Watermarks(nil)[TP{Topic: "deliveries", Partition: 0}]
		if w.Offset != step.want || w.Epoch != 3 {
			t.Fatalf("after finishing %v: watermark = %+v, want offset %d epoch 3", step.done, w, step.want)
		}
	}
	if _, ok := l.Watermarks(tps(7))[TP{Topic: "deliveries", Partition: 7}]; ok {
		t.Fatal("a watermark for a partition never seen")
	}
}

// TestTopicsKeepTheirOwnLedgers: partition 0 of the deliveries topic and
// partition 0 of the redeliveries topic are different partitions: each has
// its own watermark and count, and dropping one leaves the other.
func TestTopicsKeepTheirOwnLedgers(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	fresh, due := TP{Topic: "deliveries", Partition: 0}, TP{Topic: "redeliveries", Partition: 0}
	add(l, 0, 40, "A/x")
	l.Add(&kgo.Record{Topic: due.Topic, Partition: 0, Offset: 7, Key: []byte("B/y"), LeaderEpoch: 1}, "B", Shape{})
	l.Add(&kgo.Record{Topic: due.Topic, Partition: 0, Offset: 8, Key: []byte("B/z"), LeaderEpoch: 1}, "B", Shape{})
	if f, d := l.BufferedIn(fresh.Topic), l.BufferedIn(due.Topic); f != 1 || d != 2 || l.Buffered() != 3 {
		t.Fatalf("BufferedIn = %d fresh, %d due, %d in all; want 1, 2, 3", f, d, l.Buffered())
	}
	byOffset := map[int64]*Item{}
	for range 3 {
		it := next(t, l)
		byOffset[it.Rec.Offset] = it
	}
	l.Done(byOffset[7], true)
	w := l.Watermarks(nil)
	if w[fresh].Offset != 40 || w[due].Offset != 8 || w[due].Epoch != 1 {
		t.Fatalf("watermarks %v, want deliveries/0 at 40 and redeliveries/0 at 8 (epoch 1)", w)
	}
	if l.Drop([]TP{due}); l.BufferedIn(fresh.Topic) != 1 {
		t.Fatal("dropping redeliveries/0 dropped a record of deliveries/0")
	}
	l.Done(byOffset[40], true)
	l.Done(byOffset[8], true)
	l.Forget([]TP{due})
	if w := l.Watermarks(nil); len(w) != 1 || w[fresh].Offset != 41 || l.BufferedIn(due.Topic) != 0 {
		t.Fatalf("after forgetting redeliveries/0: watermarks %v, %d due held", w, l.BufferedIn(due.Topic))
	}
}

func TestDoneUncommittedHoldsWatermark(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	add(l, 0, 10, "A/k")
	add(l, 0, 11, "A/k")
	add(l, 0, 12, "A/other")
	a := next(t, l)
	b := next(t, l)
	if a.Rec.Offset != 10 || b.Rec.Offset != 12 {
		t.Fatalf("started %s and %s, want offsets 10 and 12", desc(a), desc(b))
	}
	l.Done(a, false) // its effects were not acknowledged
	c := next(t, l)  // ...but the key moves on
	if c.Rec.Offset != 11 {
		t.Fatalf("after Done(10, false), Next = %s, want offset 11", desc(c))
	}
	l.Done(b, true)
	l.Done(c, true)
	add(l, 0, 13, "A/more")
	l.Done(next(t, l), true)
	if got := wm(t, l, 0); got != 10 {
		t.Fatalf("watermark = %d, want 10 (held below the unacknowledged record forever)", got)
	}
	if l.Buffered() != 0 {
		t.Fatalf("Buffered = %d, want 0", l.Buffered())
	}
}

func TestBufferedAndWaitBelow(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	add(l, 0, 0, "A/k")
	add(l, 0, 1, "A/k") // waiting behind offset 0
	add(l, 0, 2, "A/j")
	add(l, 1, 0, "B/k")
	if got := l.Buffered(); got != 4 {
		t.Fatalf("Buffered = %d, want 4 (waiting, ready and running all count)", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.WaitBelow(ctx, 5); err != nil {
		t.Fatalf("WaitBelow(5) with 4 buffered = %v, want nil at once", err)
	}

	// Not below 3 with 4, nor with 3, buffered: WaitBelow blocks until
	// its context ends.
	short := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if err := l.WaitBelow(short(), 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitBelow(3) with 4 buffered = %v, want DeadlineExceeded", err)
	}
	a := next(t, l)
	if got := l.Buffered(); got != 4 {
		t.Fatalf("Buffered = %d after Next, want 4 (running counts)", got)
	}
	l.Done(a, true)
	if got := l.Buffered(); got != 3 {
		t.Fatalf("Buffered = %d after one Done, want 3", got)
	}
	if err := l.WaitBelow(short(), 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitBelow(3) with 3 buffered = %v, want DeadlineExceeded", err)
	}
	// A waiter blocked in WaitBelow wakes when a Done brings it below.
	waited := make(chan error, 1)
	go func() { waited <- l.WaitBelow(ctx, 3) }()
	waitBlocked(t, "(*Lanes).WaitBelow", 1)
	l.Done(next(t, l), true)
	if err := recv(t, waited, "WaitBelow(3) to return after Buffered fell to 2"); err != nil {
		t.Fatalf("WaitBelow = %v, want nil", err)
	}

	cctx, ccancel := context.WithCancel(context.Background())
	waited = make(chan error, 1)
	go func() { waited <- l.WaitBelow(cctx, 1) }()
	ccancel()
	if err := recv(t, waited, "WaitBelow to return on cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitBelow after cancel = %v, want context.Canceled", err)
	}
}

func TestDropForgetAndReassign(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	add(l, 0, 0, "A/x") // will be running
	add(l, 0, 1, "A/x") // waiting behind it
	add(l, 0, 2, "A/y") // ready
	add(l, 1, 0, "B/z") // ready, other partition
	add(l, 1, 1, "B/z") // waiting, other partition
	x0 := next(t, l)
	if x0.Rec.Offset != 0 || x0.Rec.Partition != 0 {
		t.Fatalf("first Next = %s, want A/x@0/0", desc(x0))
	}

	if n := l.Drop(tps(0)); n != 2 {
		t.Fatalf("Drop(0) = %d, want 2 (offsets 1 and 2; offset 0 is running)", n)
	}
	if got := l.Buffered(); got != 3 {
		t.Fatalf("Buffered = %d after Drop, want 3 (one running on 0, two on 1)", got)
	}
	z0 := next(t, l)
	if z0.Rec.Partition != 1 || z0.Rec.Offset != 0 {
		t.Fatalf("Next after Drop(0) = %s, want B/z@1/0", desc(z0))
	}
	if canRun(l) {
		t.Fatal("something is runnable after Drop(0): a dropped record survived")
	}

	// WaitIdle(0) waits for the running record of partition 0 only.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	idle := make(chan error, 1)
	go func() { idle <- l.WaitIdle(ctx, tps(0)) }()
	waitBlocked(t, "(*Lanes).WaitIdle", 1)
	notYet(t, idle, "WaitIdle(0) while A/x@0 runs")
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := l.WaitIdle(short, tps(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIdle(1) while B/z@1 runs = %v, want DeadlineExceeded", err)
	}
	cancelShort()
	l.Done(x0, true)
	if err := recv(t, idle, "WaitIdle(0)"); err != nil {
		t.Fatalf("WaitIdle(0) = %v", err)
	}
	if got := wm(t, l, 0); got != 1 {
		t.Fatalf("watermark of 0 = %d, want 1 (first dropped record)", got)
	}

	// The partition comes back: the new owner refetches from the
	// committed watermark. A/y, whose head was dropped, is not stuck.
	l.Forget(tps(0))
	if _, ok := l.Watermarks(nil)[TP{Topic: "deliveries", Partition: 0}]; ok {
		t.Fatal("a forgotten partition still has a watermark")
	}
	add(l, 0, 1, "A/x")
	add(l, 0, 2, "A/y")
	if got := wm(t, l, 0); got != 1 {
		t.Fatalf("watermark of the fresh ledger = %d, want 1", got)
	}
	got := map[string]*Item{}
	for range 2 {
		it := next(t, l)
		got[string(it.Rec.Key)] = it
	}
	if got["A/x"] == nil || got["A/y"] == nil {
		t.Fatalf("after reassignment started %v, want A/x and A/y", got)
	}
	l.Done(got["A/y"], true)
	l.Done(got["A/x"], true)
	if got := wm(t, l, 0); got != 3 {
		t.Fatalf("watermark of 0 = %d, want 3", got)
	}
	l.Done(z0, true)
	l.Done(next(t, l), true)
	if got := wm(t, l, 1); got != 2 {
		t.Fatalf("watermark of 1 = %d, want 2", got)
	}
	if l.Buffered() != 0 {
		t.Fatalf("Buffered = %d, want 0", l.Buffered())
	}
}

func TestDoneAfterForgetLeavesNewLedgerAlone(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	add(l, 0, 0, "A/k")
	old := next(t, l)
	l.Drop(tps(0))
	l.Forget(tps(0))  // partition lost while offset 0 runs
	l.Done(old, true) // must not panic
	if w := l.Watermarks(nil); len(w) != 0 || l.Buffered() != 0 {
		t.Fatalf("after Done on a forgotten partition: watermarks %v, buffered %d", w, l.Buffered())
	}

	add(l, 0, 5, "A/k")
	old = next(t, l)
	l.Drop(tps(0))
	l.Forget(tps(0))
	// The new owner (us again) refetches offset 5 and more.
	add(l, 0, 5, "A/k")
	add(l, 0, 6, "A/j")
	j := next(t, l)
	if string(j.Rec.Key) != "A/j" {
		t.Fatalf("Next = %s, want A/j (A/k waits for the old run of its key)", desc(j))
	}
	if canRun(l) {
		t.Fatal("the refetched A/k is runnable while its old run is still running")
	}
	l.Done(old, true) // must not mark the new ledger's offset 5
	if got := wm(t, l, 0); got != 5 {
		t.Fatalf("watermark = %d after the old run finished, want 5", got)
	}
	k := next(t, l)
	if k.Rec.Offset != 5 || k == old {
		t.Fatalf("Next = %s, want the refetched A/k@0/5", desc(k))
	}
	l.Done(j, true)
	if got := wm(t, l, 0); got != 5 {
		t.Fatalf("watermark = %d, want 5", got)
	}
	l.Done(k, true)
	if got := wm(t, l, 0); got != 7 {
		t.Fatalf("watermark = %d, want 7", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := l.WaitIdle(ctx, tps(0)); err != nil {
		t.Fatalf("WaitIdle(0) with nothing running = %v", err)
	}
}

func TestCloseWakesNext(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	var wg sync.WaitGroup
	results := make(chan bool, 3)
	for range 3 {
		wg.Go(func() {
			_, ok := l.Next()
			results <- ok
		})
	}
	waitBlocked(t, "(*Lanes).Next", 3)
	l.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, done, "blocked Next calls to return after Close")
	close(results)
	for ok := range results {
		if ok {
			t.Fatal("Next returned ok=true after Close")
		}
	}
	add(l, 0, 0, "A/k")
	if _, ok := l.Next(); ok {
		t.Fatal("Next returned ok=true on closed lanes with work")
	}
}

// TestConcurrentStress runs 8 workers against a concurrent producer: per key,
// records start in offset order and never overlap; per subscription the cap
// holds; every partition ends at last offset + 1.
func TestConcurrentStress(t *testing.T) {
	const (
		workers   = 8
		records   = 2000
		keys      = 50
		parts     = 3
		maxPerSub = 3
	)
	l := New(maxPerSub, 1<<20, 0, 0)
	var (
		mu        sync.Mutex
		started   = map[string][]int64{}
		runningK  = map[string]bool{}
		runningS  = map[string]int{}
		failure   string
		lastOff   = map[int32]int64{}
		finished  int
		allDone   = make(chan struct{})
		nextOff   [parts]int64
		toAdd     []*kgo.Record
		keyOfPart = func(k int) int32 { return int32(k % parts) }
	)
	for i := range records {
		k := i * 7 % keys
		p := keyOfPart(k)
		r := rec(p, nextOff[p], fmt.Sprintf("s%d/k%d", k%5, k))
		nextOff[p]++
		lastOff[p] = r.Offset
		toAdd = append(toAdd, r)
	}

	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 1))
		wg.Go(func() {
			for {
				it, ok := l.Next()
				if !ok {
					return
				}
				key := string(it.Rec.Key)
				mu.Lock()
				if runningK[key] && failure == "" {
					failure = "two records of " + key + " ran at once"
				}
				runningK[key] = true
				runningS[it.Sub]++
				if runningS[it.Sub] > maxPerSub && failure == "" {
					failure = fmt.Sprintf("%d records of %s ran at once", runningS[it.Sub], it.Sub)
				}
				started[key] = append(started[key], it.Rec.Offset)
				mu.Unlock()
				for range rng.IntN(50) { // a little work, to interleave
					_ = rng.Uint64()
				}
				mu.Lock()
				runningK[key] = false
				runningS[it.Sub]--
				finished++
				if finished == records {
					close(allDone)
				}
				mu.Unlock()
				l.Done(it, true)
			}
		})
	}
	for i, r := range toAdd {
		l.Add(r, subOf(string(r.Key)), Shape{})
		if i%100 == 0 {
			// Let the buffer drain now and then, as the poll loop does.
			_ = l.WaitBelow(context.Background(), 64)
		}
	}
	timer := time.NewTimer(30 * time.Second)
	select {
	case <-allDone:
	case <-timer.C:
		l.Close()
		wg.Wait()
		t.Fatalf("only %d of %d records finished", finished, records)
	}
	timer.Stop()
	l.Close()
	wg.Wait()

	if failure != "" {
		t.Fatal(failure)
	}
	perKey := map[string][]int64{}
	for _, r := range toAdd {
		perKey[string(r.Key)] = append(perKey[string(r.Key)], r.Offset)
	}
	for key, want := range perKey {
		if !slices.Equal(started[key], want) {
			t.Fatalf("key %s started in order %v, want %v", key, started[key], want)
		}
	}
	for p, last := range lastOff {
		if got := wm(t, l, p); got != last+1 {
			t.Fatalf("partition %d watermark = %d, want %d", p, got, last+1)
		}
	}
	if l.Buffered() != 0 {
		t.Fatalf("Buffered = %d, want 0", l.Buffered())
	}
}

// BenchmarkAddNextDone schedules batches of 1024 records, as the poll loop
// does, and runs them one by one: over 64 keys of 8 subscriptions, and all
// on one hot key (a long queue behind its head).
func BenchmarkAddNextDone(b *testing.B) {
	for _, nkeys := range []int{64, 1} {
		b.Run(fmt.Sprintf("keys=%d", nkeys), func(b *testing.B) {
			l := New(64, 1<<20, 0, 0)
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("s%d/k%d", i%8, i)
			}
			recs := make([]*kgo.Record, 1024)
			b.ReportAllocs()
			var off int64
			for b.Loop() {
				for i := range recs {
					recs[i] = rec(0, off, keys[off%int64(len(keys))])
					off++
				}
				for _, r := range recs {
					l.Add(r, subOf(string(r.Key)), Shape{})
				}
				for range recs {
					it, _ := l.Next()
					l.Done(it, true)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*int64(len(recs))), "ns/record")
		})
	}
}

// BenchmarkFinished is a commit's read of the runs finished above the
// watermark with a full buffer: 8,192 records held in one partition, the
// first 256, or all of them, handed out and
// every other one of those finished (runs beyond what a commit's metadata
// carries, kafka.MaxFinishedRuns).
func BenchmarkFinished(b *testing.B) {
	for _, out := range []int{256, 8192} {
		b.Run(fmt.Sprintf("handed-out=%d", out), func(b *testing.B) {
			l := New(out, 1<<20, 0, 0)
			for off := range int64(8192) {
				l.Add(rec(0, off, fmt.Sprintf("s%d/k%d", off%8, off)), subOf(fmt.Sprintf("s%d/k%d", off%8, off)), Shape{})
			}
			for i := range out {
				it, _ := l.Next()
				if i%2 == 1 {
					l.Done(it, true)
				}
			}
			parts := []TP{{Topic: "deliveries", Partition: 0}}
			b.ReportAllocs()
			for b.Loop() {
				if len(l.Finished(parts)) != 1 {
					b.Fatal("no runs")
				}
			}
		})
	}
}

// TestSpillBeyondQueueLimit: a subscription's records beyond its queue
// limit are handed out as spill items, ahead of ordinary work, outside the
// in-flight cap, and still one at a time per key in offset order.
func TestSpillBeyondQueueLimit(t *testing.T) {
	l := New(1, 2, 0, 0)
	add := func(off int64, key string) {
		l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(key), Partition: 0, Offset: off}, "a", Shape{})
	}
	add(0, "a/1")
	add(1, "a/2")
	add(2, "a/3") // beyond the limit of 2: spill
	add(3, "a/3") // spill, behind offset 2 in its key
	first, _ := l.Next()
	if !first.Spill || first.Rec.Offset != 2 {
		t.Fatalf("first item = offset %d spill %v, want the spill at offset 2", first.Rec.Offset, first.Spill)
	}
	second, _ := l.Next()
	if second.Spill || second.Rec.Offset != 0 {
		t.Fatalf("second item = offset %d spill %v, want ordinary offset 0 (key a/3 is busy)", second.Rec.Offset, second.Spill)
	}
	l.Done(first, true)
	third, _ := l.Next()
	if !third.Spill || third.Rec.Offset != 3 {
		t.Fatalf("third item = offset %d spill %v, want the spill at offset 3 once its key is free", third.Rec.Offset, third.Spill)
	}
	l.Done(third, true)
	l.Done(second, true)
	last, _ := l.Next()
	if last.Spill || last.Rec.Offset != 1 {
		t.Fatalf("last item = offset %d spill %v", last.Rec.Offset, last.Spill)
	}
	l.Done(last, true)
	if wm := l.Watermarks(nil)[TP{Topic: "deliveries", Partition: 0}]; wm.Offset != 4 {
		t.Fatalf("watermark %d, want 4", wm.Offset)
	}
}

// TestVirtualSpillOnlyWhenSlow: beyond its queue limit a subscription spills only
// when, at the pace its records run, it could not finish what it holds
// within slowFactor spill delays.
func TestVirtualSpillOnlyWhenSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 5 * time.Second // slow beyond 20 s of work
		l := New(2, 4, 400, after)    // 2 at a time, queue limit 4, hard cap 200
		off := int64(0)
		add := func(sub string, n int) {
			for range n {
				l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(fmt.Sprintf("%s/%d", sub, off)), Partition: 0, Offset: off}, sub, Shape{})
				off++
			}
		}
		spills := func(sub string) (n int) {
			for _, q := range l.keys {
				for _, it := range q {
					if it.Sub == sub && it.Spill {
						n++
					}
				}
			}
			return n
		}
		// fast's records take 1 s each: 40 held are 20 s of work at 2 at a time.
		add("fast", 3)
		first := []*Item{}
		for range 2 {
			it, _ := l.Next()
			first = append(first, it)
		}
		time.Sleep(time.Second)
		for _, it := range first {
			l.Done(it, true)
		}
		if it, _ := l.Next(); it.Sub != "fast" {
			t.Fatalf("ran %s", it.Sub)
		}
		add("fast", 39)
		if n := spills("fast"); n != 0 {
			t.Fatalf("fast subscription spilled %d records, want 0", n)
		}
		add("fast", 2) // joining 40 held (20 s of work), the 41st is kept; the 42nd spills
		if n := spills("fast"); n != 1 {
			t.Fatalf("fast subscription spilled %d records beyond 20 s of work, want 1", n)
		}

		// slow's first two records run and hang: no pace yet, so held.
		add("slow", 2)
		var hung []*Item
		for len(hung) < 2 {
			if it, _ := l.Next(); it.Sub == "slow" {
				hung = append(hung, it)
			} else {
				l.Done(it, true)
			}
		}
		add("slow", 8)
		if n := spills("slow"); n != 0 {
			t.Fatalf("slow subscription spilled %d records before it was seen to be slow, want 0", n)
		}
		time.Sleep(6 * time.Second) // hung for 6 s: 10 held are 30 s of work
		add("slow", 2)
		if n := spills("slow"); n != 2 {
			t.Fatalf("slow subscription spilled %d records once seen hanging, want 2", n)
		}
		// Each spill carries how long slow needed to finish what it held
		// when it arrived: 10 and then 11 records at 6 s, 2 at a time.
		var waits []time.Duration
		for _, it := range l.spillq {
			if it.Sub == "slow" {
				waits = append(waits, it.Wait)
			}
		}
		if want := []time.Duration{30 * time.Second, 33 * time.Second}; !slices.Equal(waits, want) {
			t.Fatalf("spilled records wait %v, want %v", waits, want)
		}
		for _, it := range hung {
			l.Done(it, true)
		}
	})
}

// TestVirtualOneStalledRequestIsNotThePace: held 8,000 records at 64 at a time,
// a subscription whose requests take 2 ms is not slow because one of them
// stalls for 2 s, while it stalls or once it is over (at the oldest
// request's age, that was four minutes of work; with the 2 s in an
// average of the last five, 50 s). It is slow when one request in ten
// takes 2 s (those fill its slots, and it goes 2 s without finishing one),
// and when it hangs.
func TestVirtualOneStalledRequestIsNotThePace(t *testing.T) {
	quick := func(int) time.Duration { return 2 * time.Millisecond }
	cases := []struct {
		name  string
		took  func(n int) time.Duration // of the n-th request started after the first second
		spill bool
	}{
		{"one request stalls", func(n int) time.Duration {
			if n == 0 {
				return 2 * time.Second
			}
			return 2 * time.Millisecond
		}, false},
		{"one request in ten is slow", func(n int) time.Duration {
			if n%10 == 0 {
				return 2 * time.Second
			}
			return 2 * time.Millisecond
		}, true},
		{"it hangs", func(int) time.Duration { return time.Hour }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const held = 8000
				l := New(64, 128, 2*held, 5*time.Second) // slow beyond 20 s of work
				off := int64(0)
				add := func(n int) {
					for range n {
						l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(fmt.Sprintf("a/%d", off)), Partition: 0, Offset: off}, "a", Shape{})
						off++
					}
				}
				ends := map[*Item]time.Time{} // running, and when each finishes
				// run works for d in steps of a millisecond: each request
				// finishes when its time is up, and as many records arrive
				// as finished, so held stay held; one more arrives at the
				// end, whatever finished.
				run := func(d time.Duration, took func(n int) time.Duration) {
					started := 0
					for range d / time.Millisecond {
						for len(ends) < 64 {
							it, _ := l.Next()
							ends[it] = time.Now().Add(took(started))
							started++
						}
						time.Sleep(time.Millisecond)
						done := 0
						for it, end := range ends {
							if !time.Now().Before(end) {
								l.Sent(it)
								l.Done(it, true)
								delete(ends, it)
								done++
							}
						}
						add(done)
					}
					add(1)
				}
				add(held)
				run(time.Second, quick)
				run(2500*time.Millisecond, c.took)
				spilled := 0
				for _, q := range l.keys {
					for _, it := range q {
						if it.Spill {
							spilled++
						}
					}
				}
				if (spilled > 0) != c.spill {
					t.Errorf("spilled %d records, want spills %v", spilled, c.spill)
				}
				for it := range ends {
					l.Done(it, true)
				}
			})
		})
	}
}

// TestCrowdedAtHalfTheBuffer: a fast subscription holding half the buffer
// spills nothing (a burst is not slowness): its partitions are crowded, to
// be paused, until it holds less than a quarter; a slow one past its queue
// limit spills and crowds nothing.
func TestCrowdedAtHalfTheBuffer(t *testing.T) {
	l := New(64, 4, 40, time.Hour)
	for i := range 25 {
		l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(fmt.Sprintf("a/%d", i)), Partition: 3, Offset: int64(i)}, "a", Shape{})
	}
	l.Add(&kgo.Record{Topic: "redeliveries", Key: []byte("a/x"), Partition: 3, Offset: 0}, "a", Shape{})
	l.Add(&kgo.Record{Topic: "deliveries", Key: []byte("b/0"), Partition: 1, Offset: 0}, "b", Shape{})
	if n := len(l.spillq); n != 0 {
		t.Fatalf("%d spilled, want none", n)
	}
	got := l.Crowded()
	slices.SortFunc(got, func(x, y TP) int { return strings.Compare(x.Topic, y.Topic) })
	if want := []TP{{"deliveries", 3}, {"redeliveries", 3}}; !slices.Equal(got, want) {
		t.Fatalf("crowded %v, want %v", got, want)
	}
	drain := func(left int) {
		for l.subs["a"].items > left {
			it, _ := l.Next()
			l.Done(it, true)
		}
	}
	drain(15) // below half, not yet below a quarter: still crowded
	if got := l.Crowded(); len(got) != 2 {
		t.Fatalf("crowded %v holding 15 of 40, want both partitions still", got)
	}
	drain(9)
	if got := l.Crowded(); len(got) != 0 {
		t.Fatalf("crowded %v holding 9 of 40", got)
	}

	slow := New(2, 4, 40, 0) // no spill delay: every subscription is slow
	for i := range 25 {
		slow.Add(&kgo.Record{Topic: "deliveries", Key: []byte(fmt.Sprintf("a/%d", i)), Partition: 0, Offset: int64(i)}, "a", Shape{})
	}
	if n := len(slow.spillq); n != 21 {
		t.Fatalf("slow: %d spilled, want the 21 beyond its queue limit", n)
	}
	if got := slow.Crowded(); len(got) != 0 {
		t.Fatalf("slow: crowded %v", got)
	}
}

// The shards of a spread subscription share the half of the buffer at
// which it is crowded: held by one replica, all of them together pause
// their partitions at half the buffer, not each at half of it.
func TestSpreadSubscriptionSharesCrowding(t *testing.T) {
	l := New(64, 4, 40, time.Hour)
	for shard := range 2 {
		lane := fmt.Sprintf("h %d", shard)
		for i := range 10 {
			l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(fmt.Sprintf("%s/%d", lane, i)), Partition: int32(3 + shard), Offset: int64(i)}, lane, Shape{Width: 2})
		}
	}
	if got := l.Crowded(); len(got) != 0 {
		t.Fatalf("crowded %v holding 20 of 40 (10 per shard), want none yet", got)
	}
	for shard := range 2 {
		lane := fmt.Sprintf("h %d", shard)
		l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(lane + "/x"), Partition: int32(3 + shard), Offset: 10}, lane, Shape{Width: 2})
	}
	got := l.Crowded()
	slices.SortFunc(got, func(x, y TP) int { return int(x.Partition - y.Partition) })
	if want := []TP{{"deliveries", 3}, {"deliveries", 4}}; !slices.Equal(got, want) {
		t.Fatalf("crowded %v holding 22 of 40 over two shards, want %v", got, want)
	}
}

// TestVirtualHandOffSpillsSlow: at a hand-off, the records kept to run of a
// subscription too slow to finish them within the spill delay become
// spills, in order, carrying that wait; a fast subscription's run. Without
// it a hanging endpoint's queue holds the shutdown or the rebalance for up
// to the whole budget.
func TestVirtualHandOffSpillsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(1, 100, 400, 5*time.Second)
		add := func(off int64, key, sub string) {
			l.Add(&kgo.Record{Topic: "deliveries", Key: []byte(key), Partition: 0, Offset: off}, sub, Shape{})
		}
		for i := range int64(10) {
			add(i, fmt.Sprintf("slow/%d", i), "slow")
		}
		add(10, "quick/a", "quick")
		add(11, "quick/b", "quick")
		add(12, "late/a", "late")
		var slow0 *Item
		for _, want := range []int64{0, 10, 12} {
			it, _ := l.Next()
			if it.Rec.Offset != want {
				t.Fatalf("ran offset %d, want %d", it.Rec.Offset, want)
			}
			if it.Sub == "slow" {
				slow0 = it
			} else {
				l.Done(it, true)
			}
		}
		time.Sleep(10 * time.Second) // slow/0 hangs: 10 held are 100 s of work, 1 at a time
		if n := l.HandOffAll(); n != 0 {
			t.Fatalf("dropped %d, want 0 (all are below offset 12, which started)", n)
		}
		var offsets []int64
		for _, it := range l.spillq {
			offsets = append(offsets, it.Rec.Offset)
			if it.Sub != "slow" || it.Wait != 100*time.Second {
				t.Fatalf("spill of %s waits %v, want only slow's, waiting 100s", it.Sub, it.Wait)
			}
		}
		if want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(offsets, want) {
			t.Fatalf("spilled offsets %v, want %v", offsets, want)
		}
		for range 9 {
			it, _ := l.Next()
			l.Done(it, true)
		}
		if it, _ := l.Next(); it.Spill || it.Rec.Offset != 11 {
			t.Fatalf("next is offset %d spill %v, want quick's offset 11, to run", it.Rec.Offset, it.Spill)
		} else {
			l.Done(it, true)
		}
		l.Done(slow0, true)
		if wm := l.Watermarks(nil)[TP{Topic: "deliveries", Partition: 0}]; wm.Offset != 13 {
			t.Fatalf("watermark %d, want 13", wm.Offset)
		}
	})
}

// tps names partitions of the deliveries topic, where rec puts records.
func tps(ps ...int32) []TP {
	out := make([]TP, len(ps))
	for i, p := range ps {
		out[i] = TP{Topic: "deliveries", Partition: p}
	}
	return out
}

// TestFinishedAboveTheWatermark (invariant 3): the runs of records finished
// above a partition's watermark, to commit with it; gaps in the offsets
// (transaction markers) inside a run belong to it, and a record finished
// without committed (not acknowledged) ends one.
func TestFinishedAboveTheWatermark(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	items := map[int64]*Item{}
	for _, off := range []int64{0, 1, 2, 4, 5, 6, 7, 8} { // 3: a transaction marker
		add(l, 0, off, fmt.Sprintf("A/k%d", off))
	}
	for range 8 {
		it := next(t, l)
		items[it.Rec.Offset] = it
	}
	runs := func() []kafka.Run { return l.Finished(tps(0))[TP{Topic: "deliveries", Partition: 0}] }
	if got := runs(); got != nil {
		t.Fatalf("runs with nothing finished = %v", got)
	}
	for _, off := range []int64{1, 2, 4, 7, 8} {
		l.Done(items[off], true)
	}
	l.Done(items[6], false)
	if got, want := runs(), []kafka.Run{{From: 1, To: 4}, {From: 7, To: 8}}; !slices.Equal(got, want) {
		t.Fatalf("runs = %v, want %v", got, want)
	}
	for off := int64(9); off < 40; off++ { // held, not started
		add(l, 0, off, fmt.Sprintf("B/k%d", off))
	}
	if got, want := runs(), []kafka.Run{{From: 1, To: 4}, {From: 7, To: 8}}; !slices.Equal(got, want) {
		t.Fatalf("runs with records held after them = %v, want %v", got, want)
	}
	l.Done(items[0], true)
	if w := wm(t, l, 0); w != 5 {
		t.Fatalf("watermark = %d, want 5", w)
	}
	if got, want := runs(), []kafka.Run{{From: 7, To: 8}}; !slices.Equal(got, want) {
		t.Fatalf("runs past the watermark = %v, want %v", got, want)
	}
}

// TestFinishedAsManyAsACommitCarries: where records finish out of order
// the runs are many; Finished returns the lowest kafka.MaxFinishedRuns of
// them, all a commit's metadata can carry, whatever the ledger holds.
func TestFinishedAsManyAsACommitCarries(t *testing.T) {
	const n = 4 * kafka.MaxFinishedRuns
	l := New(n, 1<<20, 0, 0)
	for off := range int64(n) {
		add(l, 0, off, fmt.Sprintf("A/k%d", off))
	}
	for range n {
		if it := next(t, l); it.Rec.Offset%2 == 1 {
			l.Done(it, true)
		}
	}
	got := l.Finished(tps(0))[TP{Topic: "deliveries", Partition: 0}]
	if len(got) != kafka.MaxFinishedRuns {
		t.Fatalf("%d runs, want kafka.MaxFinishedRuns (%d)", len(got), kafka.MaxFinishedRuns)
	}
	for i, r := range got {
		if want := (kafka.Run{From: int64(2*i + 1), To: int64(2*i + 1)}); r != want {
			t.Fatalf("run %d = %v, want %v (the lowest)", i, r, want)
		}
	}
}

// TestResumedRunsAreNotRun (invariant 3): records of a partition that its
// previous owner finished above its committed offset (Resume) are entered
// as finished, never handed to a worker; the others run. Until they are
// all added, the runs not reached yet are committed on, and Forget drops
// them.
func TestResumedRunsAreNotRun(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	tp := TP{Topic: "deliveries", Partition: 0}
	l.Resume(tp, []kafka.Run{{From: 11, To: 12}, {From: 14, To: 20}})
	for off := int64(10); off <= 15; off++ {
		add(l, 0, off, fmt.Sprintf("A/k%d", off))
	}
	var ran []int64
	for range 2 {
		ran = append(ran, next(t, l).Rec.Offset)
	}
	slices.Sort(ran)
	if !slices.Equal(ran, []int64{10, 13}) || canRun(l) {
		t.Fatalf("ran %v (more: %v), want 10 and 13 only", ran, canRun(l))
	}
	if n := l.Buffered(); n != 2 {
		t.Fatalf("buffered = %d, want the 2 that run", n)
	}
	if got, want := l.Finished(tps(0))[tp], []kafka.Run{{From: 11, To: 12}, {From: 14, To: 20}}; !slices.Equal(got, want) {
		t.Fatalf("runs = %v, want %v (the previous owner's, on to 20)", got, want)
	}
	l.Forget(tps(0))
	add(l, 0, 16, "A/k16")
	if it := next(t, l); it.Rec.Offset != 16 {
		t.Fatalf("after Forget ran %s, want offset 16", desc(it))
	}
}

// TestUnpacedOutOfThePace: a record that has made no request yet (the
// ordered path reading its key's hold, or parking it, while the broker is
// slow to answer) does not count in its subscription's pace however long it
// runs, nor when it finishes without a request; once its request starts
// (Request) it does. Counted, the broker's restart made a subscription with
// a backlog slow, and its further records spilled for minutes.
func TestUnpacedOutOfThePace(t *testing.T) {
	l := New(2, 1<<20, 1<<20, time.Second)
	for i := range 4 {
		l.Add(rec(0, int64(i), fmt.Sprintf("s/k%d", i)), "s", Shape{})
	}
	a, b := next(t, l), next(t, l)
	l.Unpaced(a)
	l.Unpaced(b)
	s := l.subs["s"]
	later := time.Now().Add(time.Hour)
	if w := s.workOff(later); w != 0 {
		t.Fatalf("an hour of records without a request makes a pace: work off %v, want 0", w)
	}
	l.Done(a, true) // parked: no request
	if s.took != 0 || !s.lastDone.IsZero() {
		t.Fatalf("a record finished without a request counted: took %v, last done %v", s.took, s.lastDone)
	}
	l.Request(b)
	if w := s.workOff(later); w < time.Hour {
		t.Fatalf("a request running for an hour does not count: work off %v", w)
	}
	l.Sent(b)
	if s.took <= 0 {
		t.Fatal("the request's time is not in the pace")
	}
	if c := next(t, l); c == nil {
		t.Fatal("no record runs in the slots freed")
	}
}
