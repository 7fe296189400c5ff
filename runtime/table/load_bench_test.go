package table

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTableLoad: a replica's subscription table built from a topic of
// n subscriptions (realistic values: sealed secret, tenant, two event
// types, a header): the time to catch up, the live heap per 1,000
// subscriptions once caught up, and the time to apply one more change at
// that size. WEBHOOKS_BENCH_SUBSCRIPTIONS picks n (default 100,000).
func BenchmarkTableLoad(b *testing.B) {
	n := 100_000
	if v := benchSubscriptions(); v > 0 {
		n = v
	}
	e := newTableEnv(b, 1)
	keys := testKeys(b)
	secret := mustSecret(b)
	// The first 1,000 belong to tenant "big" and take invoice.paid; every
	// other takes customer.created and order.<i>.* for one of 5,000
	// tenants.
	tenantOf := func(i int) string {
		if i < 1000 {
			return "big"
		}
		return "tenant-" + strconv.Itoa(i%5000)
	}
	value := func(i int) []byte {
		s := topics.Subscription{
			ID: "sub_" + strconv.Itoa(i), Tenant: tenantOf(i),
			URL:        "https://hooks.customer-" + strconv.Itoa(i) + ".example.com/webhooks/incoming",
			EventTypes: []string{"customer.created", "order." + strconv.Itoa(i) + ".*"}, Enabled: true, Secret: secret,
			CreatedAt: time.Unix(1_790_000_000, 0).UTC(), UpdatedAt: time.Unix(1_790_000_000, 0).UTC(),
		}
		if i < 1000 {
			s.EventTypes = []string{"invoice.paid"}
		}
		return s.EncodeWith(keys)
	}
	ctx := testCtx(b, 10*time.Minute)
	for i := 0; i < n; i++ {
		e.cl.Produce(ctx, &kgo.Record{Topic: e.topic, Key: []byte("sub_" + strconv.Itoa(i)), Value: value(i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Errorf("produce: %v", err)
			}
		})
	}
	if err := e.cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		before := heapLive()
		tbl := e.newTable(b)
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); tbl.Run(runCtx) }()
		if err := tbl.WaitCaughtUp(ctx); err != nil {
			b.Fatal(err)
		}
		caughtUp := time.Since(start)
		if tbl.Len() != n {
			b.Fatalf("table holds %d subscriptions, want %d", tbl.Len(), n)
		}
		live := heapLive() - before
		start = time.Now()
		const changes = 20
		for i := 0; i < changes; i++ {
			e.put(b, "sub_"+strconv.Itoa(i), value(i))
			if err := tbl.WaitCaughtUp(ctx); err != nil {
				b.Fatal(err)
			}
		}
		perChange := time.Since(start) / changes
		matchOne := timeMatch(b, tbl, &topics.Event{ID: "evt_1", Type: "order." + strconv.Itoa(n-1) + ".paid", Tenant: tenantOf(n - 1)}, 1)
		matchMany := timeMatch(b, tbl, &topics.Event{ID: "evt_2", Type: "invoice.paid", Tenant: "big"}, 1000)
		b.ReportMetric(float64(matchOne.Nanoseconds()), "ns/match-1")
		b.ReportMetric(float64(matchMany.Nanoseconds()), "ns/match-1000")
		b.ReportMetric(caughtUp.Seconds(), "s-to-catch-up")
		b.ReportMetric(float64(live)/float64(n)*1000/(1<<20), "MB-live/1000subs")
		b.ReportMetric(float64(perChange.Microseconds())/1000, "ms/change")
		cancel()
		<-done
		tbl.Close()
		runtime.KeepAlive(tbl)
		fmt.Fprintf(b.Output(), "%d subscriptions: caught up in %s, %.2f MB live per 1,000, a change applied in %s, "+
			"an event matched to 1 in %s, to 1,000 in %s\n",
			n, caughtUp.Round(time.Millisecond), float64(live)/float64(n)*1000/(1<<20), perChange.Round(time.Microsecond),
			matchOne, matchMany)
	}
}

// heapLive is the live heap after a full collection.
func heapLive() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// benchSubscriptions is WEBHOOKS_BENCH_SUBSCRIPTIONS, 0 when unset.
func benchSubscriptions() int {
	n, _ := strconv.Atoi(os.Getenv("WEBHOOKS_BENCH_SUBSCRIPTIONS"))
	return n
}

// timeMatch is the mean time of Match for e, checked to find want
// subscriptions.
func timeMatch(b *testing.B, tbl *Table, e *topics.Event, want int) time.Duration {
	if got := len(tbl.Match(e)); got != want {
		b.Fatalf("%s of tenant %s matched %d subscriptions, want %d", e.Type, e.Tenant, got, want)
	}
	const rounds = 2000
	start := time.Now()
	for range rounds {
		tbl.Match(e)
	}
	return time.Since(start) / rounds
}
