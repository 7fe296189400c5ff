package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// shutdownBudget is WEBHOOKS_SHUTDOWN_TIMEOUT in the shutdown tests: far
// more than a request takes, so in-flight requests always finish.
const shutdownBudget = 15 * time.Second

// TestDelivererSIGTERMMidStream: a deliverer process told to stop (SIGTERM)
// while requests are in flight lets them finish, commits, leaves its group
// and exits 0 within its budget; a replacement started at once takes over.
// Every event arrives, and no (subscription, event) is attempted twice: what
// the first process started it finished and committed, and nothing it
// finished is redone.
func TestDelivererSIGTERMMidStream(t *testing.T) {
	bin := filepath.Join(binaries(t), "deliverer")
	e := newEnv(t)
	e.vars["WEBHOOKS_SHUTDOWN_TIMEOUT"] = shutdownBudget.String()
	r := newReceiver(t)
	// Requests take up to 300ms: with hundreds in flight, a SIGTERM always
	// lands while some are.
	r.delay = 300 * time.Millisecond
	subs := []string{"ordered", "unordered"}
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"},
		Enabled: true, Ordering: topics.OrderingKey}))
	r.trust(e.subscribe(topics.Subscription{ID: "unordered", URL: r.url("unordered"), EventTypes: []string{"*"}, Enabled: true}))
	e.startDispatcher()
	e.startRetrier() // brings back what the stopping deliverer spilled, if anything
	a := e.startProc(bin, "deliverer-a")

	const n, keys = 600, 40
	var evs []topics.Event
	for i := range n {
		evs = append(evs, topics.Event{ID: fmt.Sprintf("e%04d", i), Type: "order.updated",
			Key: fmt.Sprintf("k%02d", i%keys), Data: []byte(`{}`)})
	}
	e.publish(evs...)
	wait(t, 60*time.Second, "deliveries under way with requests in flight", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.all) >= 100 && r.inflight >= 10
	})
	r.mu.Lock()
	inflight, before := r.inflight, len(r.all)
	r.mu.Unlock()
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	e.startProc(bin, "deliverer-b")

	ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget+10*time.Second)
	defer cancel()
	if err := a.Wait(ctx); err != nil {
		t.Fatalf("deliverer-a after SIGTERM: %v (want exit 0 within its budget of %v plus the final commit)", err, shutdownBudget)
	}
	t.Logf("SIGTERM with %d requests in flight and %d done; deliverer-a exited 0 after %v",
		inflight, before, time.Since(stopped).Round(time.Millisecond))

	wait(t, 90*time.Second, "every event at both subscriptions", func() bool {
		p := r.pairs()
		for _, ev := range evs {
			for _, s := range subs {
				if p[s+"/"+ev.ID] == 0 {
					return false
				}
			}
		}
		return true
	})
	wait(t, 30*time.Second, "the deliverer group to commit everything", e.drained)
	r.mu.Lock()
	attempts := map[string]int{}
	for _, q := range r.all {
		attempts[q.Sub+"/"+q.ID]++
	}
	r.mu.Unlock()
	twice := 0
	for pair, c := range attempts {
		if c != 1 {
			twice++
			if twice <= 5 {
				t.Errorf("%s attempted %d times", pair, c)
			}
		}
	}
	if twice > 0 {
		t.Errorf("%d of %d deliveries attempted more than once across the shutdown", twice, len(attempts))
	}
	if len(attempts) != len(subs)*n {
		t.Errorf("%d distinct deliveries attempted, want %d", len(attempts), len(subs)*n)
	}
	r.checkSignatures(t)
}
