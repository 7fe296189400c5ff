package lanes

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// offsets are the offsets of the records an item runs.
func offsets(it *Item) []int64 {
	var out []int64
	for _, m := range it.records() {
		out = append(out, m.Rec.Offset)
	}
	return out
}

// TestVirtualBatchesOfUpToMax: a batching subscription's ready records run in
// batches of at most its count, each one item holding one request slot;
// what is left waits for more until the oldest has waited BatchWait, and
// then goes as a partial batch.
func TestVirtualBatchesOfUpToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(1, 100, 1000, 0)
		shape := Shape{Batch: 3, BatchWait: time.Second}
		for off := range int64(7) {
			l.Add(rec(0, off, fmt.Sprintf("b/k%d", off)), "b", shape)
		}
		first := next(t, l)
		if got := offsets(first); !slices.Equal(got, []int64{0, 1, 2}) {
			t.Fatalf("first batch %v, want offsets 0, 1, 2", got)
		}
		if canRun(l) {
			t.Fatal("a second batch runs while the first holds the subscription's one request slot")
		}
		l.Sent(first)
		second := next(t, l)
		if got := offsets(second); !slices.Equal(got, []int64{3, 4, 5}) {
			t.Fatalf("second batch %v, want offsets 3, 4, 5", got)
		}
		l.Sent(second)
		l.Done(first, true)
		l.Done(second, true)
		if canRun(l) {
			t.Fatal("one record left runs before it waited for more")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		last := next(t, l)
		if got := offsets(last); !slices.Equal(got, []int64{6}) {
			t.Fatalf("last batch %v, want offset 6 alone", got)
		}
		l.Done(last, true)
		if wm := l.Watermarks(nil)[TP{"deliveries", 0}]; wm.Offset != 7 {
			t.Fatalf("watermark %d after every batch finished, want 7", wm.Offset)
		}
	})
}

// TestBatchFailureKeepsEveryRecord: a batch done without its outcomes
// acknowledged leaves every record of it below the watermark.
func TestBatchFailureKeepsEveryRecord(t *testing.T) {
	l := New(4, 100, 1000, 0)
	for off := range int64(3) {
		l.Add(rec(0, off, fmt.Sprintf("b/k%d", off)), "b", Shape{Batch: 3, BatchWait: time.Hour})
	}
	it := next(t, l)
	l.Done(it, false)
	if wm := l.Watermarks(nil)[TP{"deliveries", 0}]; wm.Offset != 0 {
		t.Fatalf("watermark %d, want 0: no record of the batch finished", wm.Offset)
	}
}

// TestVirtualBatchKeepsKeyOrder: only a key's head is ever ready, so a key's
// next record waits for the batch holding the earlier one, and goes in a
// later batch.
func TestVirtualBatchKeepsKeyOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(4, 100, 1000, 0)
		shape := Shape{Batch: 10, BatchWait: time.Second}
		for off, key := range []string{"b/x", "b/y", "b/x", "b/z", "b/x"} {
			l.Add(rec(0, int64(off), key), "b", shape)
		}
		var batches [][]int64
		for range 3 {
			time.Sleep(time.Second)
			synctest.Wait()
			it := next(t, l)
			if canRun(l) {
				t.Fatal("a key's next record is ready while the batch holding its earlier one runs")
			}
			batches = append(batches, offsets(it))
			l.Done(it, true)
		}
		want := [][]int64{{0, 1, 3}, {2}, {4}}
		if fmt.Sprint(batches) != fmt.Sprint(want) {
			t.Fatalf("batches %v, want %v", batches, want)
		}
	})
}

// TestRetriedBatchRegroups: records marked as one failed batch's are
// batched with each other only, and as soon as all of them are ready;
// unmarked ones wait for their own batch.
func TestRetriedBatchRegroups(t *testing.T) {
	l := New(4, 100, 1000, 0)
	shape := Shape{Batch: 10, BatchWait: time.Hour}
	marked := func(off int64, key string) *kgo.Record {
		r := rec(0, off, key)
		r.Headers = []kgo.RecordHeader{topics.BatchHeader("batch_a", 2)}
		return r
	}
	l.Add(marked(0, "b/1"), "b", shape)
	l.Add(rec(0, 1, "b/2"), "b", shape)
	if canRun(l) {
		t.Fatal("half of a retried batch runs")
	}
	l.Add(marked(2, "b/3"), "b", shape)
	it := next(t, l)
	if got := offsets(it); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("batch %v, want the marked offsets 0 and 2", got)
	}
	if canRun(l) {
		t.Fatal("the unmarked record runs before its batch is due")
	}
}

// TestBatchBytesBounded: a batch stops short of maxBatchBytes of records,
// and takes one record however large.
func TestBatchBytesBounded(t *testing.T) {
	l := New(4, 100, 1000, 0)
	shape := Shape{Batch: 10, BatchWait: time.Hour}
	for off := range int64(10) {
		r := rec(0, off, fmt.Sprintf("b/k%d", off))
		r.Value = make([]byte, maxBatchBytes/4+1)
		l.Add(r, "b", shape)
	}
	if got := offsets(next(t, l)); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("batch %v, want 3 records of a quarter of the bound each", got)
	}
}

// TestHandOffFlushesBatches: a record a hand-off keeps to run goes as soon
// as it is ready, without waiting for a batch to fill.
func TestHandOffFlushesBatches(t *testing.T) {
	l := New(4, 100, 1000, 0)
	shape := Shape{Batch: 2, BatchWait: time.Hour}
	for off, key := range []string{"b/x", "b/x", "b/y"} {
		l.Add(rec(0, int64(off), key), "b", shape)
	}
	it := next(t, l)
	if got := offsets(it); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("batch %v, want offsets 0 and 2", got)
	}
	if dropped := l.HandOff([]TP{{"deliveries", 0}}); dropped != 0 {
		t.Fatalf("hand-off dropped %d, want offset 1 kept: a record above it started", dropped)
	}
	l.Done(it, true)
	if got := offsets(next(t, l)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("batch %v, want offset 1 at once", got)
	}
}
