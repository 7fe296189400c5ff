package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// BenchmarkInFlightCap weighs the deliverer's in-flight cap
// (WEBHOOKS_DELIVERER_MAX_IN_FLIGHT, ADR 0029 amended): a record holds a
// slot until a commit covers it, so the requests that can run are the cap
// less the records waiting for a commit. As deployed (startFourDeployed:
// kfake in a process of its own, four subscriptions on a receiver process,
// each allowed its default 64 requests at once), a warm-up burst of 20,000
// events, then a burst of 80,000, with the cap at 256 and at 1,024 by
// turns, three rounds: this machine's speed drifts by a third within
// minutes, so only turns taken close together compare. Each turn reports
// its deliveries a second and the broker's and deliverer's CPU a delivery;
// the table, each cap's median rate.
func BenchmarkInFlightCap(b *testing.B) {
	const burst, rounds = 80000, 3
	caps := []int{256, 1024}
	redis := redistest.Start(b)
	rates := map[int][]float64{}
	for round := range rounds {
		for _, cp := range caps {
			b.Run(fmt.Sprintf("round=%d/cap=%d", round+1, cp), func(b *testing.B) {
				for b.Loop() {
					e, broker := newEnvBrokerProcess(b)
					f := startFourDeployed(b, e, redis.URL(), "cap", broker.Pid(),
						map[string]string{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT": strconv.Itoa(cp)})
					publishKeyed(b, e, depBurst, f.event)
					wait(b, 120*time.Second, "the warm-up burst", func() bool { return f.r.count() >= depBurst })
					cpu, from, start := cpuTimes(b, f.procs), f.r.count(), time.Now()
					publishKeyed(b, e, burst, f.event)
					wait(b, 300*time.Second, "the burst", func() bool { return f.r.count() >= from+burst })
					rate := float64(burst) / time.Since(start).Seconds()
					used := cpuTimes(b, f.procs)
					per := func(name string) float64 {
						i := slices.IndexFunc(f.procs, func(p cpuOf) bool { return p.name == name })
						return float64((used[i]-cpu[i])/burst) / float64(time.Microsecond)
					}
					rates[cp] = append(rates[cp], rate)
					b.ReportMetric(rate, "deliveries/s")
					b.ReportMetric(per("broker"), "broker-cpu-us")
					b.ReportMetric(per("deliverer"), "deliverer-cpu-us")
				}
			})
		}
	}
	fmt.Fprintln(os.Stdout)
	for _, cp := range caps {
		r := slices.Sorted(slices.Values(rates[cp]))
		if len(r) > 0 {
			fmt.Fprintf(os.Stdout, "in-flight cap %4d: median %6.0f deliveries/s of %d bursts of %d (%.0f to %.0f)\n",
				cp, r[len(r)/2], len(r), burst, r[0], r[len(r)-1])
		}
	}
}
