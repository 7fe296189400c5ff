package e2e

import (
	"github.com/hookpipe/hookpipe/runtime/testkit"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkIngest is the API's row of `make bench`: events per second
// through POST /v1/events (bin/api as its own process, the broker on TCP),
// one event per request from 64 concurrent clients and in batches of 100,
// against producing the same events with franz-go directly (64 concurrent
// synchronous produces), with the ratio and the p99 request latency.
func BenchmarkIngest(b *testing.B) {
	const (
		n    = 20000
		conc = 64
	)
	for b.Loop() {
		e := newEnv(b)
		addr := testkit.FreeAddr(b)
		e.vars["WEBHOOKS_API_ADDR"], e.vars["WEBHOOKS_API_ADMIN_KEY"], e.vars["WEBHOOKS_API_RATE_LIMIT"] = addr, apiAdminKey, "0"
		e.startProc(filepath.Join(binaries(b), "api"), "api")
		base := "http://" + addr
		wait(b, 30*time.Second, "the API to answer", func() bool {
			resp, err := http.Get(base + "/openapi.json")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		event := func(i int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("evt_ingest_%d", i), "type": "order.created", "tenant": "acme",
				"key": fmt.Sprintf("order_%d", i%500), "data": map[string]string{"pad": strings.Repeat("x", 180)}}
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
		post := func(path string, body any) time.Duration {
			j, _ := json.Marshal(body)
			req, _ := http.NewRequest("POST", base+path, bytes.NewReader(j))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+apiAdminKey)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return 0
			}
			// Read to the end: the connection is reused only then.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("POST %s: %d", path, resp.StatusCode)
			}
			return time.Since(start)
		}
		// run spreads jobs over conc workers and returns the rate in events
		// per second and the p99 of the jobs' durations.
		run := func(jobs, perJob int, do func(i int) time.Duration) (float64, time.Duration) {
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			start := time.Now()
			var wg sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for i := int(next.Add(1)) - 1; i < jobs; i = int(next.Add(1)) - 1 {
						d := do(i)
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			rate := float64(jobs*perJob) / time.Since(start).Seconds()
			slices.Sort(lat)
			return rate, lat[len(lat)*99/100]
		}
		run(200, 1, func(i int) time.Duration { return post("/v1/events", event(-1-i)) }) // warm-up

		single, singleP99 := run(n, 1, func(i int) time.Duration { return post("/v1/events", event(i)) })
		batch, batchP99 := run(n/100, 100, func(i int) time.Duration {
			evs := make([]any, 100)
			for j := range evs {
				evs[j] = event(n + i*100 + j)
			}
			return post("/v1/events/batch", map[string]any{"events": evs})
		})
		// The HTTP ceiling of this machine: a handler that only reads the
		// body and answers 202, served by net/http in this process, to the
		// same client.
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusAccepted)
		}))
		plainBase := base
		base = plain.URL
		ceiling, ceilingP99 := run(n, 1, func(i int) time.Duration { return post("/v1/events", event(i)) })
		base = plainBase
		plain.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
		if err != nil {
			b.Fatal(err)
		}
		values := make([][]byte, n)
		for i := range values {
			values[i], _ = json.Marshal(event(2*n + i))
		}
		direct, directP99 := run(n, 1, func(i int) time.Duration {
			start := time.Now()
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: e.names.Events(),
				Key: []byte(fmt.Sprintf("order_%d", i%500)), Value: values[i]}).FirstErr(); err != nil {
				b.Error(err)
			}
			return time.Since(start)
		})
		cl.Close()
		b.ReportMetric(single, "single-events/s")
		b.ReportMetric(batch, "batched-events/s")
		b.ReportMetric(direct, "direct-events/s")
		b.ReportMetric(single/direct, "single/direct")
		b.ReportMetric(ceiling/direct, "http-ceiling/direct")
		b.Logf("\n| ingest (%d events, %d clients) | events/s | p99 request |\n|---|---|---|\n"+
			"| POST /v1/events, one per request | %.0f | %v |\n| POST /v1/events/batch, 100 per request | %.0f | %v |\n"+
			"| franz-go ProduceSync, one per call | %.0f | %v |\n| single / direct | %.2f | |\n"+
			"| net/http answering 202 without work, one per request (the HTTP ceiling here) | %.0f | %v |\n| ceiling / direct | %.2f | |",
			n, conc, single, singleP99.Round(time.Microsecond), batch, batchP99.Round(time.Microsecond),
			direct, directP99.Round(time.Microsecond), single/direct, ceiling, ceilingP99.Round(time.Microsecond), ceiling/direct)
		e.close()
	}
}
