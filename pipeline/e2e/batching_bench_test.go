package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkDispatcherBatching weighs the dispatcher's fetch batching
// (WEBHOOKS_DISPATCHER_FETCH_MIN_BYTES and _MAX_WAIT, docs/operations.md)
// at steady rates, as deployed: the dispatcher, deliverer and retrier as
// processes, kfake in a process of its own, Redis, four subscriptions
// on a receiver process, 1 KiB events produced a millisecond apart (a
// steady producer, where BenchmarkDeployed's latency run publishes every
// 10 ms). For the default (1 byte, 1s) and for 64 KiB, 10ms: the
// dispatcher's and the broker's CPU a second while idle, then at 200 and
// 4,000 events/s for 10 s each: the transactions, the CPU a delivery of
// the dispatcher, deliverer and broker together, and p50/p99
// publish-to-receipt.
func BenchmarkDispatcherBatching(b *testing.B) {
	const idle, run = 10 * time.Second, 10 * time.Second
	rates := []int{200, 4000}
	settings := []struct {
		name string
		vars map[string]string
	}{
		{"1 byte, 1s (default)", nil},
		{"64 KiB, 10ms", map[string]string{"WEBHOOKS_DISPATCHER_FETCH_MIN_BYTES": "65536", "WEBHOOKS_DISPATCHER_FETCH_MAX_WAIT": "10ms"}},
	}
	redis := redistest.Start(b)
	for b.Loop() {
		var rows [][]string
		for _, st := range settings {
			e, broker := newEnvBrokerProcess(b)
			f := startFourDeployed(b, e, redis.URL(), "batch", broker.Pid(), st.vars)
			r, ops, procs, event := f.r, f.ops, f.procs, f.event
			publishKeyed(b, e, 400, event)
			wait(b, 120*time.Second, "warm-up", func() bool { return r.count() >= 400 })

			before := cpuTimes(b, procs)
			time.Sleep(idle) // what the processes do with nothing to do
			after := cpuTimes(b, procs)
			idleCPU := (after[0] - before[0] + after[1] - before[1]) * time.Second / idle // the broker and the dispatcher
			row := []string{st.name, fmt.Sprintf("%v", idleCPU.Round(time.Millisecond))}
			for _, rate := range rates {
				txns := transactions(b, ops)
				cpu := cpuTimes(b, procs)
				from := r.count()
				n := publishEvery(b, e, rate, run, time.Millisecond, event)
				wait(b, 120*time.Second, fmt.Sprintf("the run at %d/s", rate), func() bool { return r.count() >= from+n })
				var used time.Duration
				for i, t := range cpuTimes(b, procs) {
					if procs[i].name != "retrier" {
						used += t - cpu[i]
					}
				}
				p50, p99 := latencies(r.got(from))
				perDelivery := used / time.Duration(n)
				row = append(row, fmt.Sprintf("%.0f, %v, %v / %v", transactions(b, ops)-txns, perDelivery.Round(time.Microsecond),
					p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond)))
				unit := fmt.Sprintf("-%d/s", rate)
				if st.vars != nil {
					unit = "-batched" + unit
				}
				b.ReportMetric(float64(perDelivery.Microseconds()), "cpu-us"+unit)
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms"+unit)
			}
			rows = append(rows, row)
		}
		fmt.Fprintf(os.Stdout, "\n%-24s %22s", "fetch min bytes, max wait", "idle CPU/s (disp+broker)")
		for _, rate := range rates {
			fmt.Fprintf(os.Stdout, " %40s", fmt.Sprintf("%d/s: txns, CPU a delivery, p50 / p99", rate))
		}
		fmt.Fprintln(os.Stdout)
		for _, row := range rows {
			fmt.Fprintf(os.Stdout, "%-24s %22s", row[0], row[1])
			for _, c := range row[2:] {
				fmt.Fprintf(os.Stdout, " %40s", c)
			}
			fmt.Fprintln(os.Stdout)
		}
	}
}

// transactions is how many transactions the dispatcher serving ops has
// committed.
func transactions(b *testing.B, ops string) float64 {
	b.Helper()
	m, _ := scrape(b, ops)
	return m[`webhooks_dispatcher_transactions_total{result="committed"}`]
}

// fourDeployed is what BenchmarkDispatcherBatching and
// BenchmarkSteadyOnApache run on: four subscriptions (event types
// dep.four0 to dep.four3) on a receiver process r, the dispatcher (its ops
// port at ops), deliverer and retrier as processes, on Redis. procs are
// the broker and the three, for cpuTimes; event is a run's i-th event, to
// the four subscriptions in turn.
type fourDeployed struct {
	r     *receiverProcess
	ops   string
	procs []cpuOf
	event func(i int) topics.Event
}

// startFourDeployed sets up fourDeployed on e, whose broker runs as
// process broker, with Redis at redisURL (keys under a fresh prefix
// starting with prefix) and vars in the three processes' environment.
func startFourDeployed(b *testing.B, e *env, redisURL, prefix string, broker int, vars map[string]string) fourDeployed {
	b.Helper()
	e.withRedis(redisURL, fmt.Sprintf("%s%d:", prefix, time.Now().UnixNano()), map[string]string{
		redisstate.EnvTimeout: "100ms", redisstate.EnvRetryInterval: "2s"})
	f := fourDeployed{r: newReceiverProcess(b), ops: testkit.FreeAddr(b), procs: []cpuOf{{"broker", broker}}}
	for i := range 4 {
		s := e.subscribe(topics.Subscription{ID: fmt.Sprintf("four-%d", i), URL: f.r.url(fmt.Sprintf("four-%d", i)),
			EventTypes: []string{fmt.Sprintf("dep.four%d", i)}, Enabled: true})
		f.r.trust(s)
	}
	bin := binaries(b)
	for _, c := range []string{"dispatcher", "deliverer", "retrier"} {
		v := maps.Clone(vars)
		if c == "dispatcher" {
			if v == nil {
				v = map[string]string{}
			}
			v["WEBHOOKS_HTTP_ADDR"] = f.ops
		}
		f.procs = append(f.procs, cpuOf{c, e.startProcWith(filepath.Join(bin, c), c, v).Pid()})
	}
	data := `{"pad":"` + strings.Repeat("x", depData-10) + `"}`
	f.event = func(i int) topics.Event {
		return topics.Event{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), i), Type: fmt.Sprintf("dep.four%d", i%4),
			Key: fmt.Sprintf("k%d", i%depKeys), CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(data)}
	}
	return f
}
