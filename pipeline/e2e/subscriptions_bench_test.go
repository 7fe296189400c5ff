package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// Sizes of BenchmarkSubscriptions.
const (
	subsBig        = 1000  // subscriptions of tenant "big", all on invoice.paid
	subsTenants    = 5000  // tenants of the others
	subsWarm       = 2000  // subscriptions created through the API in one round of warming up
	subsWarmRounds = 8     // rounds of warming up
	subsWarmRaw    = 60000 // produce and listing round trips that warm the broker up
	subsCreate     = 4000  // subscriptions created through the API, measured
	subsCreators   = 16    // clients creating them at once
	subsPageLimit  = 1000  // the API's largest page
)

// envBenchSubscriptions sizes BenchmarkSubscriptions (default 100,000).
const envBenchSubscriptions = "WEBHOOKS_BENCH_SUBSCRIPTIONS"

// BenchmarkSubscriptions: a subscriptions topic of n subscriptions (the
// first 1,000 of tenant "big" on invoice.paid, the others on
// customer.created and order.<i>.* for one of 5,000 tenants; sealed
// secrets), written straight to the broker. The dispatcher, the deliverer
// and the API start one after the other as processes; for each, the time
// until its table holds every subscription (webhooks_subscriptions) and its
// resident memory. Then the dispatcher's fan-out rate for events matching
// 1 and 1,000 subscriptions, subscriptions created through the API by 16
// clients (after 60,000 produces and listings, then rounds of 2,000
// creates, that warm the broker up, reported apart), and the API's list
// paged through every subscription. On Apache
// Kafka with WEBHOOKS_BENCH_APACHE (as make bench runs it), else on kfake
// in a process of its own.
func BenchmarkSubscriptions(b *testing.B) {
	n := 100_000
	if v, _ := strconv.Atoi(os.Getenv(envBenchSubscriptions)); v > subsBig {
		n = v
	}
	bin := binaries(b)
	for b.Loop() {
		var e *env
		if os.Getenv(envBenchApache) != "" {
			e = newEnvOn(b, startOwnKafka(b).brokers(), func() {}, nil)
		} else {
			e, _ = newEnvBrokerProcess(b)
		}
		rows := subscriptionsOn(b, e, bin, n)
		fmt.Fprintln(os.Stdout)
		for _, r := range rows {
			fmt.Fprintf(os.Stdout, "%-62s %s\n", r[0], r[1])
		}
	}
}

// subsTenantOf is the tenant of the i-th subscription.
func subsTenantOf(i int) string {
	if i < subsBig {
		return "big"
	}
	return "tenant-" + strconv.Itoa(i%subsTenants)
}

func subscriptionsOn(b *testing.B, e *env, bin string, n int) (rows [][2]string) {
	row := func(name, format string, args ...any) {
		rows = append(rows, [2]string{name, fmt.Sprintf(format, args...)})
	}
	secret, err := topics.NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	keys := e.keys()
	start := time.Now()
	var failed atomic.Value
	for i := range n {
		s := topics.Subscription{ID: "sub_" + strconv.Itoa(i), Tenant: subsTenantOf(i),
			URL:        "https://hooks.customer-" + strconv.Itoa(i) + ".example.com/webhooks/incoming",
			EventTypes: []string{"customer.created", "order." + strconv.Itoa(i) + ".*"}, Enabled: true, Secret: secret,
			CreatedAt: start.UTC(), UpdatedAt: start.UTC()}
		if i < subsBig {
			s.EventTypes = []string{"invoice.paid"}
		}
		e.cl.Produce(e.base, &kgo.Record{Topic: e.names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(keys)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Store(err)
				}
			})
	}
	if err := e.cl.Flush(e.base); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("writing the subscriptions: %v", err)
	}
	row("subscriptions written to the topic", "%d in %s", n, time.Since(start).Round(time.Millisecond))

	e.vars["WEBHOOKS_API_ADMIN_KEY"] = apiAdminKey
	type replica struct {
		name string
		p    *stack.Process
		ops  string
	}
	var replicas []replica
	for _, name := range []string{"dispatcher", "deliverer", "api"} {
		ops := testkit.FreeAddr(b)
		vars := map[string]string{"WEBHOOKS_HTTP_ADDR": ops}
		if name == "api" {
			vars["WEBHOOKS_API_ADDR"] = testkit.FreeAddr(b)
			e.vars["WEBHOOKS_API_ADDR"] = vars["WEBHOOKS_API_ADDR"]
		}
		start := time.Now()
		p := e.startProcWith(filepath.Join(bin, name), name, vars)
		wait(b, 10*time.Minute, name+" holding every subscription", func() bool {
			if code, _ := httpGet("http://" + ops + "/healthz"); code != http.StatusOK {
				return false
			}
			m, _ := scrape(b, ops)
			return m["webhooks_subscriptions"] == float64(n)
		})
		rss, _ := memoryOf(b, p.Pid())
		row(name+": ready (table caught up), resident memory", "%s, %.0f MB (%.2f MB per 1,000)",
			time.Since(start).Round(time.Millisecond), rss, rss*1000/float64(n))
		b.ReportMetric(time.Since(start).Seconds(), name+"-s-to-ready")
		replicas = append(replicas, replica{name, p, ops})
	}
	// The deliverer has nothing to deliver: stopped, it leaves both cores
	// to the dispatcher and the API.
	_, hwm := memoryOf(b, replicas[1].p.Pid())
	row("deliverer: peak resident memory", "%.0f MB (%.2f MB per 1,000)", hwm, hwm*1000/float64(n))
	_ = replicas[1].p.Stop(30 * time.Second)

	fanOut := func(events, each int, event func(i int) topics.Event) {
		evs := make([]topics.Event, events)
		for i := range evs {
			evs[i] = event(i)
		}
		start := time.Now()
		e.publish(evs...)
		wait(b, 10*time.Minute, "the dispatcher to fan out", func() bool {
			return caughtUp(e, topics.GroupDispatcher, e.names.Events())
		})
		took := time.Since(start)
		row(fmt.Sprintf("fan-out, each event to %d subscription(s)", each), "%.0f events/s, %.0f deliveries/s",
			float64(events)/took.Seconds(), float64(events*each)/took.Seconds())
		b.ReportMetric(float64(events)/took.Seconds(), fmt.Sprintf("events/s-to-%d", each))
	}
	// Warm up: the dispatcher joined its group.
	fanOut(10, 1, func(i int) topics.Event { return subsEvent(i, subsBig+i) })
	fanOut(5000, 1, func(i int) topics.Event { return subsEvent(i, subsBig+(i*7919)%(n-subsBig)) })
	fanOut(100, subsBig, func(i int) topics.Event {
		return topics.Event{ID: "evt_big_" + strconv.Itoa(i), Type: "invoice.paid", Tenant: "big", Data: json.RawMessage(`{}`)}
	})

	base := "http://" + e.vars["WEBHOOKS_API_ADDR"]
	create := func(prefix string, count int) time.Duration {
		return testkit.CreateSubscriptions(b, base, apiAdminKey, subsCreators, count, func(i int) string {
			return `{"id":"` + prefix + strconv.Itoa(i) + `","url":"https://hooks.new-` + strconv.Itoa(i) +
				`.example.com/in","event_types":["customer.created"],"tenant":"` + subsTenantOf(subsBig+i) + `"}`
		})
	}
	// Warm up: a broker just started runs its request paths interpreted
	// until the JVM compiled them, which on two busy cores takes tens of
	// thousands of requests (in-process creates on a new broker: 500 a
	// second in its first 4,000; on another, 1,900 after 48,000 plain
	// listings and produces and 24,000 creates), while the brokers users
	// run are warm. First the broker alone, with the requests a create
	// makes, then the API. The rate of each round is reported.
	warmBroker(b, e, row)
	var rates []string
	for round := range subsWarmRounds {
		took := create("warm"+strconv.Itoa(round)+"_", subsWarm)
		rates = append(rates, fmt.Sprintf("%.0f", float64(subsWarm)/took.Seconds()))
	}
	row(fmt.Sprintf("API: created by %d clients, warming up (%d rounds of %d)", subsCreators, subsWarmRounds, subsWarm), "%s subscriptions/s", strings.Join(rates, ", "))
	created := create("new_", subsCreate)
	row(fmt.Sprintf("API: created by %d clients", subsCreators), "%.0f subscriptions/s", float64(subsCreate)/created.Seconds())
	b.ReportMetric(float64(subsCreate)/created.Seconds(), "created/s")

	start = time.Now()
	pages, listed := 0, 0
	for cursor := ""; ; pages++ {
		var page struct {
			Data       []json.RawMessage `json:"data"`
			NextCursor string            `json:"next_cursor"`
		}
		call(b, http.MethodGet, base+"/v1/subscriptions?limit="+strconv.Itoa(subsPageLimit)+"&cursor="+cursor, apiAdminKey, nil, &page, http.StatusOK)
		listed += len(page.Data)
		if cursor = page.NextCursor; cursor == "" {
			pages++
			break
		}
	}
	if listed != n+subsWarmRounds*subsWarm+subsCreate {
		b.Fatalf("the list paged through %d subscriptions, want %d", listed, n+subsWarmRounds*subsWarm+subsCreate)
	}
	took := time.Since(start)
	row(fmt.Sprintf("API: list paged through all, %d per page", subsPageLimit), "%d pages in %s (%.1f ms a page)",
		pages, took.Round(time.Millisecond), float64(took.Microseconds())/1000/float64(pages))
	b.ReportMetric(float64(took.Microseconds())/1000/float64(pages), "ms/page")

	for _, r := range []replica{replicas[0], replicas[2]} {
		rss, hwm := memoryOf(b, r.p.Pid())
		row(r.name+": resident memory at the end, peak", "%.0f MB, %.0f MB (%.2f MB per 1,000 at the peak)", rss, hwm, hwm*1000/float64(n))
		b.ReportMetric(hwm*1000/float64(n), r.name+"-peak-MB/1000subs")
	}
	return rows
}

// subsEvent is an event that matches the i-th subscription only.
func subsEvent(n, i int) topics.Event {
	return topics.Event{ID: "evt_" + strconv.Itoa(n) + "_" + strconv.Itoa(i), Type: "order." + strconv.Itoa(i) + ".paid",
		Tenant: subsTenantOf(i), Data: json.RawMessage(`{}`)}
}

// memoryOf is a process's resident memory now and at its peak, in MB
// (VmRSS and VmHWM of /proc/PID/status).
func memoryOf(tb testing.TB, pid int) (rss, hwm float64) {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range bytes.Lines(status) {
		name, value, _ := strings.Cut(string(line), ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		switch name {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// warmBroker makes subsWarmRaw round trips of the requests a create makes
// (a produce of one record, acknowledged by all replicas, then a listing
// of the topic's last stable offsets: metadata and list offsets) from
// subsCreators clients at once, to a topic of its own.
func warmBroker(b *testing.B, e *env, row func(name, format string, args ...any)) {
	b.Helper()
	topic := e.names.Subscriptions() + ".warm"
	adm := kadm.NewClient(e.cl)
	if _, err := adm.CreateTopic(e.base, 1, -1, nil, topic); err != nil {
		b.Fatalf("creating %s: %v", topic, err)
	}
	start := time.Now()
	var left atomic.Int64
	left.Store(subsWarmRaw)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range subsCreators {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := e.cl.ProduceSync(e.base, &kgo.Record{Topic: topic, Value: []byte("warm")}).FirstErr(); err != nil {
					failed.Store(err)
					return
				}
				if _, err := adm.ListCommittedOffsets(e.base, topic); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("warming the broker up: %v", err)
	}
	took := time.Since(start)
	row(fmt.Sprintf("broker warmed up: produces and listings by %d clients", subsCreators), "%d in %s (%.0f/s)",
		subsWarmRaw, took.Round(time.Millisecond), subsWarmRaw/took.Seconds())
}
