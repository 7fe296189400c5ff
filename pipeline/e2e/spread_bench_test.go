package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// hotBurst is the events of each BenchmarkHotSubscription row.
const hotBurst = 20000

// BenchmarkHotSubscription (ADR 0020): a burst of 20,000 events to one
// subscription, the dispatcher and the deliverers as separate processes,
// with the subscription on one partition and one deliverer, spread over
// four partitions with one deliverer, and spread with two (a retrier
// brings back what spills). Each row reports deliveries per second, the
// deliveries spilled on the way (subscription_busy), and the most requests
// the endpoint saw at once, which the shared in-flight cap (64) bounds in
// every row. The endpoint answers at once, so the deliverers' own work
// bounds a row; on a machine with few cores, two deliverers share them.
func BenchmarkHotSubscription(b *testing.B) {
	bin := binaries(b)
	for b.Loop() {
		row := func(name, v string) { fmt.Fprintf(os.Stdout, "%-58s %14s\n", name, v) }
		fmt.Fprintln(os.Stdout)
		row(fmt.Sprintf("hot subscription, burst of %d, cap 64", hotBurst), "deliveries/s, spilled, peak in flight")
		for _, tc := range []struct {
			name       string
			partitions int
			deliverers int
		}{
			{"one partition, one deliverer", 1, 1},
			{"four partitions, one deliverer", 4, 1},
			{"four partitions, two deliverers", 4, 2},
		} {
			rate, spilled, peak := hotRun(b, bin, tc.partitions, tc.deliverers)
			row("  "+tc.name, fmt.Sprintf("%.0f, %d, %d", rate, spilled, peak))
			b.ReportMetric(rate, "deliveries/s-p"+strconv.Itoa(tc.partitions)+"-d"+strconv.Itoa(tc.deliverers))
		}
	}
}

// hotRun delivers a burst to one subscription spread over partitions, with
// that many deliverer processes, and returns deliveries per second, the
// deliveries spilled and the endpoint's peak concurrency.
func hotRun(b *testing.B, bin string, partitions, deliverers int) (rate float64, spilled, peak int) {
	e := newEnv(b)
	defer e.close()
	r := newReceiver(b)
	r.answer(func(request, http.ResponseWriter) int { return http.StatusNoContent })
	r.trust(e.subscribe(topics.Subscription{ID: "hot", URL: r.url("hot"), EventTypes: []string{"*"}, Enabled: true,
		Partitions: partitions}))
	procs := []*stack.Process{e.startProc(filepath.Join(bin, "dispatcher"), "dispatcher"),
		e.startProc(filepath.Join(bin, "retrier"), "retrier")}
	for i := range deliverers {
		procs = append(procs, e.startProcWith(filepath.Join(bin, "deliverer"), fmt.Sprintf("deliverer-%d", i),
			map[string]string{config.EnvHTTPAddr: testkit.FreeAddr(b)}))
	}
	defer func() { // before the broker closes, so the next row has the machine
		for _, p := range procs {
			_ = p.Stop(30 * time.Second)
		}
	}()
	e.waitDeliverers(deliverers)
	event := func(i int) topics.Event {
		return topics.Event{ID: fmt.Sprintf("evt_%d", i), Type: "hot.burst", Key: fmt.Sprintf("k%d", i%500),
			Data: json.RawMessage(`{"n":1}`)}
	}
	publishKeyed(b, e, 100, event) // warm-up: connections open
	wait(b, 120*time.Second, "warm-up", func() bool { return r.count() >= 100 })
	start := time.Now()
	publishKeyed(b, e, hotBurst, func(i int) topics.Event { return event(100 + i) })
	wait(b, 300*time.Second, "the burst", func() bool { return r.count() >= 100+hotBurst })
	rate = float64(hotBurst) / time.Since(start).Seconds()
	spilled = spills(b, e, "hot", 100+hotBurst)
	r.mu.Lock()
	defer r.mu.Unlock()
	return rate, spilled, r.maxFlight
}
