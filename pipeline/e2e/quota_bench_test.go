package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

const (
	quotaRate    = 100 // WEBHOOKS_TENANT_RATE: deliveries/s of one tenant
	quotaQuiet   = 40  // events/s of the quiet tenant, two subscriptions: 80 deliveries/s, under its quota
	quotaLoud    = 10 * quotaRate
	quotaLatency = 10 * time.Second
)

// BenchmarkTenantQuota is the tenant-quota figure of `make bench`: a quiet
// tenant (two subscriptions, 80 deliveries/s, under its quota of 100/s)
// measured alone and next to a loud tenant flooding ten times its quota
// (1,000 deliveries/s, 900 of them delayed through the retry tier each
// second). Reported: the quiet tenant's p50 and p99 publish-to-receipt and
// the ratio of its p99 to running alone; the loud tenant's deliveries
// within the run, which its quota bounds. The two sides alternate, three
// runs each (ABBAAB), each on a fresh broker and pipeline.
func BenchmarkTenantQuota(b *testing.B) {
	srv := redistest.Start(b)
	sides := []string{"alone", "+flood 10x quota"}
	order := []int{0, 1, 1, 0, 0, 1}
	for b.Loop() {
		lat := make([][]time.Duration, len(sides))
		loud := make([]int, len(sides))
		for i, side := range order {
			l, n := quotaRun(b, side == 1, srv.URL(), fmt.Sprintf("quota%d-%d:", time.Now().UnixNano(), i))
			lat[side] = append(lat[side], l...)
			loud[side] += n
		}
		p50a, p99a := percentiles(lat[0])
		p50f, p99f := percentiles(lat[1])
		fmt.Fprintln(os.Stdout)
		fmt.Fprintf(os.Stdout, "%-52s %14s %18s\n", fmt.Sprintf("tenant quota %d/s, %d runs each", quotaRate, len(order)/2), sides[0], sides[1])
		fmt.Fprintf(os.Stdout, "%-52s %14s %18s\n", "quiet tenant p50 (80 deliveries/s)", p50a.Round(100*time.Microsecond), p50f.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-52s %14s %18s\n", "quiet tenant p99", p99a.Round(100*time.Microsecond), p99f.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-52s %14s %18.2f\n", "quiet p99 ratio to alone", "", float64(p99f)/float64(p99a))
		fmt.Fprintf(os.Stdout, "%-52s %14s %18s\n", fmt.Sprintf("loud deliveries/s in the runs (sent %d/s)", quotaLoud), "",
			fmt.Sprintf("%.0f", float64(loud[1])/(float64(len(order)/2)*quotaLatency.Seconds())))
		b.ReportMetric(float64(p99f)/float64(p99a), "quiet-p99-ratio")
	}
}

// quotaRun is one run: the quiet tenant's events at quotaQuiet per second
// for quotaLatency, with flood the loud tenant's at quotaLoud besides. It
// returns the quiet tenant's latencies and how many loud deliveries were
// received by the end of the run.
func quotaRun(b *testing.B, flood bool, redisURL, prefix string) ([]time.Duration, int) {
	e := newEnv(b)
	defer e.close()
	e.withRedis(redisURL, prefix, map[string]string{"WEBHOOKS_TENANT_RATE": fmt.Sprint(quotaRate)})
	r := newReceiver(b)
	r.answer(func(request, http.ResponseWriter) int { return http.StatusNoContent })
	for _, s := range []struct{ id, tenant string }{{"quiet-1", "quiet"}, {"quiet-2", "quiet"}, {"loud-1", "loud"}} {
		r.trust(e.subscribe(topics.Subscription{ID: s.id, Tenant: s.tenant, URL: r.url(s.id), EventTypes: []string{"*"}, Enabled: true}))
	}
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	count := r.accepted
	pad := json.RawMessage(`{"pad":"` + strings.Repeat("x", 200) + `"}`)
	quiet := func(i int) topics.Event {
		return topics.Event{ID: fmt.Sprintf("evt_q_%d_%d", time.Now().UnixNano(), i), Type: "quota.e", Tenant: "quiet",
			CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: pad}
	}
	publishAsync(b, e, 20, quiet)
	wait(b, 60*time.Second, "warm-up", func() bool { return count("quiet-") >= 40 })
	before := len(r.got())
	rate, event := quotaQuiet, quiet
	if flood {
		// One event in 26 is the quiet tenant's: 40/s next to 1,000/s.
		rate = quotaQuiet + quotaLoud
		event = func(i int) topics.Event {
			if i%(quotaLoud/quotaQuiet+1) == 0 {
				return quiet(i)
			}
			ev := quiet(i)
			ev.ID, ev.Tenant = strings.Replace(ev.ID, "_q_", "_l_", 1), "loud"
			return ev
		}
	}
	sent := publishAtRate(b, e, rate, quotaLatency, event)
	k := rate / quotaQuiet // events per quiet event
	wantQuiet := 2 * ((sent + k - 1) / k)
	wait(b, 120*time.Second, "the quiet tenant's deliveries", func() bool { return count("quiet-") >= 40+wantQuiet })
	var lat []request
	loud := 0
	for _, q := range r.got()[before:] {
		switch {
		case strings.HasPrefix(q.Sub, "quiet-"):
			lat = append(lat, q)
		case strings.HasPrefix(q.Sub, "loud-"):
			loud++
		}
	}
	return durations(lat), loud
}
