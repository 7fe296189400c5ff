package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/retrier"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// getenvWith is the env's getenv with WEBHOOKS_HTTP_ADDR set to addr.
func (e *env) getenvWith(addr string) func(string) string {
	return func(k string) string {
		if k == config.EnvHTTPAddr {
			return addr
		}
		return e.vars[k]
	}
}

// httpGet returns the status and body, or status 0 when nothing answers.
func httpGet(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape reads /metrics into series ("name{labels}" as exposed) -> value.
// A scrape that fails is logged and reads as no series: most callers
// scrape until series appear, and one slow answer on a loaded machine must
// not end their wait.
func scrape(t testing.TB, addr string) (map[string]float64, string) {
	t.Helper()
	code, body := httpGet("http://" + addr + "/metrics")
	if code != http.StatusOK {
		t.Logf("GET %s/metrics: %d %s", addr, code, body)
		return map[string]float64{}, body
	}
	out := map[string]float64{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out, body
}

// startServing runs the dispatcher, deliverer and retrier of e, each with
// its own WEBHOOKS_HTTP_ADDR, and waits until each is ready. It returns the
// addresses by component and a stop for the deliverer.
func (e *env) startServing() (addrs map[string]string, stopDeliverer func()) {
	t := e.t
	t.Helper()
	addrs = map[string]string{"dispatcher": testkit.FreeAddr(t), "deliverer": testkit.FreeAddr(t), "retrier": testkit.FreeAddr(t)}
	dcfg, err := dispatcher.LoadConfig(e.getenvWith(addrs["dispatcher"]))
	if err != nil {
		t.Fatal(err)
	}
	wcfg, err := deliverer.LoadConfig(e.getenvWith(addrs["deliverer"]))
	if err != nil {
		t.Fatal(err)
	}
	rcfg, err := retrier.LoadConfig(e.getenvWith(addrs["retrier"]))
	if err != nil {
		t.Fatal(err)
	}
	log := e.logger()
	e.run("dispatcher", func(ctx context.Context) error { return dispatcher.Run(ctx, dcfg, log.Named("d")) })
	stopDeliverer = e.run("deliverer", func(ctx context.Context) error { return deliverer.Run(ctx, wcfg, log.Named("w")) })
	e.run("retrier", func(ctx context.Context) error { return retrier.Run(ctx, rcfg, log.Named("r")) })
	for name, addr := range addrs {
		wait(t, 60*time.Second, name+" /healthz", func() bool { code, _ := httpGet("http://" + addr + "/healthz"); return code == 200 })
		wait(t, 60*time.Second, name+" /readyz", func() bool { code, _ := httpGet("http://" + addr + "/readyz"); return code == 200 })
	}
	return addrs, stopDeliverer
}

// waitMetrics scrapes addr until every series of want is present with its
// value (a negative value: present, any value), failing after a minute. It
// returns the last scrape.
func waitMetrics(t testing.TB, addr, name string, want map[string]float64) (map[string]float64, string) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got, body := scrape(t, addr)
		missing := ""
		for series, v := range want {
			if g, ok := got[series]; !ok || (v >= 0 && g != v) {
				missing = fmt.Sprintf("%s = %v (present %v), want %v", series, g, ok, v)
				break
			}
		}
		if missing == "" {
			return got, body
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s metrics: %s", name, missing)
		case <-tick.C:
		}
	}
}

// TestOpsEndpoints: dispatcher, deliverer and retrier serve /healthz,
// /readyz and /metrics on WEBHOOKS_HTTP_ADDR; the metrics count what the
// pipeline did, by outcome, class, tier and category, never by
// subscription or URL; the endpoint goes away when the component stops.
func TestOpsEndpoints(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	var mu sync.Mutex
	tries := map[string]int{}
	r.answer(func(q request, _ http.ResponseWriter) int {
		switch q.Sub {
		case "sub-ops-bad":
			return http.StatusBadRequest // permanent: dead-lettered
		case "sub-ops-flaky":
			mu.Lock()
			defer mu.Unlock()
			if tries[q.ID]++; tries[q.ID] == 1 {
				return http.StatusServiceUnavailable
			}
		}
		return http.StatusNoContent
	})
	for _, id := range []string{"sub-ops-ok", "sub-ops-flaky", "sub-ops-bad"} {
		r.trust(e.subscribe(topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{"*"}, Enabled: true,
			RetrySchedule: []string{"1s"}}))
	}
	addrs, stopDeliverer := e.startServing()
	const n = 5
	for i := range n {
		e.publish(topics.Event{ID: fmt.Sprintf("evt-%d", i), Type: "order.created", Data: []byte(`{}`)})
	}
	e.produceEvent([]byte("not json")) // dead-lettered by the dispatcher

	lag := func(group, topic string) string {
		return fmt.Sprintf(`webhooks_consumer_lag{group=%q,topic=%q}`, e.group(group), topic)
	}
	expect := map[string]map[string]float64{
		"dispatcher": {
			`webhooks_dispatcher_events_total`:                       n + 1,
			`webhooks_dispatcher_deliveries_total`:                   3 * n,
			`webhooks_dlq_total{category="invalid_record"}`:          1,
			lag(topics.GroupDispatcher, e.names.Events()):            -1, // present
			`webhooks_dispatcher_transaction_duration_seconds_count`: -1,
		},
		"deliverer": {
			`webhooks_deliveries_total{outcome="success"}`:     2 * n,
			`webhooks_deliveries_total{outcome="retry"}`:       n,
			`webhooks_deliveries_total{outcome="dead"}`:        n,
			`webhooks_http_responses_total{class="2xx"}`:       2 * n,
			`webhooks_http_responses_total{class="4xx"}`:       n,
			`webhooks_http_responses_total{class="5xx"}`:       n,
			`webhooks_http_responses_total{class="error"}`:     0,
			`webhooks_retries_total{tier="1s"}`:                n,
			`webhooks_dlq_total{category="permanent_4xx"}`:     n,
			`webhooks_delivery_duration_seconds_count`:         4 * n,
			`webhooks_deliveries_in_flight`:                    0,
			`webhooks_deliveries_unsettled`:                    0,
			lag(topics.GroupDeliverer, e.names.Deliveries()):   -1,
			lag(topics.GroupDeliverer, e.names.Redeliveries()): -1,
		},
		"retrier": {
			`webhooks_retrier_released_total`:                  n,
			`webhooks_retrier_held_records{tier="1s"}`:         0,
			`webhooks_retrier_release_lateness_seconds_count`:  n,
			`webhooks_retrier_overrun_partitions{tier="1s"}`:   0,
			lag(topics.GroupRetrier, e.names.RetryTopics()[0]): -1,
		},
	}
	for name, want := range expect {
		got, body := waitMetrics(t, addrs[name], name, want)
		for series := range got {
			if !strings.HasPrefix(series, "webhooks_") && !strings.HasPrefix(series, "go_") &&
				!strings.HasPrefix(series, "process_") {
				t.Errorf("%s: metric %s does not start with webhooks_", name, series)
			}
		}
		if !strings.Contains(body, "webhooks_kafka_") {
			t.Errorf("%s: no franz-go client metrics (webhooks_kafka_*)", name)
		}
		if strings.Contains(body, "sub-ops") || strings.Contains(body, r.srv.URL) {
			t.Errorf("%s: a metric carries a subscription id or URL", name)
		}
	}

	stopDeliverer()
	if code, _ := httpGet("http://" + addrs["deliverer"] + "/healthz"); code != 0 {
		t.Errorf("deliverer /healthz answers %d after Run returned", code)
	}
}
