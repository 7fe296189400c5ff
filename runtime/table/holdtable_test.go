package table

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// startHoldTable runs a hold table on e's topic until the end of the test.
func (e *tableEnv) startHoldTable(tb testing.TB) *HoldTable {
	tb.Helper()
	tbl, err := NewHoldTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go tbl.Run(ctx)
	tb.Cleanup(func() { cancel(); tbl.Close() })
	return tbl
}

// putHold writes key's hold (nil: its release) to partition 0 with epoch
// e (-1: without one, as before ADR 0027).
func (e *tableEnv) putHold(tb testing.TB, key string, h *topics.Hold, epoch int32) {
	tb.Helper()
	r := &kgo.Record{Topic: e.topic, Key: []byte(key), Partition: 0}
	if h != nil {
		r.Value, r.Headers = h.Encode(), h.Headers()
	}
	if epoch >= 0 {
		r.Headers = append(r.Headers, topics.EpochHeader(epoch))
	}
	if err := e.cl.ProduceSync(testCtx(tb, 10*time.Second), r).FirstErr(); err != nil {
		tb.Fatal(err)
	}
}

func hold(head string) *topics.Hold {
	return &topics.Hold{Head: head, HeadAttempt: 2, ParkedFrom: -1, ParkedLast: -1, ReleasingTo: -1, Through: -1, Since: time.Now()}
}

// TestHoldTableIgnoresFencedWriters: once a partition's holds carry an
// epoch (a hold or a fence), a hold written with a lower one, by a
// deliverer that lost the partition, is ignored by every reader, the ones
// running and one reading the topic afresh, and the key is marked for its
// owner to write over; records without an epoch apply as they come.
func TestHoldTableIgnoresFencedWriters(t *testing.T) {
	e := newTableEnv(t, 1)
	running := e.startHoldTable(t)
	e.putHold(t, "sub/legacy", hold("evt_0"), -1)
	e.putHold(t, "sub/a", hold("evt_1"), 1) // the old owner, epoch 1
	fence := &kgo.Record{Topic: e.topic, Key: topics.FenceKey(0, 1), Value: []byte{}, Headers: []kgo.RecordHeader{topics.EpochHeader(2)}}
	if err := e.cl.ProduceSync(testCtx(t, 10*time.Second), fence).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.putHold(t, "sub/b", nil, 2)               // the new owner releases b...
	e.putHold(t, "sub/a", hold("evt_stale"), 1) // ...the old one, not knowing yet, writes a
	e.putHold(t, "sub/b", hold("evt_stale"), 1) // and b
	e.putHold(t, "sub/c", hold("evt_2"), 2)
	for name, tbl := range map[string]*HoldTable{"running": running, "fresh": e.startHoldTable(t)} {
		if err := tbl.WaitCaughtUp(testCtx(t, catchUpTimeout)); err != nil {
			t.Fatal(err)
		}
		if h, ok := tbl.Get("sub/a"); !ok || h.Head != "evt_1" {
			t.Errorf("%s: hold of a = %+v, %v; want evt_1's, the stale write ignored", name, h, ok)
		}
		if h, ok := tbl.Get("sub/b"); ok {
			t.Errorf("%s: b held by %s; want it released, the stale write ignored", name, h.Head)
		}
		if !tbl.Rejected("sub/a") || !tbl.Rejected("sub/b") || tbl.Rejected("sub/c") {
			t.Errorf("%s: rejected a, b, c = %v, %v, %v; want true, true, false", name, tbl.Rejected("sub/a"), tbl.Rejected("sub/b"), tbl.Rejected("sub/c"))
		}
		if _, ok := tbl.Get("sub/legacy"); !ok {
			t.Errorf("%s: a hold without an epoch was not applied", name)
		}
		if _, ok := tbl.Get(string(topics.FenceKey(0, 1))); ok || tbl.Len() != 3 {
			t.Errorf("%s: %d holds, want 3 (the fence is none)", name, tbl.Len())
		}
		if k, h, ok := tbl.Oldest(); !ok || k != "sub/legacy" || h.Head != "evt_0" {
			t.Errorf("%s: oldest hold %s %+v, %v; want sub/legacy's, held first", name, k, h, ok)
		}
		if tbl.Epoch(0) != 2 {
			t.Errorf("%s: epoch %d, want 2", name, tbl.Epoch(0))
		}
	}
	// The owner writes over a rejected key: it is no longer marked.
	e.putHold(t, "sub/a", hold("evt_1"), 2)
	if err := running.WaitCaughtUp(testCtx(t, catchUpTimeout)); err != nil {
		t.Fatal(err)
	}
	if running.Rejected("sub/a") {
		t.Error("a still marked after its owner wrote over it")
	}
}
