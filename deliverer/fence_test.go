package deliverer

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestFencedZombieCannotHoldAKey (invariant 4): a deliverer that lost a
// slot without knowing it yet (its session ended during a pause, or while
// the broker held its join) and writes holds from its stale view after the
// slot's new owner released the keys holds none of them again. The new
// owner's fence makes every reader ignore those writes, so the key's next
// delivery is attempted (not parked behind a head that already succeeded,
// for ever); the owner writes the key's state over the stale record when
// the key's next record runs, and over every other such record when it is
// assigned the slot again, so that a reader starting afresh after
// compaction does not take them either.
func TestFencedZombieCannotHoldAKey(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h, zombie, sub := orderedSetup(t, rc)
	owner := newReleaser(t, h)
	z, y := []byte(sub+"/z"), []byte(sub+"/y")
	tp := lanes.TP{Topic: h.names.Deliveries(), Partition: h.parkedPartition(sub)}
	ctx := testCtx(t, 20*time.Second)
	assigned := func(d *deliverer) context.Context {
		t.Helper()
		d.fenceSlots(ctx, []lanes.TP{tp})
		sctx, ok := d.withSlot(ctx, &kgo.Record{Partition: tp.Partition})
		if !ok {
			t.Fatal("the slot was not fenced")
		}
		return sctx
	}

	// The zombie owned the slot and held z and y: their heads failed and
	// wait in a retry tier.
	zctx := assigned(zombie)
	heldZ, heldY := heldKey("z"), heldKey("y")
	if !zombie.writeHold(zctx, z, heldZ) || !zombie.writeHold(zctx, y, heldY) {
		t.Fatal("writing the zombie's holds")
	}
	// Its session ends; the owner is assigned the slot, reads the holds
	// and releases both keys (their heads succeeded).
	octx := assigned(owner)
	if writeEpoch(octx) <= writeEpoch(zctx) {
		t.Fatalf("the owner's epoch %d is not above the zombie's %d", writeEpoch(octx), writeEpoch(zctx))
	}
	if got, _, err := owner.holds.get(octx, tp, string(z)); err != nil || got == nil || got.Head != heldZ.Head {
		t.Fatalf("the owner reads %+v, %v; want the zombie's hold, written before the fence", got, err)
	}
	if !owner.writeHold(octx, z, nil) || !owner.writeHold(octx, y, nil) {
		t.Fatal("releasing the keys")
	}
	// The zombie, still seeing the keys held, parks z2 behind z's head
	// and writes y's hold again.
	z2 := newDelivery(sub, "z2")
	z2.Key = "z"
	rec2 := h.deliveryRecord(z2, "z")
	rec2.Partition, rec2.Offset = tp.Partition, 5
	if !zombie.park(zctx, rec2, &z2, heldZ) || !zombie.writeHold(zctx, y, heldY) {
		t.Fatal("the zombie's writes were refused by the broker")
	}
	// The owner's table has read them (a stale record it has not read yet
	// is written over at the slot's next assignment, below).
	waitFor(t, 10*time.Second, "the zombie's records read and ignored", func() bool {
		return owner.holds.table.Rejected(string(z)) && owner.holds.table.Rejected(string(y))
	})
	// The owner's next delivery of z is attempted, and z's stale record
	// is written over.
	z3 := newDelivery(sub, "z3")
	z3.Key = "z"
	rec3 := h.deliveryRecord(z3, "z")
	h.produce(rec3)
	if !owner.ordered(octx, &lanes.Item{Rec: rec3, Sub: sub}, &z3, rand.New(rand.NewPCG(1, 2))) {
		t.Fatal("the owner did not finish z3")
	}
	if got := receivedIDs(rc); !slices.Equal(got, []string{"z3"}) {
		t.Fatalf("endpoint received %v, want z3 (the key free)", got)
	}
	waitFor(t, 10*time.Second, "z's stale record written over", func() bool { return !owner.holds.table.Rejected(string(z)) })

	// The owner is assigned the slot again (a later fence, past the stale
	// records, compacts its first one away): y is written over too.
	owner.holds.forget([]lanes.TP{tp})
	assigned(owner)
	if !owner.writeHold(octx, []byte(sub+"/x"), nil) { // kfake compacts all but a partition's last batch
		t.Fatal("writing another key's release")
	}
	h.cluster.Compact()
	fresh, err := table.NewHoldTable(baseOpts(owner.cfg, h.log), h.names.Holds(), h.log)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go fresh.Run(runCtx)
	if err := fresh.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{z, y} {
		if got, ok := fresh.Get(string(key)); ok {
			t.Errorf("read afresh after compaction, %s is held by %s; want it free", key, got.Head)
		}
	}
}

// TestDeliverersShareOutSlots (invariant 4): the deliverers of a group own
// partition numbers, not partitions: each number's partitions of every
// consumed topic go to one of them, so that a key's records from
// deliveries and from redeliveries come to one process, which runs them
// one at a time and alone reads and writes the key's hold.
func TestDeliverersShareOutSlots(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	consumed := append(h.names.DeliveryTopics(), h.names.Redeliveries())
	for range 3 {
		h.start(nil)
	}
	var g kadm.DescribedGroup
	waitFor(t, 60*time.Second, "three deliverers sharing out every partition", func() bool {
		gs, err := h.adm.DescribeGroups(testCtx(t, 10*time.Second), topics.GroupDeliverer)
		if err != nil {
			return false
		}
		g = gs[topics.GroupDeliverer]
		n := 0
		for _, m := range g.Members {
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, at := range a.Topics {
					n += len(at.Partitions)
				}
			}
		}
		return g.State == "Stable" && len(g.Members) == 3 && n == 3*len(consumed)
	})
	if g.Protocol != kafka.CopartitionedProtocol {
		t.Errorf("the group balances with %q, want %q", g.Protocol, kafka.CopartitionedProtocol)
	}
	owners := map[int32]map[string]bool{}
	for _, m := range g.Members {
		a, _ := m.Assigned.AsConsumer()
		for _, at := range a.Topics {
			for _, p := range at.Partitions {
				if owners[p] == nil {
					owners[p] = map[string]bool{}
				}
				owners[p][m.MemberID] = true
			}
		}
	}
	for p, ms := range owners {
		if len(ms) != 1 {
			t.Errorf("partition number %d is owned by %d deliverers", p, len(ms))
		}
	}
}

// TestTooFewHoldsPartitionsStop: a holds topic with fewer partitions than
// the deliveries topics (created by hand, say) cannot give every slot's
// keys a partition of their own: the deliverer stops with an error that
// says so, rather than retry for ever.
func TestTooFewHoldsPartitionsStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := testCtx(t, 20*time.Second)
	if _, err := h.adm.DeleteTopics(ctx, h.names.Holds()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the holds topic deleted", func() bool {
		td, err := h.adm.ListTopics(ctx, h.names.Holds())
		return err == nil && !td.Has(h.names.Holds())
	})
	compact := "compact"
	if _, err := h.adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, h.names.Holds()); err != nil {
		t.Fatal(err)
	}
	r := h.start(nil)
	waitFor(t, 30*time.Second, "the deliverer to stop", testkit.Done(r.Done()))
	if r.Err() == nil || !strings.Contains(r.Err().Error(), h.names.Holds()) || !errors.Is(r.Err(), errFewHolds) {
		t.Fatalf("Run = %v, want an error naming %s", r.Err(), h.names.Holds())
	}
}

// TestOwnWriteOfAnOlderEpochIgnored: a hold this process wrote stands for
// the key until the table has applied it, but not for a record of a later
// epoch: the process lost the slot and got it back, its fence makes
// readers ignore that write, and the record must not act on it either.
func TestOwnWriteOfAnOlderEpochIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cfg, err := LoadConfig(h.getenv)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := table.NewHoldTable(baseOpts(cfg, h.log), h.names.Holds(), h.log) // not run: applies nothing
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	hs := newHolds(tbl)
	tp := lanes.TP{Topic: h.names.Deliveries(), Partition: 0}
	hs.ready[tp] = true
	hs.wrote("sub/k", heldKey("k"), &kgo.Record{Partition: 0, Offset: 7, Headers: []kgo.RecordHeader{topics.EpochHeader(1)}})
	ctx := testCtx(t, 10*time.Second)
	if got, _, err := hs.get(context.WithValue(ctx, epochKey{}, int32(1)), tp, "sub/k"); err != nil || got == nil {
		t.Fatalf("a record of the write's epoch reads %v, %v; want the write", got, err)
	}
	if got, _, err := hs.get(context.WithValue(ctx, epochKey{}, int32(2)), tp, "sub/k"); err != nil || got != nil {
		t.Fatalf("a record of a later epoch reads %+v, %v; want the table's (nothing)", got, err)
	}
}
