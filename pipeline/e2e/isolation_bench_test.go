package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkIsolation is the isolation figure of `make bench`: 20 healthy
// subscriptions, measured alone and then next to a 21st whose endpoint
// always times out (it gets its share of the events, 1 in 21). Reported
// side by side: the healthy subscriptions' burst throughput and their p99
// publish-to-receipt latency at a fixed rate.
func BenchmarkIsolation(b *testing.B) {
	const (
		healthy = 20
		burst   = 10500 // events, a multiple of 21
		rate    = 1000  // events/s for the latency run
		dur     = 5 * time.Second
	)
	for b.Loop() {
		type result struct {
			throughput float64
			p50, p99   time.Duration
		}
		run := func(withFailing bool) result {
			e := newEnv(b)
			r := newReceiver(b)
			r.answer(func(q request, _ http.ResponseWriter) int {
				if q.Sub == "failing" {
					// Hang until the deliverer's timeout cuts the request.
					time.Sleep(3 * time.Second)
					return http.StatusServiceUnavailable
				}
				return http.StatusNoContent
			})
			n := healthy
			if withFailing {
				n++
			}
			for i := range n {
				id := fmt.Sprintf("healthy-%02d", i)
				if i == healthy {
					id = "failing"
				}
				s := topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{fmt.Sprintf("iso.t%d", i)},
					Enabled: true, TimeoutMS: 1000}
				r.trust(e.subscribe(s))
			}
			e.startDispatcher()
			e.startDeliverer()
			e.startRetrier()
			event := func(i int) topics.Event {
				return topics.Event{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), i), Type: fmt.Sprintf("iso.t%d", i%21),
					CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(`{"pad":"` + strings.Repeat("x", 500) + `"}`)}
			}
			// Warm up, then the burst: healthy deliveries per second.
			healthyCount := func() int {
				c := 0
				for _, q := range r.got() {
					if q.Sub != "failing" {
						c++
					}
				}
				return c
			}
			publishAsync(b, e, 210, event)
			wait(b, 120*time.Second, "warm-up", func() bool { return healthyCount() >= 200 })
			base := healthyCount()
			start := time.Now()
			publishAsync(b, e, burst, event)
			want := burst * healthy / 21
			wait(b, 300*time.Second, "the burst's healthy deliveries", func() bool { return healthyCount() >= base+want })
			tp := float64(want) / time.Since(start).Seconds()
			// Latency at a fixed rate.
			before := len(r.got())
			sent := publishAtRate(b, e, rate, dur, event)
			wantLat := sent * healthy / 21
			wait(b, 120*time.Second, "the latency run's healthy deliveries", func() bool { return healthyCount() >= base+want+wantLat-healthy })
			var lat []request
			for _, q := range r.got()[before:] {
				if q.Sub != "failing" {
					lat = append(lat, q)
				}
			}
			p50, p99 := latencies(lat)
			return result{tp, p50, p99}
		}
		alone := run(false)
		next := run(true)
		fmt.Fprintf(os.Stdout, "\n%-58s %12s %12s\n", "isolation: 20 healthy subscriptions", "alone", "+1 failing")
		fmt.Fprintf(os.Stdout, "%-58s %12.0f %12.0f\n", "healthy deliveries/s (burst)", alone.throughput, next.throughput)
		fmt.Fprintf(os.Stdout, "%-58s %12s %12s\n", fmt.Sprintf("healthy p50 at %d events/s", rate), alone.p50.Round(100*time.Microsecond), next.p50.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-58s %12s %12s\n", fmt.Sprintf("healthy p99 at %d events/s", rate), alone.p99.Round(100*time.Microsecond), next.p99.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-58s %12.2f\n", "throughput ratio (+1 failing / alone; target >= 0.90)", next.throughput/alone.throughput)
		fmt.Fprintf(os.Stdout, "%-58s %12.2f\n", "p99 ratio (+1 failing / alone; target <= 1.10)", float64(next.p99)/float64(alone.p99))
		b.ReportMetric(next.throughput/alone.throughput, "throughput-ratio")
		b.ReportMetric(float64(next.p99)/float64(alone.p99), "p99-ratio")
		b.ReportMetric(float64(next.p99.Microseconds())/1000, "p99-ms-with-failing")
	}
}
