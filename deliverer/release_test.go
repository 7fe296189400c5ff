package deliverer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// newReleaser is a deliverer with what parking and releasing ordered keys
// need (the subscription and hold tables, a client, the HTTP sender) and no
// consumer group; it stops with the test.
func newReleaser(tb testing.TB, h *harness) *deliverer {
	tb.Helper()
	cfg, err := LoadConfig(h.getenv)
	if err != nil {
		tb.Fatal(err)
	}
	d := &deliverer{cfg: cfg, names: cfg.Kafka.Names, log: h.log, sender: newSender(cfg), fatal: make(chan error, 1),
		m: newMetrics(ops.NewRegistry(), cfg.Kafka.Names), lanes: newLanes(cfg), unsettled: newUnsettled(cfg.MaxInFlight)}
	base := baseOpts(cfg, h.log)
	if d.table, err = table.NewTable(base, d.names.Subscriptions(), cfg.Secrets, h.log); err != nil {
		tb.Fatal(err)
	}
	holdTable, err := table.NewHoldTable(base, d.names.Holds(), h.log)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go d.table.Run(ctx)
	go holdTable.Run(ctx)
	d.holds = newHolds(holdTable)
	if d.cl, err = kgo.NewClient(append(base, kgo.RecordPartitioner(topics.Partitioner()), kgo.ProducerLinger(2*time.Millisecond))...); err != nil {
		tb.Fatal(err)
	}
	d.parked = newParkedReader(d.cl, d.names.Parked())
	tb.Cleanup(func() { cancel(); d.cl.Close(); d.table.Close(); holdTable.Close() })
	if err := d.table.WaitCaughtUp(testCtx(tb, 10*time.Second)); err != nil {
		tb.Fatal(err)
	}
	return d
}

// heldKey is a key of an ordered subscription whose head delivery waits in
// a retry tier.
func heldKey(key string) *topics.Hold {
	return &topics.Hold{Head: "evt_head_" + key, HeadAttempt: 2, ParkedFrom: -1, ParkedLast: -1, ReleasingTo: -1, Through: -1, Since: time.Now()}
}

// park parks one delivery of key behind its hold, as the ordered path does
// with a delivery arriving at offset off of the deliveries topic, and
// returns the key's hold after it.
func (h *harness) park(tb testing.TB, d *deliverer, held *topics.Hold, sub, key, eventID string, off int64) *topics.Hold {
	tb.Helper()
	ctx := testCtx(tb, 10*time.Second)
	del := newDelivery(sub, eventID)
	del.Key = key
	rec := h.deliveryRecord(del, key)
	rec.Offset = off
	if !d.park(ctx, rec, &del, held) {
		tb.Fatalf("parking %s", eventID)
	}
	next, _, err := d.holds.get(ctx, lanes.TPOf(rec), string(rec.Key))
	if err != nil || next == nil {
		tb.Fatalf("hold of %s after parking: %v, %v", key, next, err)
	}
	return next
}

// drain releases a key whose head finished (held) and attempts the copies
// the release writes to the redeliveries topic as they come back, in
// order, as the deliverer's consumer does. It returns the key's next hold
// once the release ended: nil when the key is free, or the parked
// delivery that failed, the new head.
func (h *harness) drain(ctx context.Context, d *deliverer, key []byte, held *topics.Hold, rng *rand.Rand) (*topics.Hold, bool) {
	h.t.Helper()
	if !d.release(ctx, key, held, nil) {
		return nil, false
	}
	return h.attemptCopies(ctx, d, key, rng)
}

// attemptCopies attempts the copies of the key's parked deliveries that a
// release wrote to the redeliveries topic as they come back, in order, as
// the deliverer's consumer does, until the release ended (see drain).
func (h *harness) attemptCopies(ctx context.Context, d *deliverer, key []byte, rng *rand.Rand) (*topics.Hold, bool) {
	h.t.Helper()
	topic := h.names.Redeliveries()
	p := int32(topics.Partitioner().ForTopic(topic).Partition(&kgo.Record{Key: key}, 3))
	copies := newParkedReader(d.cl, topic)
	for {
		next, _, err := d.holds.get(ctx, lanes.TP{Topic: topic, Partition: p}, string(key))
		if err != nil || next == nil || next.ReleasingTo < 0 {
			return next, err == nil
		}
		recs, _, err := copies.fetch(ctx, p, h.released[p], scanBytes)
		if err != nil {
			return nil, false
		}
		for _, r := range recs {
			h.released[p] = r.Offset + 1
			if string(r.Key) != string(key) {
				continue
			}
			del, err := topics.DecodeDelivery(r.Value)
			if err != nil {
				h.t.Fatalf("a copy of a parked delivery: %v", err)
			}
			if !d.ordered(ctx, &lanes.Item{Rec: r, Sub: del.SubscriptionID}, &del, rng) {
				return nil, false
			}
		}
	}
}

// BenchmarkRelease releases 1,000 held keys of one subscription, each with
// one parked delivery, while 100,000 parked deliveries of other keys stand
// in the same parked partition after them. It reports keys released per
// second and parked records read per release.
func BenchmarkRelease(b *testing.B) {
	const keys, others = 1000, 100_000
	for range b.N {
		b.StopTimer()
		h := newHarness(b, nil)
		rc := newReceiver(b, nil)
		sub := newSub(b, "sub_a", rc.url())
		sub.Ordering = topics.OrderingKey
		h.putSub(sub)
		d := newReleaser(b, h)
		holds := make([]*topics.Hold, keys)
		for i := range keys {
			k := "k" + strconv.Itoa(i)
			holds[i] = h.park(b, d, heldKey(k), sub.ID, k, "evt_"+k, int64(i))
		}
		var filler []*kgo.Record
		for i := range others {
			del := newDelivery(sub.ID, fmt.Sprintf("evt_other_%d", i))
			filler = append(filler, &kgo.Record{Topic: h.names.Parked(), Key: []byte(sub.ID + "/other" + strconv.Itoa(i)), Value: del.Encode()})
			if len(filler) == 5000 {
				h.produce(filler...)
				filler = filler[:0]
			}
		}
		before := testutil.ToFloat64(d.m.parkedRead)
		rng := rand.New(rand.NewPCG(1, 2))
		ctx := context.Background()
		b.StartTimer()
		start := time.Now()
		for i, held := range holds {
			if next, ok := h.drain(ctx, d, []byte(sub.ID+"/k"+strconv.Itoa(i)), held, rng); !ok || next != nil {
				b.Fatalf("release of k%d: %v, %v", i, next, ok)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		if n := rc.count(); n != keys {
			b.Fatalf("the endpoint received %d deliveries, want %d", n, keys)
		}
		b.ReportMetric(float64(keys)/elapsed.Seconds(), "keys/s")
		b.ReportMetric((testutil.ToFloat64(d.m.parkedRead)-before)/keys, "records-read/release")
	}
}

// parkedFiller writes n parked deliveries of other keys of sub (the parked
// partition is the subscription's), as other held keys would.
func (h *harness) parkedFiller(sub string, n int) {
	h.t.Helper()
	var recs []*kgo.Record
	for i := range n {
		del := newDelivery(sub, fmt.Sprintf("evt_filler_%d", i))
		recs = append(recs, &kgo.Record{Topic: h.names.Parked(), Key: []byte(sub + "/filler" + strconv.Itoa(i%50)), Value: del.Encode()})
	}
	h.produce(recs...)
}

// receivedIDs are the webhook-ids the endpoint received, in order.
func receivedIDs(rc *receiver) []string {
	var ids []string
	for _, r := range rc.all() {
		ids = append(ids, r.id())
	}
	return ids
}

// orderedSetup is a releaser with one ordered subscription on rc.
func orderedSetup(t *testing.T, rc *receiver) (*harness, *deliverer, string) {
	h := newHarness(t, nil)
	sub := newSub(t, "sub_o", rc.url())
	sub.Ordering = topics.OrderingKey
	h.putSub(sub)
	return h, newReleaser(t, h), sub.ID
}

// TestReleaseReadsOnlyItsKey: a released key's parked deliveries are
// attempted in order, and the release reads those records only, however
// many other keys' parked records stand between and after them.
func TestReleaseReadsOnlyItsKey(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h, d, sub := orderedSetup(t, rc)
	held := heldKey("a")
	for i, id := range []string{"a1", "a2", "a3"} {
		h.parkedFiller(sub, 500)
		held = h.park(t, d, held, sub, "a", id, int64(i))
	}
	h.parkedFiller(sub, 500)
	before := testutil.ToFloat64(d.m.parkedRead)
	next, ok := h.drain(testCtx(t, 20*time.Second), d, []byte(sub+"/a"), held, rand.New(rand.NewPCG(1, 2)))
	if !ok || next != nil {
		t.Fatalf("drain = %v, %v; want the key released", next, ok)
	}
	if got := receivedIDs(rc); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("endpoint received %v, want a1, a2, a3", got)
	}
	if read := testutil.ToFloat64(d.m.parkedRead) - before; read != 3 {
		t.Fatalf("the release read %v parked records, want the key's 3 (2,000 others are parked around them)", read)
	}
}

// TestReleaseOfUnchainedParks: deliveries parked before the chain (no
// header, a hold without ParkedLast) are still released in order, by
// reading the partition; a delivery parked after them by this version
// keeps the hold unchained, so it is found the same way.
func TestReleaseOfUnchainedParks(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h, d, sub := orderedSetup(t, rc)
	var offsets []int64
	for _, id := range []string{"b1", "b2"} {
		h.parkedFiller(sub, 100)
		del := newDelivery(sub, id)
		del.Key = "b"
		r := &kgo.Record{Topic: h.names.Parked(), Key: []byte(sub + "/b"), Value: del.Encode()}
		h.produce(r)
		offsets = append(offsets, r.Offset)
	}
	// The hold as the previous version wrote it: no ParkedLast header.
	old := &topics.Hold{Head: "evt_head_b", HeadAttempt: 2, ParkedFrom: offsets[0], ParkedPartition: 0, Since: time.Now()}
	h.produce(&kgo.Record{Topic: h.names.Holds(), Key: []byte(sub + "/b"), Value: old.Encode()})
	decoded, err := topics.DecodeHold(old.Encode(), nil)
	if err != nil || decoded.ParkedLast != -1 {
		t.Fatalf("an old hold decodes as %+v, %v; want ParkedLast -1", decoded, err)
	}
	decoded.ParkedPartition = h.parkedPartition(sub)
	held := h.park(t, d, &decoded, sub, "b", "b3", 1)
	if held.ParkedLast != -1 {
		t.Fatalf("parked behind unchained deliveries, the hold has ParkedLast %d, want -1", held.ParkedLast)
	}
	h.parkedFiller(sub, 100)
	next, ok := h.drain(testCtx(t, 20*time.Second), d, []byte(sub+"/b"), held, rand.New(rand.NewPCG(1, 2)))
	if !ok || next != nil {
		t.Fatalf("drain = %v, %v; want the key released", next, ok)
	}
	if got := receivedIDs(rc); !slices.Equal(got, []string{"b1", "b2", "b3"}) {
		t.Fatalf("endpoint received %v, want b1, b2, b3", got)
	}
}

// TestParkRedoneAfterCrash: a delivery parked again after a crash between
// its parked record and its hold is released once, in order: the chain
// reaches the second copy only.
func TestParkRedoneAfterCrash(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h, d, sub := orderedSetup(t, rc)
	held := h.park(t, d, heldKey("c"), sub, "c", "c1", 0)
	// The crash: c2's parked record is written, the hold is not.
	del := newDelivery(sub, "c2")
	del.Key = "c"
	h.produce(&kgo.Record{Topic: h.names.Parked(), Key: []byte(sub + "/c"), Value: del.Encode(),
		Headers: []kgo.RecordHeader{topics.OffsetHeader(topics.HeaderParkedAfter, held.ParkedLast)}})
	held = h.park(t, d, held, sub, "c", "c2", 1) // redone by the next owner
	held = h.park(t, d, held, sub, "c", "c3", 2)
	next, ok := h.drain(testCtx(t, 20*time.Second), d, []byte(sub+"/c"), held, rand.New(rand.NewPCG(1, 2)))
	if !ok || next != nil {
		t.Fatalf("drain = %v, %v; want the key released", next, ok)
	}
	if got := receivedIDs(rc); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("endpoint received %v, want c1, c2, c3 once each", got)
	}
}

// TestReleaseStopsAtAFailure: a parked delivery that fails becomes the
// key's new head; the hold still reaches the deliveries parked after it,
// and the next release attempts exactly those.
func TestReleaseStopsAtAFailure(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("webhook-id") == "d2" && failed.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	h, d, sub := orderedSetup(t, rc)
	held := heldKey("d")
	for i, id := range []string{"d1", "d2", "d3", "d4"} {
		h.parkedFiller(sub, 50)
		held = h.park(t, d, held, sub, "d", id, int64(i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next, ok := h.drain(testCtx(t, 20*time.Second), d, []byte(sub+"/d"), held, rng)
	if !ok || next == nil || next.Head != "d2" || next.HeadAttempt != 2 || next.ParkedLast != held.ParkedLast {
		t.Fatalf("drain = %+v, %v; want d2 the head at attempt 2, the chain kept", next, ok)
	}
	next, ok = h.drain(testCtx(t, 20*time.Second), d, []byte(sub+"/d"), next, rng)
	if !ok || next != nil {
		t.Fatalf("second drain = %v, %v; want the key released", next, ok)
	}
	if got := receivedIDs(rc); !slices.Equal(got, []string{"d1", "d2", "d3", "d4"}) {
		t.Fatalf("endpoint received %v, want d1, d2 (failed), d3, d4", got)
	}
}

// TestHeadRedoneWhileReleasingIsNotRepeated (invariants 3 and 4): a head
// that succeeds has its outcome written with the hold that expects the
// copies of its parked deliveries before they are read and copied. Killed
// in between (here the copies are refused), the deliverer that redoes the
// head's record copies them, without sending the head's request again,
// and they are attempted in order.
func TestHeadRedoneWhileReleasingIsNotRepeated(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h, d, sub := orderedSetup(t, rc)
	held := heldKey("e")
	for i, id := range []string{"e1", "e2", "e3"} {
		held = h.park(t, d, held, sub, "e", id, int64(i))
	}
	key := []byte(sub + "/e")
	head := newDelivery(sub, held.Head)
	head.Key, head.Attempt = "e", held.HeadAttempt
	// The head's due retry, as the retrier releases it.
	rec := &kgo.Record{Topic: h.names.Redeliveries(), Key: key, Value: head.Encode()}
	h.produce(rec)
	rng := rand.New(rand.NewPCG(1, 2))

	refuse := h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: h.names.Redeliveries(),
		Err: kerr.NotEnoughReplicas, Count: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	done := d.ordered(ctx, &lanes.Item{Rec: rec, Sub: sub}, &head, rng)
	cancel()
	if done {
		t.Fatal("the head's record finished with its copies refused")
	}
	got, _, err := d.holds.get(testCtx(t, 10*time.Second), lanes.TPOf(rec), string(key))
	if err != nil || got == nil || got.Head != held.Head || got.ReleasingTo != held.ParkedLast || got.ParkedFrom != held.ParkedFrom {
		t.Fatalf("hold after the head succeeded = %+v, %v; want it releasing from %d to %d", got, err, held.ParkedFrom, held.ParkedLast)
	}
	refuse.Remove()

	next := newReleaser(t, h) // the deliverer that takes the partitions over
	ctx = testCtx(t, 20*time.Second)
	if !next.ordered(ctx, &lanes.Item{Rec: rec, Sub: sub}, &head, rng) {
		t.Fatal("the head's record redone did not finish")
	}
	if after, ok := h.attemptCopies(ctx, next, key, rng); !ok || after != nil {
		t.Fatalf("after the copies the hold is %+v (%v), want the key free", after, ok)
	}
	if got := receivedIDs(rc); !slices.Equal(got, []string{held.Head, "e1", "e2", "e3"}) {
		t.Fatalf("endpoint received %v, want the head once, then e1, e2, e3", got)
	}
}

// parkedPartition is the parked partition of sub's keys.
func (h *harness) parkedPartition(sub string) int32 {
	h.t.Helper()
	r := &kgo.Record{Topic: h.names.Parked(), Key: []byte(sub + "/probe")}
	h.produce(r)
	return r.Partition
}
