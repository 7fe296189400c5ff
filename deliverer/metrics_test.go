package deliverer

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

// TestMetricsCountOnAck: the deliveries, retries and dead-letter counters
// count a record once the broker acknowledged it, not when it was built: a
// produce the broker refused counts nothing (the delivery is redone and
// counts then), and the records of both produce paths count once.
func TestMetricsCountOnAck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// Every produce is refused with an error the client does not retry.
	refuse := h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: -1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(topics.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	d := &deliverer{cl: cl, names: h.names, m: newMetrics(ops.NewRegistry(), h.names), fatal: make(chan error, 1)}
	ctx := testCtx(t, 30*time.Second)

	counts := func() [3]float64 {
		return [3]float64{
			testutil.ToFloat64(d.m.deliveries.WithLabelValues(topics.OutcomeBlocked)),
			testutil.ToFloat64(d.m.retries.WithLabelValues(topics.FormatDelay(h.names.Tiers[0]))),
			testutil.ToFloat64(d.m.dlq.WithLabelValues(topics.FailureInvalid)),
		}
	}
	build := func() []*kgo.Record {
		del := newDelivery("sub_a", "evt_1")
		recs := d.spill(context.Background(), &kgo.Record{Key: []byte("sub_a/k")}, &del, 0)
		return append(recs, d.deadLetter(context.Background(), &kgo.Record{Topic: h.names.Deliveries()}, topics.DeadLetter{
			Delivery: &del, FailureCategory: topics.FailureInvalid,
		}, time.Now()))
	}

	recs := build()
	if got := counts(); got != [3]float64{} {
		t.Fatalf("counted %v when built, before any produce", got)
	}
	if d.produce(ctx, recs) {
		t.Fatal("the refused produce succeeded")
	}
	if got := counts(); got != [3]float64{} {
		t.Fatalf("counted %v for records the broker refused", got)
	}
	if err := <-d.fatal; err == nil {
		t.Fatal("the refused produce was not reported as fatal")
	}

	refuse.Remove()
	if !d.produce(ctx, build()) {
		t.Fatal("produce failed once the broker accepts")
	}
	if got, want := counts(), [3]float64{1, 1, 1}; got != want {
		t.Fatalf("counted %v after the acknowledged produce, want %v", got, want)
	}
	done := make(chan bool, 1)
	d.produceThen(ctx, build(), func(ok bool) { done <- ok })
	if !<-done {
		t.Fatal("produceThen failed")
	}
	if got, want := counts(), [3]float64{2, 2, 2}; got != want {
		t.Fatalf("counted %v after the second acknowledged produce, want %v", got, want)
	}
}
