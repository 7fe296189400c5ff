package deliverer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/send"
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

// TestResponsesByClass: each request counts once on its response class.
func TestResponsesByClass(t *testing.T) {
	t.Parallel()
	d := &deliverer{m: newMetrics(ops.NewRegistry(), topics.Names{})}
	failed := errors.New("connection refused")
	for _, c := range []struct {
		status int
		err    error
		class  string
	}{
		{200, nil, "2xx"}, {204, nil, "2xx"}, {301, nil, "3xx"}, {404, nil, "4xx"}, {503, nil, "5xx"},
		{0, failed, "error"}, {502, failed, "error"}, {102, nil, "error"}, {600, nil, "error"}, {0, nil, "acked"},
	} {
		before := testutil.ToFloat64(d.m.responses.WithLabelValues(c.class))
		if _, err := d.metered(context.Background(), func() (send.Response, error) {
			return send.Response{Status: c.status}, c.err
		}); !errors.Is(err, c.err) {
			t.Fatalf("metered returned %v, want %v", err, c.err)
		}
		if got := testutil.ToFloat64(d.m.responses.WithLabelValues(c.class)) - before; got != 1 {
			t.Errorf("status %d, error %v: class %s counted %v times, want once", c.status, c.err, c.class, got)
		}
	}
	if got := testutil.CollectAndCount(d.m.responses); got != len(responseClasses) {
		t.Errorf("%d response series, want one a class (%d)", got, len(responseClasses))
	}
}

// BenchmarkMetered is what metering adds to a request and to its attempt
// record (tallied when built, counted when acknowledged).
func BenchmarkMetered(b *testing.B) {
	d := &deliverer{m: newMetrics(ops.NewRegistry(), topics.Names{})}
	ctx := context.Background()
	request := func() (send.Response, error) { return send.Response{Status: 204, Duration: time.Millisecond}, nil }
	b.ReportAllocs()
	for b.Loop() {
		_, _ = d.metered(ctx, request)
		d.m.acked(d.m.tallied(&kgo.Record{}, outcomes, topics.OutcomeSuccess))
	}
}
