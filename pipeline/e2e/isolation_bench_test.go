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
// subscriptions, measured alone and next to a 21st whose endpoint always
// times out (it gets its share of the events, 1 in 21). Reported side by
// side: the healthy subscriptions' burst throughput and their p99
// publish-to-receipt latency at a fixed rate.
//
// One run of each is too short to compare on a shared 2-core machine (a
// 1 s burst, a p99 of a few milliseconds), so the two alternate, alone and
// with the failing one, in the order ABBAAB, each on a fresh broker and
// pipeline stopped before the next starts; drift of the machine falls on
// both alike. Each side pools its runs: deliveries over the summed burst
// time, and the percentiles of all its latency samples.
func BenchmarkIsolation(b *testing.B) {
	order := []bool{false, true, true, false, false, true}
	for b.Loop() {
		var sides [2]isolationResult
		var runs [2][]string
		for _, withFailing := range order {
			r := isolationRun(b, withFailing)
			i := 0
			if withFailing {
				i = 1
			}
			sides[i].delivered += r.delivered
			sides[i].took += r.took
			sides[i].lat = append(sides[i].lat, r.lat...)
			_, p99 := percentiles(r.lat)
			runs[i] = append(runs[i], fmt.Sprintf("%.0f/s %s", r.throughput(), p99.Round(100*time.Microsecond)))
		}
		alone, next := sides[0], sides[1]
		ap50, ap99 := percentiles(alone.lat)
		np50, np99 := percentiles(next.lat)
		tr, pr := next.throughput()/alone.throughput(), float64(np99)/float64(ap99)
		fmt.Fprintf(os.Stdout, "\n%-58s %12s %12s\n", fmt.Sprintf("isolation: %d healthy subscriptions, %d runs each", isoHealthy, len(order)/2), "alone", "+1 failing")
		fmt.Fprintf(os.Stdout, "%-58s %12.0f %12.0f\n", "healthy deliveries/s (burst)", alone.throughput(), next.throughput())
		fmt.Fprintf(os.Stdout, "%-58s %12s %12s\n", fmt.Sprintf("healthy p50 at %d events/s", isoRate), ap50.Round(100*time.Microsecond), np50.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-58s %12s %12s\n", fmt.Sprintf("healthy p99 at %d events/s", isoRate), ap99.Round(100*time.Microsecond), np99.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-58s %12.2f\n", "throughput ratio (+1 failing / alone; target >= 0.90)", tr)
		fmt.Fprintf(os.Stdout, "%-58s %12.2f\n", "p99 ratio (+1 failing / alone; target <= 1.10)", pr)
		fmt.Fprintf(os.Stdout, "runs alone (burst, p99):      %s\n", strings.Join(runs[0], ", "))
		fmt.Fprintf(os.Stdout, "runs +1 failing (burst, p99): %s\n", strings.Join(runs[1], ", "))
		b.ReportMetric(tr, "throughput-ratio")
		b.ReportMetric(pr, "p99-ratio")
		b.ReportMetric(float64(np99.Microseconds())/1000, "p99-ms-with-failing")
	}
}

const (
	isoHealthy = 20
	isoBurst   = 31500 // events, a multiple of 21: 30000 healthy deliveries
	isoRate    = 1000  // events/s for the latency run
	isoLatency = 10 * time.Second
)

// isolationResult is what runs measured of the healthy subscriptions: the
// burst's deliveries and how long they took, and the latency samples.
type isolationResult struct {
	delivered int
	took      time.Duration
	lat       []time.Duration
}

func (r isolationResult) throughput() float64 { return float64(r.delivered) / r.took.Seconds() }

// isolationRun is one run on a fresh broker and pipeline, stopped when it
// returns.
func isolationRun(b *testing.B, withFailing bool) isolationResult {
	e := newEnv(b)
	defer e.close()
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
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	event := func(i int) topics.Event {
		return topics.Event{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), i), Type: fmt.Sprintf("iso.t%d", i%21),
			CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(`{"pad":"` + strings.Repeat("x", 500) + `"}`)}
	}
	healthyCount := func() int {
		c := 0
		for _, q := range r.got() {
			if q.Sub != "failing" {
				c++
			}
		}
		return c
	}
	// Warm up, then the burst: healthy deliveries per second.
	publishAsync(b, e, 210, event)
	wait(b, 120*time.Second, "warm-up", func() bool { return healthyCount() >= 200 })
	base := healthyCount()
	start := time.Now()
	publishAsync(b, e, isoBurst, event)
	want := isoBurst * isoHealthy / 21
	wait(b, 300*time.Second, "the burst's healthy deliveries", func() bool { return healthyCount() >= base+want })
	took := time.Since(start)
	// Latency at a fixed rate.
	before := len(r.got())
	sent := publishAtRate(b, e, isoRate, isoLatency, event)
	wantLat := sent * isoHealthy / 21
	wait(b, 120*time.Second, "the latency run's healthy deliveries", func() bool { return healthyCount() >= base+want+wantLat-isoHealthy })
	var lat []request
	for _, q := range r.got()[before:] {
		if q.Sub != "failing" {
			lat = append(lat, q)
		}
	}
	return isolationResult{delivered: want, took: took, lat: durations(lat)}
}
