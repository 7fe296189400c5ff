package deliverer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkTransformations delivers 1 KiB events to a local endpoint that
// answers at once, so that the deliverer's CPU is the bound: without a
// transformation, with one adding a header (it never reads the data), and
// with one renaming a field of the data. The three subscriptions take
// turns, three rounds of 3,000 events each, so that a machine whose load
// changes weighs on all of them; it reports each one's median deliveries/s
// and the ratio of each transformation's to the untransformed (issue 27
// asks at least 0.7), and how many deliveries were dead (see waitDone).
func BenchmarkTransformations(b *testing.B) {
	const events, rounds = 3000, 3
	modes := []struct{ name, src string }{
		{"off", ""},
		{"header", `function handler(webhook) { webhook.headers["x-tenant"] = webhook.tenant; return webhook }`},
		{"rename", `function handler(webhook) {
			webhook.data.customer = webhook.data.name;
			delete webhook.data.name;
			return webhook;
		}`},
	}
	data := kibData(b)
	for range b.N {
		b.StopTimer()
		// Every event of a round held at once, none spilled to the retry path.
		h := newHarness(b, map[string]string{"WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION": strconv.Itoa(2 * events)})
		delivered := make([]atomic.Int64, len(modes))
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			if i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/")); err == nil && i < len(modes) {
				delivered[i].Add(1)
			}
		}))
		b.Cleanup(srv.Close)
		subs := make([]topics.Subscription, len(modes))
		for i, m := range modes {
			subs[i] = newSub(b, "sub_"+m.name, srv.URL+"/"+strconv.Itoa(i))
			subs[i].Transformation = m.src
			h.putSub(subs[i])
		}
		h.start(nil)
		for i := range modes {
			h.deliver(newDelivery(subs[i].ID, "evt_warm_"+modes[i].name))
			waitFor(b, time.Minute, "the deliverer up", func() bool { return delivered[i].Load() == 1 })
		}
		rates, failed := make([][]float64, len(modes)), make([]int, len(modes))
		b.StartTimer()
		for round := range rounds + 1 { // the first round warms up, uncounted
			for i := range modes {
				delivered[i].Store(0)
				start := time.Now()
				ds := make([]topics.Delivery, events)
				for n := range ds {
					ds[n] = newDelivery(subs[i].ID, fmt.Sprintf("evt_%d_%d", round, n))
					ds[n].Data = data
				}
				h.deliver(ds...)
				dead := waitDone(b, h, subs[i].ID, fmt.Sprintf("evt_%d_", round), events, &delivered[i])
				if round > 0 {
					failed[i] += dead
					rates[i] = append(rates[i], float64(events)/time.Since(start).Seconds())
				}
			}
		}
		b.StopTimer()
		off := median(rates[0])
		for i, m := range modes {
			b.ReportMetric(median(rates[i]), m.name+"-deliveries/s")
			b.ReportMetric(float64(failed[i]), m.name+"-dead")
			if i > 0 {
				b.ReportMetric(median(rates[i])/off, m.name+"/off")
			}
		}
	}
}

// waitDone waits until every event of the round was delivered or dead
// (a transformation over its 50 ms of wall-clock time, which a saturated
// machine causes), and returns how many were dead. The attempts, costly
// to read, are read only once most events are delivered, twice a second.
func waitDone(b *testing.B, h *harness, sub, round string, events int, delivered *atomic.Int64) int {
	b.Helper()
	dead, last := 0, time.Time{}
	waitFor(b, 5*time.Minute, "every event delivered or dead", func() bool {
		n := int(delivered.Load())
		if n < events*9/10 || time.Since(last) < 500*time.Millisecond {
			return n >= events
		}
		last, dead = time.Now(), 0
		for _, a := range h.attempts() {
			if a.SubscriptionID == sub && a.Outcome == topics.OutcomeDead && strings.HasPrefix(a.EventID, round) {
				dead++
			}
		}
		return n+dead >= events
	})
	return dead
}

// kibData is about 1 KiB of event data: a few fields and objects of three.
func kibData(tb testing.TB) json.RawMessage {
	fields := map[string]any{"name": "Ada Lovelace", "amount": 4200, "currency": "EUR", "paid": true}
	var data []byte
	for i := 0; len(data) < 1024; i++ {
		fields[fmt.Sprintf("line_%02d", i)] = map[string]any{"sku": fmt.Sprintf("SKU-%04d", i), "qty": i, "note": strings.Repeat("n", 20)}
		var err error
		if data, err = json.Marshal(fields); err != nil {
			tb.Fatal(err)
		}
	}
	return data
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
