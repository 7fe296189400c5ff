package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/topics"
)

// TestScaleOutAndIn: three deliverer and two retrier processes share one
// broker while members join and leave (SIGTERM, and new processes started
// mid-run); endpoints fail transiently, so retries flow through the
// retriers and ordered keys are held and parked. Every event arrives at
// every subscription, per-key order holds for the ordered subscription,
// and every process told to stop exits 0.
func TestScaleOutAndIn(t *testing.T) {
	dir := binaries(t)
	e := newEnv(t)
	e.vars["WEBHOOKS_SHUTDOWN_TIMEOUT"] = "10s"
	r := newReceiver(t)
	r.delay = 5 * time.Millisecond
	// The first attempt of one event in five fails (503), per
	// subscription: a transient failure the retry tier (1s) heals.
	var mu sync.Mutex
	tries := map[string]int{}
	r.answer(func(q request, _ http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		k := q.Sub + "/" + q.ID
		tries[k]++
		var seq int
		if _, err := fmt.Sscanf(q.ID[strings.LastIndexByte(q.ID, '-')+1:], "%d", &seq); err != nil {
			t.Errorf("event id %q: %v", q.ID, err)
		}
		if seq%5 == 2 && tries[k] == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	fast := []string{"1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s"}
	subs := []string{"ordered", "flaky", "steady"}
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"}, Enabled: true,
		Ordering: topics.OrderingKey, RetrySchedule: fast}))
	r.trust(e.subscribe(topics.Subscription{ID: "flaky", URL: r.url("flaky"), EventTypes: []string{"*"}, Enabled: true,
		RetrySchedule: fast}))
	r.trust(e.subscribe(topics.Subscription{ID: "steady", URL: r.url("steady"), EventTypes: []string{"order.created"}, Enabled: true}))
	e.startDispatcher()

	// stop sends SIGTERM and requires a clean exit.
	stop := func(p *stack.Process) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Errorf("%s after SIGTERM: %v, want exit 0", p.Name, err)
		}
	}
	start := func(name string) *stack.Process {
		return e.startProc(filepath.Join(dir, strings.TrimRight(name, "0123456789")), name)
	}
	d1, d2 := start("deliverer1"), start("deliverer2")
	start("deliverer3")
	r1 := start("retrier1")
	start("retrier2")

	keys := []string{"K0", "K1", "K2", "K3", "K4", "K5", "K6", "K7"}
	const n = 30
	evs := orderedEvents(keys, n)
	for i := range evs {
		if i%2 == 0 {
			evs[i].Type = "order.created"
		}
	}
	want := func(ev topics.Event) []string {
		if ev.Type == "order.created" {
			return subs
		}
		return subs[:2]
	}
	total := 0
	for _, ev := range evs {
		total += len(want(ev))
	}
	half := len(evs) / 2
	e.publish(evs[:half]...)

	wait(t, 60*time.Second, "a quarter of the deliveries", func() bool { return r.count() >= total/4 })
	stop(d1) // a member leaves mid-stream...
	start("deliverer4")
	e.publish(evs[half:]...)
	stop(r1) // ...and a retrier, while retries are held
	start("retrier3")
	wait(t, 60*time.Second, "two thirds of the deliveries", func() bool { return r.count() >= 2*total/3 })
	stop(d2)

	wait(t, 60*time.Second, "every event at every subscription", func() bool {
		p := r.pairs()
		for _, ev := range evs {
			for _, s := range want(ev) {
				if p[s+"/"+ev.ID] == 0 {
					return false
				}
			}
		}
		return true
	})
	for _, k := range keys {
		checkKeyOrder(t, r, "ordered", k)
	}
	dups := 0
	for _, c := range r.pairs() {
		dups += c - 1
	}
	mu.Lock()
	retried := 0
	for _, c := range tries {
		if c > 1 {
			retried++
		}
	}
	mu.Unlock()
	if retried == 0 {
		t.Error("nothing was retried: the transient failures did not reach the retriers")
	}
	t.Logf("%d deliveries, %d retried through the tiers, %d duplicates (at least once)", total, retried, dups)
	r.checkSignatures(t)
}
