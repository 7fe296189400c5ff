package lanes

import (
	"context"
	"testing"
	"time"
)

// TestHandOff: a hand-off (revocation, shutdown) drops the records that
// have not started, except those below the highest offset started in the
// partition, which run; then the watermark is past every record started,
// so the next owner redoes none. Drop would leave it at the first record
// not started, and the next owner would repeat A/y@2.
func TestHandOff(t *testing.T) {
	l := New(64, 1<<20, 0, 0)
	add(l, 0, 0, "A/x") // runs
	add(l, 0, 1, "A/x") // waits behind it: below the highest started, kept
	add(l, 0, 2, "A/y") // runs and finishes
	add(l, 0, 3, "A/z") // ready, not started, above: dropped
	x0, y2 := next(t, l), next(t, l)
	if x0.Rec.Offset != 0 || y2.Rec.Offset != 2 {
		t.Fatalf("started %s and %s, want A/x@0/0 and A/y@0/2", desc(x0), desc(y2))
	}
	l.Done(y2, true)

	if n := l.HandOff(tps(0)); n != 1 {
		t.Fatalf("HandOff(0) = %d, want 1 (A/z@3)", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	idle := make(chan error, 1)
	go func() { idle <- l.WaitIdle(ctx, tps(0)) }()
	waitBlocked(t, "(*Lanes).WaitIdle", 1)
	l.Done(x0, true)
	notYet(t, idle, "WaitIdle(0) while A/x@1, kept to run, has not")
	x1 := next(t, l)
	if x1.Rec.Offset != 1 {
		t.Fatalf("ran %s after the hand-off, want A/x@0/1", desc(x1))
	}
	l.Done(x1, true)
	if err := recv(t, idle, "WaitIdle(0)"); err != nil {
		t.Fatalf("WaitIdle(0) = %v", err)
	}
	if got := wm(t, l, 0); got != 3 {
		t.Fatalf("watermark after the hand-off = %d, want 3 (after every record started)", got)
	}
	if canRun(l) || l.Buffered() != 0 {
		t.Fatalf("%d records held after the hand-off; A/z@3 should have been dropped", l.Buffered())
	}
}
