package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkFilters is the filters' row of `make bench`: dispatcher events
// per second with 1,000 subscriptions, each event matching 10 of them by
// type, against the same with half of them filtered (a filter over the
// event's data that every event passes, so both runs produce the same
// deliveries and the difference is the filters' cost); two runs of each,
// interleaved, on the in-process broker.
func BenchmarkFilters(b *testing.B) {
	const (
		subs   = 1000
		types  = 100
		events = 20000
	)
	run := func(filtered bool) float64 {
		h := newHarness(b, 6)
		for i := range subs {
			s := topics.Subscription{ID: fmt.Sprintf("sub_%d", i), EventTypes: []string{fmt.Sprintf("t.%d", i%types)}, Enabled: true}
			if filtered && i%2 == 0 {
				s.Filter = `data.total > 0 && data.currency == "EUR" && !("test" in data.tags)`
			}
			h.sub(s)
		}
		values := make([][]byte, events)
		for i := range values {
			values[i] = event(b, topics.Event{ID: fmt.Sprintf("e%d", i), Type: fmt.Sprintf("t.%d", i%types), Key: fmt.Sprintf("k%d", i%500)},
				fmt.Sprintf(`{"total": %d, "currency": "EUR", "tags": ["new"], "pad": "%0180d"}`, i+1, i))
		}
		published := h.publish(values...)
		cfg := h.config(fmt.Sprintf("bench-%v", filtered))
		start := time.Now()
		r := h.start(cfg)
		h.waitDispatchedWithin(published, 5*time.Minute)
		took := time.Since(start)
		_ = r.Stop(b)
		if n := len(h.readAll(h.names().Deliveries(), true)); n != events*subs/types {
			b.Fatalf("%d deliveries, want %d", n, events*subs/types)
		}
		return events / took.Seconds()
	}
	for b.Loop() {
		var plain, filtered []float64
		for range 2 {
			plain = append(plain, run(false))
			filtered = append(filtered, run(true))
		}
		p, f := (plain[0]+plain[1])/2, (filtered[0]+filtered[1])/2
		b.ReportMetric(p, "events/s-no-filters")
		b.ReportMetric(f, "events/s-half-filtered")
		b.ReportMetric(f/p, "ratio")
		b.Logf("\n| dispatcher, 1,000 subscriptions, %d events x 10 deliveries | events/s |\n|---|---|\n| no filters | %.0f (%.0f, %.0f) |\n"+
			"| half filtered | %.0f (%.0f, %.0f) |\n| ratio | %.2f |", events, p, plain[0], plain[1], f, filtered[0], filtered[1], f/p)
	}
}
