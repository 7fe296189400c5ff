package deliverer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

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
		m: newMetrics(ops.NewRegistry(), cfg.Kafka.Names)}
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
	if d.cl, err = kgo.NewClient(base...); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cancel(); d.cl.Close(); d.table.Close(); holdTable.Close() })
	if err := d.table.WaitCaughtUp(testCtx(tb, 10*time.Second)); err != nil {
		tb.Fatal(err)
	}
	return d
}

// heldKey is a key of an ordered subscription whose head delivery waits in
// a retry tier.
func heldKey(key string) *topics.Hold {
	return &topics.Hold{Head: "evt_head_" + key, HeadAttempt: 2, ParkedFrom: -1, Through: -1, Since: time.Now()}
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
	next, err := d.holds.get(ctx, lanes.TPOf(rec), string(rec.Key))
	if err != nil || next == nil {
		tb.Fatalf("hold of %s after parking: %v, %v", key, next, err)
	}
	return next
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
			if next, ok := d.drain(ctx, []byte(sub.ID+"/k"+strconv.Itoa(i)), held, rng); !ok || next != nil {
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
