package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// Sizes of BenchmarkDeployed.
const (
	depBurst   = 20000 // events of each burst
	depKeys    = 500   // ordering keys of the events
	depData    = 200   // bytes of each event's data
	depLatency = 5 * time.Second
	depStorm   = 20000 // due retries released at once
)

// BenchmarkDeployed is the headline table of `make bench`, measured as
// users deploy: the dispatcher, deliverer and retrier run as separate
// processes (the binaries `make run` starts) against the broker in a
// process of its own on a 127.0.0.1 port and a Redis server of their own,
// events are produced by an independent client with 500 ordering keys,
// and a receiver in a process of its own verifies every signature and
// answers 204.
// Rows: the raw limit (a plain client posting the same signed requests to
// the same receiver, measured again before each burst); a burst of 20,000
// events to one subscription, and the same burst over four subscriptions,
// each with the deliveries it spilled to the retry path
// (subscription_busy); p50 and p99 publish-to-receipt at half the
// four-subscription rate; that p99 while 20,000 due retries of five other
// subscriptions are released at once, against the same run without them,
// each split at the dispatcher's write and the attempt's start; each
// process's CPU per delivery in the bursts, and per request of the raw
// limits measured before them; and the floor: what a request costs a
// minimal HTTP/1.1 client (floorLimit), the least a delivery's request
// can cost the deliverer.
func BenchmarkDeployed(b *testing.B) {
	bin := binaries(b)
	redis := redistest.Start(b)
	brokers := []string{"kfake"}
	if os.Getenv(envBenchApache) != "" {
		brokers = append(brokers, "apache")
	}
	stacks := []bool{false}
	if os.Getenv(testkit.EnvClickHouseAddr) != "" {
		stacks = append(stacks, true)
	}
	for b.Loop() {
		var tables [][][2]string
		for _, broker := range brokers {
			for _, whole := range stacks {
				rows, metrics := deployedOn(b, bin, redis, broker, whole)
				tables = append(tables, rows)
				for _, m := range metrics {
					unit := m.unit
					if whole {
						unit = "whole-" + unit
					}
					if broker != "kfake" {
						unit = broker + "-" + unit
					}
					b.ReportMetric(m.v, unit)
				}
			}
		}
		fmt.Fprintln(os.Stdout)
		for i, row := range tables[0] {
			fmt.Fprintf(os.Stdout, "%-58s", row[0])
			for _, t := range tables {
				fmt.Fprintf(os.Stdout, " %18s", t[i][1])
			}
			fmt.Fprintln(os.Stdout)
		}
	}
}

// envBenchApache, set (make bench sets it), adds a column to
// BenchmarkDeployed: the same run on Apache Kafka (services.sh
// install-kafka first).
const envBenchApache = "WEBHOOKS_BENCH_APACHE"

// metric is one of BenchmarkDeployed's reported figures.
type metric struct {
	v    float64
	unit string
}

// deployedOn is one run of BenchmarkDeployed on a broker in a process of
// its own: kfake (as make run runs it) or Apache Kafka (services.sh). It
// returns the table's rows (name, value) and the figures to report.
//
// With whole (when WEBHOOKS_TEST_CLICKHOUSE_ADDR names a ClickHouse server)
// the column is the whole stack users run: the recorder too, as a process,
// writing every attempt into ClickHouse; each burst's CPU is counted until
// ClickHouse holds its attempts, the recorder's and (with
// WEBHOOKS_BENCH_CLICKHOUSE_PID, which make bench sets) the ClickHouse
// server's included; the latency runs start once the server has no merge
// running (settled).
func deployedOn(b *testing.B, bin string, redis *redistest.Server, broker string, whole bool) (table [][2]string, metrics []metric) {
	b.Helper()
	var e *env
	var brokerPid int
	jit := func() time.Duration { return 0 } // the broker's JIT compiler's CPU so far (a JVM's)
	var warmJIT func(round func()) int       // the broker's warmUp
	if broker == "apache" {
		k := startOwnKafka(b)
		e, brokerPid = newEnvOn(b, k.brokers(), func() {}, nil), k.pid()
		jit = func() time.Duration { return k.jitCPU(b) }
		warmJIT = func(round func()) int { return k.warmUp(b, round) }
	} else {
		var p *stack.Process
		e, p = newEnvBrokerProcess(b)
		brokerPid = p.Pid()
	}
	// As the chart deploys them: breakers, rate limits and dedup in
	// Redis.
	e.withRedis(redis.URL(), fmt.Sprintf("dep%d:", time.Now().UnixNano()), map[string]string{
		redisstate.EnvTimeout: "100ms", redisstate.EnvRetryInterval: "2s"}) // the defaults, not the tests' margins
	r := newReceiverProcess(b)
	sub := func(id, typ string) topics.Subscription {
		s := e.subscribe(topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{typ}, Enabled: true})
		r.trust(s)
		return s
	}
	sub("one", "dep.one")
	sub("warm", "dep.warm")
	var four, storm []topics.Subscription
	for i := range 4 {
		four = append(four, sub(fmt.Sprintf("four-%d", i), fmt.Sprintf("dep.four%d", i)))
	}
	for i := range 5 {
		storm = append(storm, sub(fmt.Sprintf("storm-%d", i), "iso.storm"))
	}
	data := `{"pad":"` + strings.Repeat("x", depData-10) + `"}`

	chPid := 0
	var ch driver.Conn
	components := []string{"dispatcher", "deliverer", "retrier"}
	var rtls *receiverProcess
	var tlsSub []topics.Subscription
	if whole {
		// An https endpoint whose CA the deliverer trusts as a system root.
		var ca string
		rtls, ca = newReceiverProcessTLS(b)
		e.vars["SSL_CERT_FILE"] = ca
		s := e.subscribe(topics.Subscription{ID: "tls-one", URL: rtls.url("tls-one"), EventTypes: []string{"dep.tls"}, Enabled: true})
		rtls.trust(s)
		tlsSub = append(tlsSub, s)
		ch, _ = e.clickhouseDB()
		components = append(components, "recorder")
		chPid, _ = strconv.Atoi(os.Getenv("WEBHOOKS_BENCH_CLICKHOUSE_PID"))
	}
	procs := []cpuOf{{"dispatcher", 0}, {"deliverer", 0}, {"retrier", 0}, {"recorder", 0}}
	for _, c := range components {
		procs[slices.IndexFunc(procs, func(p cpuOf) bool { return p.name == c })].pid = e.startProc(filepath.Join(bin, c), c).Pid()
	}
	procs = append(procs, cpuOf{"broker (a process of its own)", brokerPid}, cpuOf{"redis-server", redis.Pid()},
		cpuOf{"clickhouse-server", chPid}, cpuOf{"receiver", r.pid()}, cpuOf{"this process (producer, raw-limit client)", os.Getpid()})
	// recorded waits, in the whole stack, until the recorder committed
	// every attempt record: each is in ClickHouse.
	recorded := func() {
		if !whole {
			return
		}
		wait(b, 300*time.Second, "the attempts in ClickHouse", func() bool {
			return caughtUp(e, topics.GroupRecorder, e.names.Attempts())
		})
	}
	event := func(typ func(i int) string) func(int) topics.Event {
		return func(i int) topics.Event {
			return topics.Event{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), i), Type: typ(i), Key: fmt.Sprintf("k%d", i%depKeys),
				CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(data)}
		}
	}
	toOne := event(func(int) string { return "dep.one" })
	toFour := event(func(i int) string { return fmt.Sprintf("dep.four%d", i%4) })
	count := r.accepted
	// Warm up: every process joined its group, connections open. On
	// Apache Kafka the broker's JIT too: a JVM started for the column
	// compiles its hot paths during its first bursts, on the same two
	// cores, which a broker running for days has long done; a burst of its
	// own, unmeasured, to a subscription of its own, then rounds at a steady
	// rate until its compiler is quiet (warmUp).
	publishKeyed(b, e, 100, toOne)
	wait(b, 120*time.Second, "warm-up", func() bool { return count("one") >= 100 })
	warmRounds := 0
	if broker == "apache" {
		toWarm := event(func(int) string { return "dep.warm" })
		publishKeyed(b, e, depBurst, toWarm)
		wait(b, 300*time.Second, "the broker's warm-up", func() bool { return count("warm") >= depBurst })
		warmRounds = warmJIT(func() {
			base := count("warm")
			n := publishAtRate(b, e, 1000, 10*time.Second, toWarm)
			wait(b, 120*time.Second, "the broker's warm-up", func() bool { return count("warm") >= base+n })
		})
		recorded()
		if ch != nil {
			settled(b, ch)
		}
	}

	// Each burst is measured against the raw limit measured just before
	// it, the best of two runs: this machine's speed drifts by a fifth
	// within minutes. The pipeline's processes are idle meanwhile.
	var redisPerDelivery []float64 // commands Redis processed per delivery of each burst, in order
	burstTo := func(rcv *receiverProcess, rawSubs []topics.Subscription, prefix string, ev func(int) topics.Event) (rate, raw float64, rawCPU, cpu []time.Duration) {
		count := rcv.accepted
		rawCPU = cpuTimes(b, procs)
		for range 2 {
			raw = max(raw, rawLimit(b, rcv, rawSubs, data, depBurst, 64))
		}
		for i, after := range cpuTimes(b, procs) {
			rawCPU[i] = (after - rawCPU[i]) / (2 * depBurst)
		}
		base := count(prefix)
		start := time.Now()
		cpu = cpuTimes(b, procs)
		cmds := redisCommands(b, redis.URL())
		publishKeyed(b, e, depBurst, ev)
		wait(b, 300*time.Second, "the burst to "+prefix, func() bool { return count(prefix) >= base+depBurst })
		rate = float64(depBurst) / time.Since(start).Seconds()
		recorded()
		redisPerDelivery = append(redisPerDelivery, float64(redisCommands(b, redis.URL())-cmds)/depBurst)
		for i, after := range cpuTimes(b, procs) {
			cpu[i] = (after - cpu[i]) / depBurst
		}
		return rate, raw, rawCPU, cpu
	}
	burst := func(prefix string, ev func(int) topics.Event) (rate, raw float64, rawCPU, cpu []time.Duration) {
		return burstTo(r, four, prefix, ev)
	}
	// The least a request costs a client here, for the CPU rows.
	jitFrom, brokerFrom := jit(), cpuTimes(b, []cpuOf{{"broker", brokerPid}})[0]
	floorRate, floorCPU := floorLimit(b, r, four, data, depBurst, 64)
	oneRate, oneRaw, oneRawCPU, oneCPU := burst("one", toOne)
	spilled := spills(b, e, "one", 100+depBurst)
	fourRate, fourRaw, fourRawCPU, fourCPU := burst("four-", toFour)
	fourSpilled := spills(b, e, "four-", depBurst)
	tlsRow, tlsRawRow, tlsRatio := "-", "-", "-"
	if whole {
		toTLS := event(func(int) string { return "dep.tls" })
		publishKeyed(b, e, 100, toTLS)
		wait(b, 120*time.Second, "warm-up over https", func() bool { return rtls.accepted("tls-one") >= 100 })
		rate, raw, _, _ := burstTo(rtls, tlsSub, "tls-one", toTLS)
		tlsRow, tlsRawRow, tlsRatio = fmt.Sprintf("%.0f", rate), fmt.Sprintf("%.0f", raw), fmt.Sprintf("%.2f", rate/raw)
		metrics = append(metrics, metric{rate / raw, "https-one-sub-ratio"})
		rtls.checkSignatures()
	}

	var drained time.Duration   // from the storm's due time to its last delivery
	var busy float64            // the host's cores busy during the run without the storm
	var calmCPU []time.Duration // each process's CPU a delivery in the run without the storm
	latency := func(withStorm bool) []request {
		if ch != nil {
			settled(b, ch)
		}
		cores, cpu := hostCPU(b), cpuTimes(b, procs)
		before, base := r.count(), count("four-")
		due := time.Now().Add(time.Second)
		if withStorm {
			produceStorm(b, e, storm, depStorm, due)
		}
		want := base + publishAtRate(b, e, int(fourRate/2), depLatency, toFour)
		wait(b, 120*time.Second, "the latency run", func() bool { return count("four-") >= want })
		if withStorm {
			wait(b, 120*time.Second, "the storm", func() bool { return count("storm-") >= depStorm })
		} else {
			busy = hostCPU(b).busySince(cores)
			recorded() // the recorder's share of these deliveries
			calmCPU = cpuTimes(b, procs)
			for i := range calmCPU {
				calmCPU[i] = (calmCPU[i] - cpu[i]) / time.Duration(want-base)
			}
		}
		var reqs []request
		for _, q := range r.got(before) {
			if strings.HasPrefix(q.Sub, "four-") {
				reqs = append(reqs, q)
			}
			if withStorm && strings.HasPrefix(q.Sub, "storm-") {
				drained = max(drained, q.At.Sub(due))
			}
		}
		return reqs
	}
	calm, stormy := latency(false), latency(true)
	jitShare := "-"
	if broker == "apache" {
		jitShare = fmt.Sprintf("%.0f%% (%d warm-up rounds)", 100*max(0, float64(jit()-jitFrom))/float64(cpuTimes(b, []cpuOf{{"broker", brokerPid}})[0]-brokerFrom), warmRounds)
	}
	p50, p99 := latencies(calm)
	_, p99Storm := latencies(stormy)
	split := dispatchSplit(b, e, calm, stormy)
	r.checkSignatures()

	row := func(name, v string) { table = append(table, [2]string{name, v}) }
	column := broker
	if whole {
		column += ", whole stack"
	}
	row("as deployed: separate processes, broker on TCP", column)
	row("raw limit: plain client, 64 concurrent (req/s)", fmt.Sprintf("%.0f", oneRaw))
	row(fmt.Sprintf("one subscription, burst of %d (deliveries/s)", depBurst), fmt.Sprintf("%.0f", oneRate))
	row("  ratio to raw (target >= 0.5)", fmt.Sprintf("%.2f", oneRate/oneRaw))
	row("  spilled (subscription_busy; target 0)", fmt.Sprint(spilled))
	row(fmt.Sprintf("four subscriptions, burst of %d (deliveries/s)", depBurst), fmt.Sprintf("%.0f", fourRate))
	row("  spilled", fmt.Sprint(fourSpilled))
	row("  raw limit just before it (req/s)", fmt.Sprintf("%.0f", fourRaw))
	row("  ratio to raw (target >= 0.75)", fmt.Sprintf("%.2f", fourRate/fourRaw))
	row("raw limit, https (TLS 1.3, HTTP/2), 64 concurrent (req/s)", tlsRawRow)
	row(fmt.Sprintf("one subscription, https, burst of %d (deliveries/s)", depBurst), tlsRow)
	row("  ratio to raw https (target >= 0.75)", tlsRatio)
	row(fmt.Sprintf("p50 at %d events/s (half the four-subscription rate)", int(fourRate/2)), p50.Round(100*time.Microsecond).String())
	row("p99 (target < 25ms)", p99.Round(100*time.Microsecond).String())
	row("  the host's cores busy meanwhile (every process)", fmt.Sprintf("%.0f%%", 100*busy))
	row(fmt.Sprintf("p99 with %d due retries released at once", depStorm), p99Storm.Round(100*time.Microsecond).String())
	row("  ratio to without (target <= 2)", fmt.Sprintf("%.2f", float64(p99Storm)/float64(p99)))
	row("  the storm delivered within (from its due time)", drained.Round(10*time.Millisecond).String())
	row("CPU per delivery in the bursts (one / four subscriptions)", "")
	var pipeline [2]time.Duration // every process but the receiver and this one
	for i, p := range procs {
		row("  "+p.name, cpuCell(p, oneCPU[i], fourCPU[i]))
		if p.name != "receiver" && p.pid != os.Getpid() {
			pipeline[0], pipeline[1] = pipeline[0]+oneCPU[i], pipeline[1]+fourCPU[i]
		}
	}
	row("  the pipeline (all but the receiver and this process; target <= 40µs)", fmt.Sprintf("%v / %v",
		pipeline[0].Round(time.Microsecond), pipeline[1].Round(time.Microsecond)))
	row(fmt.Sprintf("CPU per delivery at %d events/s (the p50 run), four subscriptions", int(fourRate/2)), "")
	var calmPipeline time.Duration
	for i, p := range procs {
		cell := "-" // every column has the same rows, so that they line up
		if p.pid != 0 {
			cell = calmCPU[i].Round(time.Microsecond).String()
		}
		row("  "+p.name, cell)
		if p.name != "receiver" && p.pid != os.Getpid() {
			calmPipeline += calmCPU[i]
		}
	}
	row("  the pipeline", calmPipeline.Round(time.Microsecond).String())
	row("the broker's JIT compiler, share of its CPU in these runs", jitShare)
	row("Redis commands per delivery in the bursts (one / four subscriptions)", fmt.Sprintf("%.2f / %.2f", redisPerDelivery[0], redisPerDelivery[1]))
	row("floor: a minimal HTTP/1.1 client, 64 connections (req/s)", fmt.Sprintf("%.0f", floorRate))
	row("  its CPU per request (the least a delivery's request costs)", floorCPU.Round(time.Microsecond).String())
	row("CPU per request of the raw limits before them", "")
	for i, p := range procs {
		row("  "+p.name, cpuCell(p, oneRawCPU[i], fourRawCPU[i]))
	}
	for i, run := range []string{"without", "with"} {
		for j, part := range []string{"publish to dispatched", "dispatched to attempt start", "attempt start to received"} {
			row(fmt.Sprintf("  %s the storm: p99 %s", run, part), split[i][j].Round(100*time.Microsecond).String())
		}
	}
	metrics = append(metrics, metric{max(oneRaw, fourRaw), "raw-req/s"})
	metrics = append(metrics, metric{oneRate / oneRaw, "one-sub-ratio"})
	metrics = append(metrics, metric{float64(spilled), "one-sub-spilled"})
	metrics = append(metrics, metric{fourRate / fourRaw, "four-sub-ratio"})
	metrics = append(metrics, metric{float64(p99.Microseconds()) / 1000, "p99-ms"})
	metrics = append(metrics, metric{busy, "p99-host-busy"})
	metrics = append(metrics, metric{float64(p99Storm) / float64(p99), "storm-p99-ratio"})
	metrics = append(metrics, metric{float64(pipeline[1].Nanoseconds()) / 1000, "pipeline-cpu-us"})
	metrics = append(metrics, metric{float64(calmPipeline.Nanoseconds()) / 1000, "half-rate-pipeline-cpu-us"})
	metrics = append(metrics, metric{float64(floorCPU.Nanoseconds()) / 1000, "floor-cpu-us"})
	e.close()
	return table, metrics
}

// dispatchSplit splits each run's publish-to-receipt times at the moment
// the dispatcher wrote the delivery (its record's timestamp in
// deliveries) and the moment the deliverer started its attempt (the
// attempt record's ts): the p99 of publish to dispatched (producer,
// broker, dispatcher), of dispatched to started (broker, fetch, the
// deliverer's queues) and of started to received (signing, HTTP), so a
// storm's cost, or a tail, shows where it falls.
func dispatchSplit(b *testing.B, e *env, runs ...[]request) [][3]time.Duration {
	b.Helper()
	want := map[string]bool{}
	for _, reqs := range runs {
		for _, q := range reqs {
			want[q.ID] = true
		}
	}
	dispatched := map[string]time.Time{}
	seen := 0
	e.consume(e.names.Deliveries(), 120*time.Second, func(recs []*kgo.Record) bool {
		for _, rec := range recs[seen:] {
			d, err := topics.DecodeDelivery(rec.Value)
			if err == nil && want[d.EventID] {
				dispatched[d.EventID] = rec.Timestamp
			}
		}
		seen = len(recs)
		return len(dispatched) == len(want)
	})
	started := map[string]time.Time{}
	seen = 0
	e.consume(e.names.Attempts(), 120*time.Second, func(recs []*kgo.Record) bool {
		for _, rec := range recs[seen:] {
			a, err := topics.DecodeAttempt(rec.Value)
			if err == nil && want[a.EventID] && a.Outcome == topics.OutcomeSuccess {
				started[a.EventID] = a.TS
			}
		}
		seen = len(recs)
		return len(started) == len(want)
	})
	var out [][3]time.Duration
	for run, reqs := range runs {
		var parts [3][]time.Duration
		for _, q := range reqs {
			at, start := dispatched[q.ID], started[q.ID]
			parts[0] = append(parts[0], at.Sub(q.Timestamp))
			parts[1] = append(parts[1], start.Sub(at))
			parts[2] = append(parts[2], q.At.Sub(start))
		}
		keepSplit(b, run, reqs, parts)
		var p99s [3]time.Duration
		for i, p := range parts {
			_, p99s[i] = percentiles(p)
		}
		out = append(out, p99s)
	}
	return out
}

// cpuCell is a process's CPU per delivery in the one- and four-subscription
// bursts, "-" for one not running (or not known) in the column.
func cpuCell(p cpuOf, one, four time.Duration) string {
	if p.pid == 0 {
		return "-"
	}
	return fmt.Sprintf("%v / %v", one.Round(time.Microsecond), four.Round(time.Microsecond))
}

// cpuOf names a process whose CPU time a benchmark accounts.
type cpuOf struct {
	name string
	pid  int
}

// cpuTimes reads the user plus system CPU time each process has used so
// far (/proc/<pid>/stat, in clock ticks of 10 ms).
func cpuTimes(b *testing.B, procs []cpuOf) []time.Duration {
	b.Helper()
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		if p.pid != 0 { // else not running in this column
			out[i] = statCPU(b, fmt.Sprintf("/proc/%d/stat", p.pid))
		}
	}
	return out
}

// statCPU is the user plus system CPU time in a process's /proc stat
// file.
func statCPU(b *testing.B, path string) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	t, ok := parseStatCPU(stat)
	if !ok {
		b.Fatalf("%s: %q", path, stat)
	}
	return t
}

// parseStatCPU is the user plus system CPU time in the text of a /proc stat
// file (of a process, or of a thread: /proc/PID/task/TID/stat).
func parseStatCPU(stat []byte) (time.Duration, bool) {
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, err1 == nil && err2 == nil
}

// cpuTicks is the machine's CPU time so far, all cores (/proc/stat), in
// clock ticks: busy, and in all.
type cpuTicks struct{ busy, all int64 }

// hostCPU reads the machine's CPU time so far.
func hostCPU(b *testing.B) cpuTicks {
	b.Helper()
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		b.Fatalf("/proc/stat: %q", line)
	}
	var t cpuTicks
	for i, f := range fields[1:9] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q", line)
		}
		t.all += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busySince is the fraction of the machine's CPU time busy since then.
func (t cpuTicks) busySince(then cpuTicks) float64 {
	if t.all == then.all {
		return 0
	}
	return float64(t.busy-then.busy) / float64(t.all-then.all)
}

// publishKeyed produces n events keyed as their Key says, as fast as the
// client batches them.
func publishKeyed(b *testing.B, e *env, n int, event func(int) topics.Event) {
	b.Helper()
	var errs atomic.Int64
	for i := range n {
		ev := event(i)
		v, _ := json.Marshal(ev)
		e.cl.Produce(context.Background(), &kgo.Record{Topic: e.names.Events(), Key: []byte(ev.Key), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
			}
		})
	}
	if err := e.cl.Flush(context.Background()); err != nil || errs.Load() > 0 {
		b.Fatalf("publishing: %v (%d failed)", err, errs.Load())
	}
}

// spills reads the attempts topic until the subscriptions whose id starts
// with prefix have delivered records successful attempts and returns how
// many of their deliveries were spilled (subscription_busy) on the way.
func spills(b *testing.B, e *env, prefix string, delivered int) int {
	b.Helper()
	var ok, spilled, seen int
	e.consume(e.names.Attempts(), 120*time.Second, func(recs []*kgo.Record) bool {
		for _, rec := range recs[seen:] {
			if !strings.HasPrefix(string(topics.SubscriptionOfKey(rec.Key)), prefix) {
				continue
			}
			a, err := topics.DecodeAttempt(rec.Value)
			if err != nil {
				b.Fatal(err)
			}
			switch {
			case a.Outcome == topics.OutcomeSuccess:
				ok++
			case a.FailureCategory == topics.FailureBusy:
				spilled++
			}
		}
		seen = len(recs)
		return ok >= delivered
	})
	return spilled
}

// keepSplit writes, with WEBHOOKS_BENCH_PROFILES set, one latency run's
// requests to latency-<run>.tsv there: when each was published (Unix µs)
// and its three parts (µs), to lay the slow ones beside the processes'
// logs (with GODEBUG=gctrace=1, their garbage collections).
func keepSplit(b *testing.B, run int, reqs []request, parts [3][]time.Duration) {
	dir := os.Getenv("WEBHOOKS_BENCH_PROFILES")
	if dir == "" {
		return
	}
	var out strings.Builder
	out.WriteString("published_us\tto_dispatched_us\tto_attempt_start_us\tto_received_us\n")
	for i, q := range reqs {
		fmt.Fprintf(&out, "%d\t%d\t%d\t%d\n", q.Timestamp.UnixMicro(), parts[0][i].Microseconds(),
			parts[1][i].Microseconds(), parts[2][i].Microseconds())
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("latency-%d.tsv", run)), []byte(out.String()), 0o644); err != nil {
		b.Error(err)
	}
}

// redisCommands is the number of commands the Redis server at url has
// processed since it started (INFO stats: total_commands_processed).
func redisCommands(tb testing.TB, url string) int64 {
	tb.Helper()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("no total_commands_processed in INFO stats of %s", url)
	return 0
}

// settled waits (at most a minute) until the ClickHouse server has no
// merge running: the bursts before a latency run leave parts to merge that
// a steady rate at half the maximum would not.
func settled(b *testing.B, ch driver.Conn) {
	b.Helper()
	testkit.Within(time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var n uint64
		err := ch.QueryRow(ctx, "SELECT count() FROM system.merges").Scan(&n)
		return err == nil && n == 0
	})
}
