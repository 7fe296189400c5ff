package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkPriorities is the priority figure of issue 14: the p99
// publish-to-receipt latency of high-priority events at a modest rate,
// measured idle and while 50,000 low-priority deliveries are queued, for
// endpoints that take prioLowTook on average (four subscriptions, enough to
// keep every worker busy). Target: at most twice the idle p99. One run of each,
// on a fresh broker and pipeline.
func BenchmarkPriorities(b *testing.B) {
	for b.Loop() {
		idle := priorityRun(b, false)
		busy := priorityRun(b, true)
		ip50, ip99 := percentiles(idle.lat)
		bp50, bp99 := percentiles(busy.lat)
		ratio := float64(bp99) / float64(ip99)
		fmt.Fprintln(os.Stdout)
		fmt.Fprintf(os.Stdout, "%-48s %12s %12s\n", fmt.Sprintf("priorities: high at %d events/s for %s", prioRate, prioFor), "idle", "+50k low")
		fmt.Fprintf(os.Stdout, "%-48s %12s %12s\n", "high p50", ip50.Round(100*time.Microsecond), bp50.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-48s %12s %12s\n", "high p99", ip99.Round(100*time.Microsecond), bp99.Round(100*time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-48s %12s %12.2f\n", "p99 ratio to idle (target <= 2)", "", ratio)
		fmt.Fprintf(os.Stdout, "%-48s %12s %12s\n", "low delivered by the end (of 50000)", "", fmt.Sprint(busy.lowDelivered))
		b.ReportMetric(ratio, "p99-ratio")
		b.ReportMetric(float64(bp99.Microseconds())/1000, "high-p99-ms")
	}
}

const (
	prioRate    = 200 // high events/s
	prioFor     = 5 * time.Second
	prioLow     = 50_000 // low deliveries: prioLowSubs per event
	prioLowSubs = 4
	prioLowTook = 200 * time.Millisecond // on average
)

// priorityResult is what one run measured: the high-priority latency
// samples and the low-priority deliveries made by the end.
type priorityResult struct {
	lat          []time.Duration
	lowDelivered int
}

// priorityRun is one run on a fresh broker and pipeline. With low, the
// low-priority backlog is published first, and the high-priority run starts
// once all of it was dispatched: queued for the deliverer.
func priorityRun(b *testing.B, low bool) priorityResult {
	e := newEnv(b)
	defer e.close()
	r := newReceiver(b)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if strings.HasPrefix(q.Sub, "low-") {
			// A slow-ish endpoint, its answers spread as real ones
			// are: with one fixed delay, every worker would start and
			// finish in step, none free for 200 ms at a time.
			time.Sleep(rand.N(2 * prioLowTook))
		}
		return http.StatusNoContent
	})
	r.trust(e.subscribe(topics.Subscription{ID: "high", URL: r.url("high"), EventTypes: []string{"prio.high"}, Enabled: true}))
	for i := range prioLowSubs {
		id := fmt.Sprintf("low-%d", i)
		r.trust(e.subscribe(topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{"prio.low"}, Enabled: true}))
	}
	e.startDispatcher()
	e.startDeliverer()
	count := r.accepted
	event := func(typ, priority string) func(int) topics.Event {
		return func(i int) topics.Event {
			return topics.Event{ID: fmt.Sprintf("evt_%s_%d_%d", typ, time.Now().UnixNano(), i), Type: "prio." + typ, Priority: priority,
				CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Data: json.RawMessage(`{"pad":"` + strings.Repeat("x", 500) + `"}`)}
		}
	}
	high := event("high", topics.PriorityHigh)
	publishAsync(b, e, 20, high)
	wait(b, 60*time.Second, "warm-up", func() bool { return count("high") >= 20 })
	if low {
		publishAsync(b, e, prioLow/prioLowSubs, event("low", topics.PriorityLow))
		wait(b, 120*time.Second, "the low-priority backlog dispatched", func() bool { return caughtUp(e, topics.GroupDispatcher, e.names.Events()) })
	}
	before := len(r.got())
	sent := publishAtRate(b, e, prioRate, prioFor, high)
	wait(b, 120*time.Second, "the high-priority deliveries", func() bool { return count("high") >= 20+sent })
	var lat []request
	for _, q := range r.got()[before:] {
		if q.Sub == "high" {
			lat = append(lat, q)
		}
	}
	return priorityResult{lat: durations(lat), lowDelivered: count("low-")}
}

// caughtUp reports whether group has committed every record of topic
// produced so far.
func caughtUp(e *env, group, topic string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	adm := kadm.NewClient(e.cl)
	committed, err := adm.FetchOffsets(ctx, e.group(group))
	if err != nil || committed.Error() != nil {
		return false
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return false
	}
	done := true
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		done = done && (o.Offset == 0 || ok && c.At >= o.Offset)
	})
	return done
}
