package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkPipeline is `make bench`: on this machine, in one run, it
// measures the raw limit (a plain Go HTTP client posting the same signed
// payloads to the same receiver), end-to-end deliveries per second through
// dispatcher and deliverer, their ratio, and publish-to-receipt latency at
// half the end-to-end maximum. It prints a table.
func BenchmarkPipeline(b *testing.B) {
	const (
		subs      = 4
		n         = 20000
		rawConc   = 64
		dataBytes = 512
	)
	for b.Loop() {
		e := newEnv(b)
		r := newReceiver(b)
		var all []topics.Subscription
		for i := range subs {
			id := fmt.Sprintf("bench-%d", i)
			s := e.subscribe(topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{fmt.Sprintf("bench.t%d", i)}, Enabled: true})
			r.trust(s)
			all = append(all, s)
		}
		data := `{"pad":"` + strings.Repeat("x", dataBytes-10) + `"}`

		raw := rawLimit(b, r, all, data, n, rawConc)

		e.startDispatcher()
		e.startDeliverer()
		e.startRetrier()
		event := func(i int) topics.Event {
			return topics.Event{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), i), Type: fmt.Sprintf("bench.t%d", i%subs),
				CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(data)}
		}
		// Warm up: groups joined, connections open.
		base := r.count()
		publishAsync(b, e, 200, event)
		wait(b, 120*time.Second, "warm-up deliveries", func() bool { return r.count() >= base+200 })

		base = r.count()
		start := time.Now()
		publishAsync(b, e, n, event)
		wait(b, 300*time.Second, "every benchmark delivery", func() bool { return r.count() >= base+n })
		e2e := float64(n) / time.Since(start).Seconds()

		// Latency at half the end-to-end maximum, for 5 seconds.
		base = r.count()
		rate := max(1, int(e2e/2))
		sent := publishAtRate(b, e, rate, 5*time.Second, event)
		wait(b, 120*time.Second, "latency-run deliveries", func() bool { return r.count() >= base+sent })
		p50, p99 := latencies(r.got()[base:])

		fmt.Fprintf(os.Stdout, "\n%-48s %12s\n", "measure", "value")
		fmt.Fprintf(os.Stdout, "%-48s %12.0f\n", fmt.Sprintf("raw limit: plain client, %d concurrent (req/s)", rawConc), raw)
		fmt.Fprintf(os.Stdout, "%-48s %12.0f\n", "end-to-end deliveries/s (publish to receipt)", e2e)
		fmt.Fprintf(os.Stdout, "%-48s %12.2f\n", "ratio end-to-end / raw", e2e/raw)
		fmt.Fprintf(os.Stdout, "%-48s %12d\n", "latency run: events/s (half the maximum)", rate)
		fmt.Fprintf(os.Stdout, "%-48s %12s\n", "p50 publish-to-receipt", p50.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-48s %12s\n", "p99 publish-to-receipt", p99.Round(100*time.Microsecond))
		b.ReportMetric(raw, "raw-req/s")
		b.ReportMetric(e2e, "e2e-deliveries/s")
		b.ReportMetric(e2e/raw, "ratio")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	}
}

// endpoint is a receiver, in the benchmark's process or its own.
type endpoint interface {
	url(sub string) string
	count() int // requests accepted
}

// rawLimit posts n signed requests with conc goroutines sharing one
// http.Client, and returns requests per second.
func rawLimit(b *testing.B, r endpoint, subs []topics.Subscription, data string, n, conc int) float64 {
	b.Helper()
	type target struct {
		url string
		wh  *standardwebhooks.Webhook
	}
	targets := make([]target, len(subs))
	for i, s := range subs {
		wh, err := standardwebhooks.NewWebhook(s.Secret)
		if err != nil {
			b.Fatal(err)
		}
		targets[i] = target{r.url(s.ID), wh}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxIdleConns: conc}
	if tl, ok := r.(interface{ tlsRoots() *x509.CertPool }); ok && tl.tlsRoots() != nil {
		// https as the deliverer speaks it: HTTP/2 where offered.
		tr.TLSClientConfig, tr.ForceAttemptHTTP2 = &tls.Config{RootCAs: tl.tlsRoots()}, true
	}
	client := &http.Client{Transport: tr}
	var next atomic.Int64
	var failed atomic.Int64
	base := r.count()
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				tg := targets[i%len(targets)]
				id := fmt.Sprintf("raw_%d", i)
				now := time.Now()
				body := []byte(`{"id":"` + id + `","type":"bench.raw","timestamp":"` + now.UTC().Format(time.RFC3339Nano) + `","data":` + data + `}`)
				sig, _ := tg.wh.Sign(id, now, body)
				req, _ := http.NewRequest(http.MethodPost, tg.url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("webhook-id", id)
				req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
				req.Header.Set("webhook-signature", sig)
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode >= 300 {
					failed.Add(1)
				}
				if err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 || r.count()-base != n {
		b.Fatalf("raw client: %d failed, %d received of %d", failed.Load(), r.count()-base, n)
	}
	return float64(n) / elapsed.Seconds()
}

// publishAsync produces n events as fast as the client batches them.
func publishAsync(b *testing.B, e *env, n int, event func(int) topics.Event) {
	b.Helper()
	var errs atomic.Int64
	for i := range n {
		v, _ := json.Marshal(event(i))
		e.cl.Produce(context.Background(), &kgo.Record{Topic: e.names.Events(), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
			}
		})
	}
	if err := e.cl.Flush(context.Background()); err != nil || errs.Load() > 0 {
		b.Fatalf("publishing: %v (%d failed)", err, errs.Load())
	}
}

// publishAtRate produces rate events per second for d, in 10 ms ticks, and
// returns how many it sent.
func publishAtRate(b *testing.B, e *env, rate int, d time.Duration, event func(int) topics.Event) int {
	b.Helper()
	return publishEvery(b, e, rate, d, 10*time.Millisecond, event)
}

// publishEvery is publishAtRate in ticks of tick.
func publishEvery(b *testing.B, e *env, rate int, d, tick time.Duration, event func(int) topics.Event) int {
	b.Helper()
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	sent := 0
	for now := range t.C {
		if now.Sub(start) >= d {
			break
		}
		due := int(now.Sub(start).Seconds() * float64(rate))
		for ; sent < due; sent++ {
			v, _ := json.Marshal(event(sent))
			e.cl.Produce(context.Background(), &kgo.Record{Topic: e.names.Events(), Value: v}, nil)
		}
	}
	if err := e.cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	return sent
}

// latencies are the p50 and p99 of receipt time minus the event's
// created_at (set just before publishing).
func latencies(reqs []request) (p50, p99 time.Duration) {
	return percentiles(durations(reqs))
}

// durations are the requests' receipt times minus their events' created_at.
func durations(reqs []request) []time.Duration {
	var ls []time.Duration
	for _, q := range reqs {
		if !q.Timestamp.IsZero() {
			ls = append(ls, q.At.Sub(q.Timestamp))
		}
	}
	return ls
}

// percentiles are the p50 and p99 of ls.
func percentiles(ls []time.Duration) (p50, p99 time.Duration) {
	if len(ls) == 0 {
		return 0, 0
	}
	ls = slices.Sorted(slices.Values(ls))
	return ls[len(ls)*50/100], ls[len(ls)*99/100]
}

// floorLimit is the least an HTTP/1.1 request costs a client here: a
// minimal one (no HTTP library; every request signed and rendered before
// the clock starts, written whole, its answer read up to the blank line
// that ends its head) posts n requests to r over conc kept-alive
// connections. It returns requests per second and this process's CPU per
// request. r must answer without a body, as the receiver process does.
func floorLimit(b *testing.B, r endpoint, subs []topics.Subscription, data string, n, conc int) (float64, time.Duration) {
	b.Helper()
	reqs := make([][]byte, n)
	var host string
	for i := range reqs {
		s := subs[i%len(subs)]
		wh, err := standardwebhooks.NewWebhook(s.Secret)
		if err != nil {
			b.Fatal(err)
		}
		u, err := url.Parse(r.url(s.ID))
		if err != nil || u.Scheme != "http" {
			b.Fatalf("floor client: %q is not an http URL (%v)", r.url(s.ID), err)
		}
		host = u.Host
		id, now := fmt.Sprintf("floor_%d", i), time.Now()
		body := `{"id":"` + id + `","type":"bench.raw","timestamp":"` + now.UTC().Format(time.RFC3339Nano) + `","data":` + data + `}`
		sig, _ := wh.Sign(id, now, []byte(body))
		reqs[i] = fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nwebhook-id: %s\r\n"+
			"webhook-timestamp: %d\r\nwebhook-signature: %s\r\nContent-Length: %d\r\n\r\n%s",
			u.RequestURI(), u.Host, id, now.Unix(), sig, len(body), body)
	}
	conns := make([]net.Conn, conc)
	for i := range conns {
		c, err := net.Dial("tcp", host)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	var next, failed atomic.Int64
	base := r.count()
	cpu, start := processCPU(b), time.Now()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			br := bufio.NewReader(c)
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := c.Write(reqs[i]); err != nil {
					failed.Add(1)
					return
				}
				status, err := br.ReadSlice('\n')
				if err != nil || !bytes.HasPrefix(status, []byte("HTTP/1.1 2")) {
					failed.Add(1)
					return
				}
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						failed.Add(1)
						return
					}
					if len(line) <= 2 {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed, used := time.Since(start), processCPU(b)-cpu
	if failed.Load() > 0 || r.count()-base != n {
		b.Fatalf("floor client: %d connections failed, %d received of %d", failed.Load(), r.count()-base, n)
	}
	return float64(n) / elapsed.Seconds(), used / time.Duration(n)
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
