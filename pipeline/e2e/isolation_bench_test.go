package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkIsolation is the isolation figure of `make bench`: 20 healthy
// subscriptions, measured alone and next to a 21st whose endpoint always
// times out (it gets its share of the events, 1 in 21). Both are measured
// twice: with the lanes alone (no Redis: every delivery to the failing
// endpoint is attempted and times out), and as deployed by default, with
// Redis and its circuit breaker (default settings), which has a cost of
// its own, so it is compared with a healthy run that has Redis too.
// A fifth side has no failing endpoint but a storm of due retries: 20,000
// retry records of 5 other subscriptions (healthy endpoints, as after an
// outage) come due at once, at the start of the burst and again 2 s into
// the latency run; it is compared with the healthy run without Redis.
// Reported side by side: the healthy subscriptions' burst throughput and
// their p99 publish-to-receipt latency at a fixed rate.
//
// One run of each is too short to compare on a shared 2-core machine (a
// 1 s burst, a p99 of a few milliseconds), so the five alternate, three
// runs each, in the order ABCDEEDCBAABCDE, each on a fresh broker and
// pipeline stopped before the next starts; drift of the machine falls on
// all alike. Each side pools its runs: deliveries over the summed burst
// time, and the percentiles of all its latency samples.
func BenchmarkIsolation(b *testing.B) {
	srv := redistest.Start(b)
	sides := []struct {
		name                  string
		failing, redis, storm bool
		// base is the side a failing or storm side is compared with.
		base int
	}{
		{name: "alone"}, {name: "+1 failing", failing: true, base: 0},
		{name: "alone, Redis", redis: true}, {name: "+1, Redis", failing: true, redis: true, base: 2},
		{name: "+storm", storm: true, base: 0},
	}
	order := []int{0, 1, 2, 3, 4, 4, 3, 2, 1, 0, 0, 1, 2, 3, 4}
	for b.Loop() {
		res := make([]isolationResult, len(sides))
		runs := make([][]string, len(sides))
		for i, side := range order {
			redisURL := ""
			if sides[side].redis {
				redisURL = srv.URL()
			}
			r := isolationRun(b, sides[side].failing, sides[side].storm, redisURL, fmt.Sprintf("iso%d-%d:", time.Now().UnixNano(), i))
			res[side].delivered += r.delivered
			res[side].took += r.took
			res[side].lat = append(res[side].lat, r.lat...)
			res[side].stormDelivered += r.stormDelivered
			_, p99 := percentiles(r.lat)
			runs[side] = append(runs[side], fmt.Sprintf("%.0f/s %s", r.throughput(), p99.Round(100*time.Microsecond)))
		}
		p50s, p99s := make([]time.Duration, len(sides)), make([]time.Duration, len(sides))
		for i := range res {
			p50s[i], p99s[i] = percentiles(res[i].lat)
		}
		row := func(name string, f func(i int) string) {
			fmt.Fprintf(os.Stdout, "%-44s %12s %12s %12s %12s %12s\n", name, f(0), f(1), f(2), f(3), f(4))
		}
		// Each failing or storm side is compared with its healthy side.
		tr := func(i int) float64 { return res[i].throughput() / res[sides[i].base].throughput() }
		pr := func(i int) float64 { return float64(p99s[i]) / float64(p99s[sides[i].base]) }
		ratio := func(f func(int) float64) func(int) string {
			return func(i int) string {
				if !sides[i].failing && !sides[i].storm {
					return ""
				}
				return fmt.Sprintf("%.2f", f(i))
			}
		}
		fmt.Fprintln(os.Stdout)
		row(fmt.Sprintf("isolation: %d healthy, %d runs each", isoHealthy, len(order)/len(sides)), func(i int) string { return sides[i].name })
		row("healthy deliveries/s (burst)", func(i int) string { return fmt.Sprintf("%.0f", res[i].throughput()) })
		row(fmt.Sprintf("healthy p50 at %d events/s", isoRate), func(i int) string { return p50s[i].Round(100 * time.Microsecond).String() })
		row(fmt.Sprintf("healthy p99 at %d events/s", isoRate), func(i int) string { return p99s[i].Round(100 * time.Microsecond).String() })
		row("throughput ratio to alone (target >= 0.90)", ratio(tr))
		row("p99 ratio to alone (target <= 1.10)", ratio(pr))
		row(fmt.Sprintf("storm retries delivered (of %d)", len(order)/len(sides)*2*isoStorm), func(i int) string {
			if !sides[i].storm {
				return ""
			}
			return fmt.Sprint(res[i].stormDelivered)
		})
		for i, side := range sides {
			fmt.Fprintf(os.Stdout, "runs %-12s (burst, p99): %s\n", side.name, strings.Join(runs[i], ", "))
		}
		b.ReportMetric(tr(1), "throughput-ratio")
		b.ReportMetric(pr(1), "p99-ratio")
		b.ReportMetric(tr(3), "throughput-ratio-redis")
		b.ReportMetric(pr(3), "p99-ratio-redis")
		b.ReportMetric(tr(4), "throughput-ratio-storm")
		b.ReportMetric(pr(4), "p99-ratio-storm")
	}
}

const (
	isoHealthy = 20
	isoBurst   = 31500 // events, a multiple of 21: 30000 healthy deliveries
	isoRate    = 1000  // events/s for the latency run
	isoLatency = 10 * time.Second
	// The storm: retry records of isoStormSubs subscriptions, all due at
	// once.
	isoStorm     = 20000
	isoStormSubs = 5
)

// isolationResult is what runs measured of the healthy subscriptions: the
// burst's deliveries and how long they took, and the latency samples.
type isolationResult struct {
	delivered int
	took      time.Duration
	lat       []time.Duration
	// stormDelivered counts the storm's retries delivered by the end of
	// the run (a run with a storm lets it drain before it ends).
	stormDelivered int
}

func (r isolationResult) throughput() float64 { return float64(r.delivered) / r.took.Seconds() }

// isolationRun is one run on a fresh broker and pipeline, stopped when it
// returns; with a Redis URL, endpoint protection is on, its keys under
// prefix. With storm, a storm of due retries hits the burst and the latency
// run.
func isolationRun(b *testing.B, withFailing, storm bool, redisURL, prefix string) isolationResult {
	e := newEnv(b)
	defer e.close()
	if redisURL != "" {
		e.withRedis(redisURL, prefix, nil)
	}
	r := newReceiver(b)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if q.Sub == "failing" {
			// Hang until the deliverer's timeout cuts the request.
			time.Sleep(3 * time.Second)
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	n := isoHealthy
	if withFailing {
		n++
	}
	for i := range n {
		id := fmt.Sprintf("healthy-%02d", i)
		if i == isoHealthy {
			id = "failing"
		}
		s := topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{fmt.Sprintf("iso.t%d", i)},
			Enabled: true, TimeoutMS: 1000}
		r.trust(e.subscribe(s))
	}
	var stormSubs []topics.Subscription
	if storm {
		for i := range isoStormSubs {
			id := fmt.Sprintf("storm-%d", i)
			s := topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{"iso.storm"}, Enabled: true, TimeoutMS: 1000}
			r.trust(e.subscribe(s))
			stormSubs = append(stormSubs, s)
		}
	}
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	event := func(i int) topics.Event {
		return topics.Event{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), i), Type: fmt.Sprintf("iso.t%d", i%21),
			CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(`{"pad":"` + strings.Repeat("x", 500) + `"}`)}
	}
	// count counts the deliveries to subscriptions whose id has prefix.
	count := r.accepted
	healthyCount := func() int { return count("healthy-") }
	stormCount := func() int { return count("storm-") }
	hit := func(due time.Time) {
		if storm {
			produceStorm(b, e, stormSubs, isoStorm, due)
		}
	}
	// Warm up, then the burst: healthy deliveries per second.
	publishAsync(b, e, 210, event)
	wait(b, 120*time.Second, "warm-up", func() bool { return healthyCount() >= 200 })
	base := healthyCount()
	hit(time.Now().Add(500 * time.Millisecond))
	start := time.Now()
	publishAsync(b, e, isoBurst, event)
	want := isoBurst * isoHealthy / 21
	wait(b, 300*time.Second, "the burst's healthy deliveries", func() bool { return healthyCount() >= base+want })
	took := time.Since(start)
	// Latency at a fixed rate.
	before := len(r.got())
	if storm {
		wait(b, 120*time.Second, "the first storm", func() bool { return stormCount() >= isoStorm })
		hit(time.Now().Add(2 * time.Second))
	}
	sent := publishAtRate(b, e, isoRate, isoLatency, event)
	wantLat := sent * isoHealthy / 21
	wait(b, 120*time.Second, "the latency run's healthy deliveries", func() bool { return healthyCount() >= base+want+wantLat-isoHealthy })
	if storm {
		wait(b, 120*time.Second, "the second storm", func() bool { return stormCount() >= 2*isoStorm })
	}
	var lat []request
	for _, q := range r.got()[before:] {
		if strings.HasPrefix(q.Sub, "healthy-") {
			lat = append(lat, q)
		}
	}
	return isolationResult{delivered: want, took: took, lat: durations(lat), stormDelivered: stormCount()}
}

// produceStorm writes n retry records, spread over subs, to the shortest
// tier, all due at due: what an outage of those endpoints leaves behind.
// They are attempt 2 of events first attempted a minute ago.
func produceStorm(b *testing.B, e *env, subs []topics.Subscription, n int, due time.Time) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(topics.Partitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	tier := e.names.Retry(e.names.Tiers[0])
	first := time.Now().Add(-time.Minute).UTC()
	data := json.RawMessage(`{"pad":"` + strings.Repeat("x", 500) + `"}`)
	var errs atomic.Int64
	for i := range n {
		s := subs[i%len(subs)]
		ev := topics.Event{ID: fmt.Sprintf("storm_%d_%d", due.UnixNano(), i), Type: "iso.storm"}
		d := topics.Delivery{SubscriptionID: s.ID, EventID: ev.ID, EventType: ev.Type, Timestamp: first.Format(time.RFC3339Nano),
			Data: data, Attempt: 2, PublishedAt: first, FirstAttemptAt: first, NotBefore: due}
		cl.Produce(context.Background(), &kgo.Record{Topic: tier, Key: []byte(s.DeliveryKey(&ev)), Value: d.Encode(),
			Headers: []kgo.RecordHeader{topics.NotBeforeHeader(due)}}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil || errs.Load() > 0 {
		b.Fatalf("producing the storm: %v (%d failed)", err, errs.Load())
	}
}
