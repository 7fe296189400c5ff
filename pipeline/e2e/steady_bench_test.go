package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// BenchmarkSteadyOnApache is what a steady flow of events costs on Apache
// Kafka, whose brokers spend far more on each request than kfake: the
// dispatcher, deliverer and retrier as processes, one broker of its own,
// four subscriptions on a receiver process, events every 10 ms at 200 and
// at 1,000 a second for 10 s, two runs each. Rows for each run: the
// dispatcher's transactions, p50 and p99 publish-to-receipt, the CPU a
// delivery of the broker, dispatcher and deliverer, the requests the broker
// served a delivery (all of them, and each API above 0.01), and the share
// of the broker's CPU its JIT compiler took.
//
// The broker is warmed first: a burst, then 10-second rounds at 1,000
// events a second until its JIT compiler took under a tenth of its CPU in
// a round (warmUp; the table says how many it took).
// Runs with WEBHOOKS_BENCH_APACHE (make bench).
func BenchmarkSteadyOnApache(b *testing.B) {
	if os.Getenv(envBenchApache) == "" {
		b.Skip(envBenchApache + " not set (make bench sets it; services.sh install-kafka first)")
	}
	redis := redistest.Start(b)
	for b.Loop() {
		k := startOwnKafka(b)
		jmx := testkit.FreePorts(b, 1)
		e := newEnvOn(b, k.brokers(), func() {}, nil)
		f := startFourDeployed(b, e, redis.URL(), "steady", k.pid(), nil)
		r, ops, procs, event := f.r, f.ops, f.procs, f.event
		publishKeyed(b, e, depBurst, event)
		wait(b, 300*time.Second, "the warm-up burst", func() bool { return r.count() >= depBurst })

		// run publishes at rate for 10 s and returns its row.
		run := func(rate int) steadyRun {
			reqs, jit, cpu, txns := k.requests(b, jmx), k.jitCPU(b), cpuTimes(b, procs), transactions(b, ops)
			from := r.count()
			n := publishEvery(b, e, rate, 10*time.Second, 10*time.Millisecond, event)
			wait(b, 120*time.Second, fmt.Sprintf("the run at %d/s", rate), func() bool { return r.count() >= from+n })
			out := steadyRun{rate: rate, deliveries: n, transactions: transactions(b, ops) - txns, requests: map[string]float64{}}
			out.p50, out.p99 = latencies(r.got(from))
			for i, t := range cpuTimes(b, procs) {
				if procs[i].name != "retrier" {
					out.cpu = append(out.cpu, (t-cpu[i])/time.Duration(n))
				}
			}
			out.jit = max(0, float64(k.jitCPU(b)-jit)/float64(out.cpu[0]*time.Duration(n)))
			for api, c := range k.requests(b, jmx) {
				if d := float64(c-reqs[api]) / float64(n); d > 0 {
					out.requests[api] = d
				}
			}
			return out
		}
		rounds := k.warmUp(b, func() { run(1000) })
		var runs []steadyRun
		for _, rate := range []int{200, 200, 1000, 1000} {
			runs = append(runs, run(rate))
		}
		fmt.Fprintf(os.Stdout, "\nApache Kafka %s, warmed by a burst of %d and %d rounds of 10 s at 1,000/s\n", kafkaVersion(b), depBurst, rounds)
		for _, x := range runs {
			x.print()
			unit := fmt.Sprintf("-%d/s", x.rate)
			b.ReportMetric(float64(x.p99.Microseconds())/1000, "p99-ms"+unit)
			b.ReportMetric(float64(x.cpu[0].Microseconds()), "broker-cpu-us"+unit)
			b.ReportMetric(x.total(), "broker-requests"+unit)
		}
	}
}

// warmUp runs round (10 s of events at 1,000 a second) until the broker's
// JIT compiler took under a tenth of its CPU in one, at most warmRounds
// times, and returns how many it ran. A broker in production has run for
// days; one started for a benchmark compiles its request paths for
// minutes, at up to a core of these two.
func (k *ownKafka) warmUp(b *testing.B, round func()) int {
	b.Helper()
	broker := []cpuOf{{"broker", k.pid()}}
	for n := 1; ; n++ {
		jit, cpu := k.jitCPU(b), cpuTimes(b, broker)[0]
		round()
		if n == warmRounds || float64(k.jitCPU(b)-jit) < 0.1*float64(cpuTimes(b, broker)[0]-cpu) {
			return n
		}
	}
}

// warmRounds bounds a broker's warmUp.
const warmRounds = 12

// steadyRun is one run of BenchmarkSteadyOnApache.
type steadyRun struct {
	rate, deliveries int
	transactions     float64
	p50, p99         time.Duration
	cpu              []time.Duration    // a delivery: broker, dispatcher, deliverer
	jit              float64            // the broker's JIT compiler's share of its CPU
	requests         map[string]float64 // the broker's, a delivery, by API
}

func (x steadyRun) total() float64 {
	t := 0.0
	for api, n := range x.requests {
		if api != "FetchConsumer" { // the consumers' share of Fetch, counted twice
			t += n
		}
	}
	return t
}

func (x steadyRun) print() {
	fmt.Fprintf(os.Stdout, "%5d events/s: %d deliveries, %.0f transactions, p50 / p99 %v / %v\n", x.rate, x.deliveries,
		x.transactions, x.p50.Round(100*time.Microsecond), x.p99.Round(100*time.Microsecond))
	fmt.Fprintf(os.Stdout, "  CPU a delivery: broker %v (JIT compiler %.0f%% of it), dispatcher %v, deliverer %v\n",
		x.cpu[0].Round(time.Microsecond), 100*x.jit, x.cpu[1].Round(time.Microsecond), x.cpu[2].Round(time.Microsecond))
	var apis []string
	for api, n := range x.requests {
		if n >= 0.01 && api != "FetchConsumer" {
			apis = append(apis, api)
		}
	}
	slices.SortFunc(apis, func(a, b string) int { return strings.Compare(a, b) })
	var parts []string
	for _, api := range apis {
		parts = append(parts, fmt.Sprintf("%s %.3f", api, x.requests[api]))
	}
	fmt.Fprintf(os.Stdout, "  broker requests a delivery: %.2f (%s)\n", x.total(), strings.Join(parts, ", "))
}

// requests are the requests the broker has served since it started, by
// API (services.sh kafka-requests: its JMX counts, the agent on jmxPort).
func (k *ownKafka) requests(b *testing.B, jmxPort int) map[string]int {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	out, err := exec.Command("bash", filepath.Join(filepath.Dir(file), "..", "scripts", "services.sh"),
		"kafka-requests", k.dir, strconv.Itoa(jmxPort)).Output()
	if err != nil {
		b.Fatalf("services.sh kafka-requests: %v", err)
	}
	counts := map[string]int{}
	for line := range strings.Lines(string(out)) {
		api, n, _ := strings.Cut(strings.TrimSpace(line), " ")
		c, err := strconv.Atoi(n)
		if err != nil {
			b.Fatalf("services.sh kafka-requests: %q", line)
		}
		counts[api] = c
	}
	if len(counts) == 0 {
		b.Fatal("services.sh kafka-requests: no counts")
	}
	return counts
}

// jitCPU is the CPU time the broker's JIT compiler threads (C1 and C2)
// running now have used. The JVM starts and stops compiler threads as the
// queue of methods to compile grows and shrinks, so a thread's time can
// drop out between two readings: the difference may fall short of the
// compiler's time, never above it.
func (k *ownKafka) jitCPU(b *testing.B) time.Duration {
	b.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", k.pid()))
	var total time.Duration
	for _, task := range tasks {
		comm, err := os.ReadFile(filepath.Join(task, "comm"))
		if err != nil || !strings.Contains(string(comm), "CompilerThre") {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(task, "stat")); err == nil { // else it ended meanwhile
			t, _ := parseStatCPU(stat)
			total += t
		}
	}
	return total
}

// kafkaVersion is the Kafka release services.sh installs.
func kafkaVersion(b *testing.B) string {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	script, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "scripts", "services.sh"))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(script)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "KAFKA_VERSION="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return "?"
}
