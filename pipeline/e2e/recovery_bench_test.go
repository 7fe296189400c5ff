package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkRecovery is the recovery figure of `make bench`: an endpoint
// down for a time-compressed "2 hours" while events accumulate, then back;
// how long until every event was delivered, with and without recovery
// acceleration, side by side.
//
// Time is compressed: the tiers are 1s, 5s and 20s (the 20s tier stands
// for the 2h one), the outage lasts 20s, the breaker sleeps 1s between
// probes. While the breaker is open, deliveries are blocked and wait in the
// shortest tier without using attempts; the ones that were attempted and
// failed (before it opened, and failed probes) climb to the long tiers.
// Without acceleration those wait out their tiers after the endpoint is
// back; with it, the retrier releases them once the breaker closed, at
// WEBHOOKS_RECOVERY_RATE per second, ramped up from a tenth of it over
// WEBHOOKS_RECOVERY_RAMP (10s here, for 5m); the endpoint's requests per
// second after it is back are drawn for that run.
func BenchmarkRecovery(b *testing.B) {
	const (
		outage   = 20 * time.Second
		rate     = 10 // events/s during the outage
		ramp     = 50 // WEBHOOKS_RECOVERY_RATE with acceleration
		rampTime = 10 * time.Second
	)
	srv := redistest.Start(b)
	for b.Loop() {
		type result struct {
			events int
			drain  time.Duration
			failed int // HTTP attempts during the outage
			// waiting: deliveries due more than 1s after the endpoint was back
			waiting, blocked int
			// perSecond: requests the endpoint got in each second after it
			// was back
			perSecond []int
		}
		runs := 0
		run := func(accelerate bool) result {
			runs++
			e := newEnv(b)
			e.withTiers("1s,5s,20s")
			recoveryRate := "0"
			if accelerate {
				recoveryRate = fmt.Sprint(ramp)
			}
			e.withRedis(srv.URL(), fmt.Sprintf("bench%d-%d:", time.Now().UnixNano(), runs), map[string]string{
				"WEBHOOKS_BREAKER_MIN_CALLS": "10",
				"WEBHOOKS_BREAKER_THRESHOLD": "50",
				"WEBHOOKS_BREAKER_WINDOW":    "10s",
				"WEBHOOKS_BREAKER_SLEEP":     "1s",
				"WEBHOOKS_BREAKER_PROBES":    "3",
				"WEBHOOKS_RECOVERY_RATE":     recoveryRate,
				"WEBHOOKS_RECOVERY_RAMP":     rampTime.String(),
			})
			r := newReceiver(b)
			var down atomic.Bool
			down.Store(true)
			var failed atomic.Int64
			r.answer(func(request, http.ResponseWriter) int {
				if down.Load() {
					failed.Add(1)
					return http.StatusServiceUnavailable
				}
				return http.StatusNoContent
			})
			s := topics.Subscription{ID: "recovering", URL: r.url("recovering"), EventTypes: []string{"rec.*"}, Enabled: true,
				RetrySchedule: []string{"1s", "5s", "20s", "20s", "20s", "20s", "20s", "20s", "20s", "20s", "20s", "20s"}}
			r.trust(e.subscribe(s))
			e.startDispatcher()
			e.startDeliverer()
			e.startRetrier()
			event := func(i int) topics.Event {
				return topics.Event{ID: fmt.Sprintf("rec_%d_%d", time.Now().UnixNano(), i), Type: "rec.created",
					CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(`{"n":1}`)}
			}
			sent := publishAtRate(b, e, rate, outage, event)
			down.Store(false)
			back := time.Now()
			wait(b, 180*time.Second, "every event after the outage", func() bool {
				ids := map[string]bool{}
				for _, q := range r.got() {
					ids[q.ID] = true
				}
				return len(ids) >= sent
			})
			res := result{events: sent, drain: time.Since(back), failed: int(failed.Load())}
			for _, q := range r.got() {
				if q.At.Before(back) {
					continue
				}
				sec := int(q.At.Sub(back) / time.Second)
				for len(res.perSecond) <= sec {
					res.perSecond = append(res.perSecond, 0)
				}
				res.perSecond[sec]++
			}
			// From the attempt records: the deliveries that, when the
			// endpoint came back, waited in a tier until more than a
			// breaker sleep later (their last record before it).
			successes := 0
			last := map[string]topics.Attempt{}
			for _, rec := range e.consume(e.names.Attempts(), 60*time.Second, func(recs []*kgo.Record) bool {
				successes = 0
				for _, r := range recs {
					if a, err := topics.DecodeAttempt(r.Value); err == nil && a.Outcome == topics.OutcomeSuccess {
						successes++
					}
				}
				return successes >= sent
			}) {
				a, err := topics.DecodeAttempt(rec.Value)
				if err != nil {
					continue
				}
				if a.Outcome == topics.OutcomeBlocked {
					res.blocked++
				}
				if a.TS.Before(back) && a.TS.After(last[a.EventID].TS) {
					last[a.EventID] = a
				}
			}
			for _, a := range last {
				if a.NextAttemptAt.After(back.Add(time.Second)) {
					res.waiting++
				}
			}
			return res
		}
		without := run(false)
		with := run(true)
		fmt.Fprintf(os.Stdout, "\n%-58s %12s %12s\n",
			fmt.Sprintf("recovery: %s outage (\"2h\"), tiers 1s,5s,20s", outage), "without", fmt.Sprintf("with %d/s", ramp))
		fmt.Fprintf(os.Stdout, "%-58s %12d %12d\n", fmt.Sprintf("events published during the outage (%d/s)", rate), without.events, with.events)
		fmt.Fprintf(os.Stdout, "%-58s %12d %12d\n", "failed HTTP attempts during the outage", without.failed, with.failed)
		fmt.Fprintf(os.Stdout, "%-58s %12d %12d\n", "deliveries blocked by the breaker (not attempts)", without.blocked, with.blocked)
		fmt.Fprintf(os.Stdout, "%-58s %12d %12d\n", "deliveries waiting in tiers >1s after it is back", without.waiting, with.waiting)
		fmt.Fprintf(os.Stdout, "%-58s %12s %12s\n", "time to drain after the endpoint is back",
			without.drain.Round(10*time.Millisecond), with.drain.Round(10*time.Millisecond))
		fmt.Fprintf(os.Stdout, "%-58s %12.1f\n", "speed-up", without.drain.Seconds()/with.drain.Seconds())
		fmt.Fprintf(os.Stdout, "\nrequests to the endpoint per second after it is back, with %d/s ramped over %v:\n", ramp, rampTime)
		for sec, n := range with.perSecond {
			fmt.Fprintf(os.Stdout, "%4ds %4d %s\n", sec, n, strings.Repeat("#", (n+1)/2))
		}
		b.ReportMetric(without.drain.Seconds(), "drain-s-without")
		b.ReportMetric(with.drain.Seconds(), "drain-s-with")
	}
}
