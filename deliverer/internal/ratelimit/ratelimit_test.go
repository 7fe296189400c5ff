package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// waitFor is the shared one (package testkit).
var waitFor = testkit.WaitFor

// guard opens cfg (a server or a Cluster, redistest.Topologies).
func guard(t *testing.T, cfg redisstate.Config) *redisstate.Guard {
	t.Helper()
	cfg.Timeout, cfg.RetryInterval = 500*time.Millisecond, time.Second
	g, err := redisstate.Open(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

var ctx = context.Background()

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		perSecond float64
		want      redis_rate.Limit
	}{
		{1, redis_rate.Limit{Rate: 1, Period: time.Second, Burst: 1}},
		{10, redis_rate.Limit{Rate: 1, Period: 100 * time.Millisecond, Burst: 10}},
		{0.5, redis_rate.Limit{Rate: 1, Period: 2 * time.Second, Burst: 1}},
		{2.5, redis_rate.Limit{Rate: 1, Period: 400 * time.Millisecond, Burst: 3}},
		{1e12, redis_rate.Limit{Rate: 1, Period: time.Microsecond, Burst: 1e12}},
	} {
		if got := Limit(tc.perSecond); got != tc.want {
			t.Errorf("Limit(%v) = %+v, want %+v", tc.perSecond, got, tc.want)
		}
	}
}

func TestThrottledDeliveriesAreSpreadAtTheRate(t *testing.T) {
	redistest.Topologies(t, testThrottledDeliveriesAreSpreadAtTheRate)
}

func testThrottledDeliveriesAreSpreadAtTheRate(t *testing.T, rc redisstate.Config) {
	l := New(guard(t, rc), 0, 16) // never waits in-process
	for i := range 20 {
		if d := l.Take(ctx, "s", 20); d != 0 {
			t.Fatalf("take %d within the burst of 20: delayed %v", i+1, d)
		}
	}
	// Beyond the burst: turns one emission interval (50ms) apart. A turn
	// is the delay from a moment within its Take call, so it lies between
	// the delay added to the call's start and to its end; the latest this
	// turn can be and the earliest the previous one can be are then at
	// least an interval apart, however slow the machine.
	before := time.Now()
	d := l.Take(ctx, "s", 20)
	prevEarliest := before.Add(d)
	if d <= 0 || d > time.Second {
		t.Fatalf("take 21: delay %v, want within (0, 1s]", d)
	}
	for i := range 10 {
		before = time.Now()
		d = l.Take(ctx, "s", 20)
		latest := time.Now().Add(d)
		if gap := latest.Sub(prevEarliest); gap < 50*time.Millisecond-time.Millisecond {
			t.Fatalf("take %d: turn at most %v after the previous one, want an interval (50ms)", 22+i, gap)
		}
		prevEarliest = before.Add(d)
	}
	// Another subscription has its own limit.
	if d := l.Take(ctx, "other", 20); d != 0 {
		t.Fatalf("another subscription delayed %v", d)
	}
	// Unlimited.
	if d := l.Take(ctx, "s", 0); d != 0 {
		t.Fatalf("rate 0 delayed %v", d)
	}
}

// TestTenantChargesEveryDelivery: TakeTenant of n takes n of the quota,
// so that a batch counts each of its events: a batch of the whole burst
// leaves nothing for the next delivery, and a batch above the burst goes
// once the quota is unused and holds the next ones back by its n intervals.
func TestTenantChargesEveryDelivery(t *testing.T) {
	redistest.Topologies(t, testTenantChargesEveryDelivery)
}

func testTenantChargesEveryDelivery(t *testing.T, rc redisstate.Config) {
	l := New(guard(t, rc), 0, 16) // never waits in-process
	if d := l.TakeTenant(ctx, "acme", 10, 10); d != 0 {
		t.Fatalf("a batch of the burst (10) delayed %v", d)
	}
	if d := l.TakeTenant(ctx, "acme", 10, 1); d <= 0 {
		t.Fatalf("a delivery after a batch of the whole burst went at once: the batch was charged less than its 10")
	}
	if d := l.TakeTenant(ctx, "big", 10, 25); d != 0 {
		t.Fatalf("a batch of 25 above the burst of 10, the quota unused: delayed %v", d)
	}
	// 25 intervals of 100ms charged, its own one, less the burst of 10.
	if d := l.TakeTenant(ctx, "big", 10, 1); d < 1500*time.Millisecond || d > 1600*time.Millisecond {
		t.Fatalf("a delivery after a batch of 25 at 10/s: delayed %v, want 1.6s", d)
	}
}

// TestRateHoldsOverAWindow lets 8 workers take as fast as they can, waiting
// in-process, and checks the count against the rate over the time it took,
// with loose bounds.
func TestRateHoldsOverAWindow(t *testing.T) { redistest.Topologies(t, testRateHoldsOverAWindow) }

func testRateHoldsOverAWindow(t *testing.T, rc redisstate.Config) {
	const rate = 40.0
	l := New(guard(t, rc), time.Second, 64)
	var allowed, delayed atomic.Int64
	start := time.Now()
	stop := start.Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if l.Take(ctx, "s", rate) == 0 {
					allowed.Add(1)
				} else {
					delayed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	burst := rate
	most := burst + rate*elapsed*1.2 + 5
	least := burst + rate*elapsed*0.3
	if n := float64(allowed.Load()); n > most || n < least {
		t.Fatalf("%v allowed in %.2fs at %v/s (burst %v): want within [%.0f, %.0f]", n, elapsed, rate, burst, least, most)
	}
	if delayed.Load() == 0 {
		t.Fatalf("8 workers waited in-process only: the per-subscription bound of %d waiters did not apply", waitersPerSubscription)
	}
	if w := l.WaitedTotal(); w == 0 || w > uint64(allowed.Load()) {
		t.Fatalf("%d let through after waiting in-process, want some of the %d allowed", w, allowed.Load())
	}
	if l.Waiting() != 0 {
		t.Fatalf("%d waiters left", l.Waiting())
	}
}

func TestWaitersAreBounded(t *testing.T) {
	l := &Limiter{waiters: make(chan struct{}, 3), subs: map[string]*subState{}}
	for i := range waitersPerSubscription {
		if !l.acquire("a") {
			t.Fatalf("waiter %d of a refused", i+1)
		}
	}
	if l.acquire("a") {
		t.Fatal("a got more waiters than its bound")
	}
	if !l.acquire("b") {
		t.Fatal("b refused while the global bound has room")
	}
	if l.acquire("c") {
		t.Fatal("c got a waiter beyond the global bound")
	}
	l.release("a")
	if !l.acquire("c") {
		t.Fatal("c refused after a released one")
	}
}

func TestWaitEndsWithContext(t *testing.T) { redistest.Topologies(t, testWaitEndsWithContext) }

func testWaitEndsWithContext(t *testing.T, rc redisstate.Config) {
	l := New(guard(t, rc), time.Hour, 4)
	if d := l.Take(ctx, "s", 0.001); d != 0 { // the burst of 1
		t.Fatalf("first take delayed %v", d)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan time.Duration)
	go func() { done <- l.Take(c, "s", 0.001) }()
	waitFor(t, 5*time.Second, "the take to wait in-process", func() bool { return l.Waiting() == 1 })
	cancel()
	if d := <-done; d <= 0 {
		t.Fatalf("cancelled wait returned %v, want the wait left", d)
	}
	if l.Waiting() != 0 {
		t.Fatal("the cancelled waiter kept its slot")
	}
}

func TestFailsOpenWithoutRedis(t *testing.T) {
	srv := redistest.Start(t)
	l := New(guard(t, redisstate.Config{URL: srv.URL(), KeyPrefix: "t:"}), 0, 4)
	l.Take(ctx, "s", 1)
	if d := l.Take(ctx, "s", 1); d == 0 {
		t.Fatal("second take at 1/s with a burst of 1 was not delayed")
	}
	srv.Kill()
	for range 5 {
		if d := l.Take(ctx, "s", 1); d != 0 {
			t.Fatalf("Redis down: delayed %v, want not limited", d)
		}
	}
	unlimited := New(nil, 0, 1)
	for range 2 {
		if unlimited.Take(ctx, "s", 1) != 0 {
			t.Fatal("nil limiter limits")
		}
	}
}
