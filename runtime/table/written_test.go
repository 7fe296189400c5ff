package table

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// run runs tbl until the end of the test (for a table made with newTable).
func run(tb testing.TB, tbl *Table) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tbl.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		if !waitDone(done, 5*time.Second) {
			tb.Errorf("Table.Run did not return after its context was cancelled")
		}
	})
}

// waitFails asserts that wait does not return before a short deadline.
func waitFails(t *testing.T, what string, wait func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s = %v, want it waiting until its deadline", what, err)
	}
}

// TestTableWritten: a writer's own acknowledged record shows at once,
// before the table's consumer reaches it; the consumer then never shows an
// earlier record of the key again, and the table ends as the topic says.
func TestTableWritten(t *testing.T) {
	t.Run("ahead of the consumer", func(t *testing.T) {
		e := newTableEnv(t, 1)
		tbl := e.newTable(t) // not running: only Written changes it
		other, ownSub, third := sub(t, "sub_1", "a.*"), sub(t, "sub_1", "b.*"), sub(t, "sub_2", "*")
		e.putSub(t, other)                                           // offset 0, another writer's
		own := e.put(t, ownSub.ID, subValue(t, ownSub))              // offset 1, ours
		e.putSub(t, third)                                           // offset 2, another writer's
		gone := e.put(t, "sub_3", subValue(t, sub(t, "sub_3", "*"))) // offset 3, ours
		tbl.Written(own)
		if got, ok := tbl.Get("sub_1"); !ok || got.Secret != ownSub.Secret || got.EventTypes[0] != "b.*" {
			t.Fatalf("Get(sub_1) right after Written = %+v, %v; want the own write", got, ok)
		}
		if n := len(tbl.Match(&topics.Event{ID: "e", Type: "b.x"})); n != 1 {
			t.Fatalf("Match found %d subscriptions for the own write, want 1", n)
		}
		if err := tbl.WaitApplied(testCtx(t, time.Second), own); err != nil {
			t.Fatalf("WaitApplied of the own write: %v", err)
		}
		// Offsets 0 and 2 are not applied: the table is not caught up.
		waitFails(t, "WaitCaughtUp", tbl.WaitCaughtUp)
		tbl.Written(gone)
		run(t, tbl)
		waitCaughtUp(t, tbl)
		if got, ok := tbl.Get("sub_1"); !ok || got.EventTypes[0] != "b.*" {
			t.Fatalf("after the consumer passed, Get(sub_1) = %+v, %v; want the own, later write", got, ok)
		}
		for _, id := range []string{"sub_2", "sub_3"} {
			if _, ok := tbl.Get(id); !ok {
				t.Fatalf("%s missing after the consumer passed", id)
			}
		}
		if got := ids(tbl.Match(&topics.Event{ID: "e", Type: "a.x"})); slices.Contains(got, "sub_1") {
			t.Fatalf("the earlier record of sub_1 matches after the consumer passed: %v", got)
		}
		// A later write of the key, by another writer, wins as in the topic.
		later := sub(t, "sub_1", "c.*")
		e.putSub(t, later)
		waitCaughtUp(t, tbl)
		if got, _ := tbl.Get("sub_1"); got.EventTypes[0] != "c.*" {
			t.Fatalf("Get(sub_1) after a later write = %v, want c.*", got.EventTypes)
		}
	})
	t.Run("the consumer skips what the own write replaced", func(t *testing.T) {
		// The consumer's batches, one record each, handed to apply by hand.
		e := newTableEnv(t, 1)
		tbl := e.newTable(t)
		earlier, later := sub(t, "sub_1", "a.*"), sub(t, "sub_1", "b.*")
		r0 := e.put(t, earlier.ID, subValue(t, earlier))
		r1 := e.put(t, later.ID, subValue(t, later))
		tbl.Written(r1)
		tbl.apply([]*kgo.Record{r0})
		if got, _ := tbl.Get("sub_1"); got.EventTypes[0] != "b.*" {
			t.Fatalf("the consumer's earlier record took the table back to %v", got.EventTypes)
		}
		tbl.apply([]*kgo.Record{r1})
		if got, _ := tbl.Get("sub_1"); got.EventTypes[0] != "b.*" || len(tbl.own) != 0 {
			t.Fatalf("after the consumer reached the own record: %v, own %v", got.EventTypes, tbl.own)
		}
		// Past it, the key follows the topic again.
		r2 := e.put(t, earlier.ID, subValue(t, earlier))
		tbl.apply([]*kgo.Record{r2})
		if got, _ := tbl.Get("sub_1"); got.EventTypes[0] != "a.*" {
			t.Fatalf("a later record after the own one shows %v", got.EventTypes)
		}
	})
	t.Run("own writes without a gap are caught up", func(t *testing.T) {
		e := newTableEnv(t, 1)
		tbl := e.newTable(t) // not running
		a, b := sub(t, "sub_a", "*"), sub(t, "sub_b", "*")
		ra := e.put(t, a.ID, subValue(t, a))
		rb := e.put(t, b.ID, subValue(t, b))
		tbl.Written(rb)
		waitFails(t, "WaitCaughtUp with offset 0 not applied", tbl.WaitCaughtUp)
		tbl.Written(ra)
		waitCaughtUp(t, tbl)
		// A tombstone of our own deletes at once.
		del := e.put(t, a.ID, nil)
		tbl.Written(del)
		if _, ok := tbl.Get(a.ID); ok {
			t.Fatal("sub_a still shown after its own tombstone")
		}
		waitCaughtUp(t, tbl)
		run(t, tbl)
		waitCaughtUp(t, tbl)
		if got := state(t, tbl); len(got) != 1 || got[b.ID] == "" {
			t.Fatalf("after the consumer passed: %v, want sub_b only", got)
		}
	})
	t.Run("the consumer was first", func(t *testing.T) {
		e := newTableEnv(t, 1)
		tbl := e.startTable(t)
		first := sub(t, "sub_1", "a.*")
		own := e.put(t, first.ID, subValue(t, first))
		e.putSub(t, sub(t, "sub_1", "b.*"))
		waitCaughtUp(t, tbl)
		// A late hand-over must not bring the earlier record back.
		tbl.Written(own)
		if got, _ := tbl.Get("sub_1"); got.EventTypes[0] != "b.*" {
			t.Fatalf("a late Written took the table back to %v", got.EventTypes)
		}
		waitCaughtUp(t, tbl)
	})
}
