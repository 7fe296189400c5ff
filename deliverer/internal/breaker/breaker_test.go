package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// waitFor is the shared one (package testkit).
var waitFor = testkit.WaitFor

// guard opens cfg (a server or a Cluster, redistest.Topologies).
func guard(t *testing.T, cfg redisstate.Config) *redisstate.Guard {
	t.Helper()
	cfg.Timeout, cfg.RetryInterval = 500*time.Millisecond, 500*time.Millisecond
	g, err := redisstate.Open(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

var ctx = context.Background()

func record(t *testing.T, b *Breaker, sub string, tk Ticket, r Result) Outcome {
	t.Helper()
	o, err := b.Record(ctx, sub, tk, r)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	return o
}

func TestOpensOnErrorRateOnlyWithMinimumCalls(t *testing.T) {
	redistest.Topologies(t, testOpensOnErrorRateOnlyWithMinimumCalls)
}

func testOpensOnErrorRateOnlyWithMinimumCalls(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 10, Window: time.Minute, SleepWindow: time.Hour, Probes: 3}
	b := New(guard(t, rc), cfg)

	// 9 failures: below the minimum number of calls.
	for i := range 9 {
		if o := record(t, b, "s0", Ticket{}, Failure); o.Transition != "" || o.State != redisstate.StateClosed {
			t.Fatalf("failure %d: %+v, want still closed", i+1, o)
		}
	}
	// 10 successes, then 9 failures: 47% < 50%.
	for range 10 {
		record(t, b, "s1", Ticket{}, Success)
	}
	for range 9 {
		record(t, b, "s1", Ticket{}, Failure)
	}
	if d := b.Allow(ctx, "s1"); !d.Allowed {
		t.Fatalf("Allow at 9/19 failed = %+v", d)
	}
	// Neutral results are not counted.
	for range 5 {
		record(t, b, "s1", Ticket{}, Neutral)
	}
	// The tenth failure: 10/20 = 50% opens it, once.
	o := record(t, b, "s1", Ticket{}, Failure)
	if o.Transition != Opened || o.State != redisstate.StateOpen || o.Calls != 20 || o.Failures != 10 {
		t.Fatalf("at 10/20 failed: %+v, want opened with 20 calls and 10 failures", o)
	}
	if o := record(t, b, "s1", Ticket{}, Failure); o.Transition != "" || o.State != redisstate.StateOpen {
		t.Fatalf("a late failure while open: %+v, want open without transition", o)
	}
	d := b.Allow(ctx, "s1")
	if d.Allowed || d.RetryIn <= 50*time.Minute || d.RetryIn > time.Hour {
		t.Fatalf("Allow while open = %+v, want blocked for about the sleep window", d)
	}
	// Other subscriptions are not affected.
	if d := b.Allow(ctx, "s2"); !d.Allowed {
		t.Fatalf("another subscription: %+v, want allowed", d)
	}
	st, err := b.g.ReadBreaker(ctx, "s1")
	if err != nil || st.State != redisstate.StateOpen || st.Calls != 21 || st.Failures != 11 || st.Window != time.Minute {
		t.Fatalf("ReadBreaker = %+v, %v; want open, 21 calls, 11 failures, 1m window", st, err)
	}
}

func TestHalfOpenProbesThenCloses(t *testing.T) {
	redistest.Topologies(t, testHalfOpenProbesThenCloses)
}

func testHalfOpenProbesThenCloses(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 2, Window: time.Minute, SleepWindow: time.Second, Probes: 2}
	b := New(guard(t, rc), cfg)
	open := func() {
		t.Helper()
		record(t, b, "s", Ticket{}, Failure)
		if o := record(t, b, "s", Ticket{}, Failure); o.State != redisstate.StateOpen {
			t.Fatalf("after 2 failures: %+v, want open", o)
		}
	}
	open()
	// Blocked until the sleep window passes, then exactly Probes probes.
	var first Decision
	waitFor(t, 5*time.Second, "the breaker to half-open", func() bool {
		first = b.Allow(ctx, "s")
		return first.Allowed
	})
	if first.Transition != HalfOpen || first.Ticket.Probe == 0 {
		t.Fatalf("first allowed after sleeping: %+v, want a probe with transition half_open", first)
	}
	second := b.Allow(ctx, "s")
	third := b.Allow(ctx, "s")
	if !second.Allowed || second.Ticket != first.Ticket || second.Transition != "" {
		t.Fatalf("second probe: %+v", second)
	}
	if third.Allowed || third.RetryIn <= 0 {
		t.Fatalf("third, beyond the probes: %+v, want blocked until the probe deadline", third)
	}
	// A result from outside the probes does not close it.
	if o := record(t, b, "s", Ticket{}, Success); o.State != redisstate.StateHalfOpen {
		t.Fatalf("non-probe success: %+v, want still half-open", o)
	}
	if o := record(t, b, "s", first.Ticket, Success); o.State != redisstate.StateHalfOpen || o.Transition != "" {
		t.Fatalf("first probe success: %+v, want still half-open", o)
	}
	o := record(t, b, "s", second.Ticket, Success)
	if o.State != redisstate.StateClosed || o.Transition != Closed || o.Calls != 0 {
		t.Fatalf("last probe success: %+v, want closed with a fresh window", o)
	}
	if d := b.Allow(ctx, "s"); !d.Allowed || d.Ticket.Probe != 0 {
		t.Fatalf("Allow after closing = %+v, want allowed, no probe", d)
	}
	if b.OpenedTotal() != 1 || b.HalfOpenedTotal() != 1 || b.ClosedTotal() != 1 {
		t.Fatalf("transitions: opened %d half-opened %d closed %d, want 1, 1 and 1", b.OpenedTotal(), b.HalfOpenedTotal(), b.ClosedTotal())
	}

	// Opened again; a failing probe reopens it, and a result of that old
	// probe period no longer counts in the next one.
	open()
	var p Decision
	waitFor(t, 5*time.Second, "the breaker to half-open again", func() bool {
		p = b.Allow(ctx, "s")
		return p.Allowed
	})
	if o := record(t, b, "s", p.Ticket, Failure); o.Transition != Reopened || o.State != redisstate.StateOpen {
		t.Fatalf("failed probe: %+v, want reopened", o)
	}
	// The outage goes on from the first opening, not from the reopening,
	// as this replica and a fresh one see it.
	if d := b.Allow(ctx, "s"); d.Allowed || d.OpenFor < cfg.SleepWindow {
		t.Fatalf("blocked after reopening: %+v, want open for at least the sleep window", d)
	}
	if d := New(b.g, cfg).Allow(ctx, "s"); d.Allowed || d.OpenFor < cfg.SleepWindow {
		t.Fatalf("a fresh replica after reopening: %+v, want open for at least the sleep window", d)
	}
	var q Decision
	waitFor(t, 5*time.Second, "the breaker to half-open a third time", func() bool {
		q = b.Allow(ctx, "s")
		return q.Allowed
	})
	if q.Ticket == p.Ticket {
		t.Fatalf("a new half-open period reuses probe ticket %+v", p.Ticket)
	}
	record(t, b, "s", p.Ticket, Success)
	record(t, b, "s", p.Ticket, Success)
	if o := record(t, b, "s", q.Ticket, Success); o.State != redisstate.StateHalfOpen {
		t.Fatalf("stale probe results closed the breaker: %+v", o)
	}
}

func TestLostProbesAreReplaced(t *testing.T) { redistest.Topologies(t, testLostProbesAreReplaced) }

func testLostProbesAreReplaced(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 1, Window: time.Minute, SleepWindow: time.Second, Probes: 1}
	b := New(guard(t, rc), cfg)
	record(t, b, "s", Ticket{}, Failure)
	var lost Decision
	waitFor(t, 5*time.Second, "half-open", func() bool { lost = b.Allow(ctx, "s"); return lost.Allowed })
	if d := b.Allow(ctx, "s"); d.Allowed {
		t.Fatalf("a second probe while the first is out: %+v", d)
	}
	// The probe never reports; after the deadline a new one is handed out.
	var next Decision
	waitFor(t, 5*time.Second, "a replacement probe", func() bool { next = b.Allow(ctx, "s"); return next.Allowed })
	if next.Ticket == lost.Ticket || next.Ticket.Probe == 0 {
		t.Fatalf("replacement probe %+v, lost one %+v", next, lost)
	}
	if o := record(t, b, "s", next.Ticket, Success); o.Transition != Closed {
		t.Fatalf("replacement probe success: %+v, want closed", o)
	}
}

func TestReplicasShareTheBreaker(t *testing.T) { redistest.Topologies(t, testReplicasShareTheBreaker) }

func testReplicasShareTheBreaker(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 4, Window: time.Minute, SleepWindow: time.Hour, Probes: 1}
	a := New(guard(t, rc), cfg)
	b := New(guard(t, rc), cfg)
	// Each replica sees half of the failures; together they open it.
	for range 2 {
		record(t, a, "s", Ticket{}, Failure)
		record(t, b, "s", Ticket{}, Failure)
	}
	// b's last record opened it. a learns at its next record (or once its
	// cached "closed" is older than CacheTTL), without a transition of its
	// own.
	o := record(t, a, "s", Ticket{}, Failure)
	if o.State != redisstate.StateOpen || o.Transition != "" {
		t.Fatalf("replica a after b opened it: %+v, want open, no transition of its own", o)
	}
	if d := a.Allow(ctx, "s"); d.Allowed {
		t.Fatalf("replica a allows while open: %+v", d)
	}
	if a.OpenedTotal()+b.OpenedTotal() != 1 {
		t.Fatalf("opened %d+%d times, want once in all", a.OpenedTotal(), b.OpenedTotal())
	}
	// A third replica that never recorded anything sees it open at once.
	c := New(guard(t, rc), cfg)
	if d := c.Allow(ctx, "s"); d.Allowed {
		t.Fatalf("a fresh replica allows while open: %+v", d)
	}
}

// TestSuccessesAreGathered: a success outside a probe costs no Redis call;
// the replica's gathered successes are counted by Flush or together with
// its next failure, so the error rate that failure is judged by includes
// them; and successes alone never open the breaker.
func TestSuccessesAreGathered(t *testing.T) { redistest.Topologies(t, testSuccessesAreGathered) }

func testSuccessesAreGathered(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 4, Window: time.Minute, SleepWindow: time.Hour, Probes: 1}
	b := New(guard(t, rc), cfg)
	read := func(sub string) redisstate.BreakerState {
		t.Helper()
		st, err := b.g.ReadBreaker(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for range 5 {
		if o := record(t, b, "s", Ticket{}, Success); o.State != redisstate.StateClosed || o.Transition != "" {
			t.Fatalf("a success: %+v, want closed", o)
		}
	}
	if st := read("s"); st.Calls != 0 {
		t.Fatalf("after 5 successes Redis counts %d calls, want 0 until a flush", st.Calls)
	}
	b.Flush(ctx)
	if st := read("s"); st.Calls != 5 || st.Failures != 0 {
		t.Fatalf("after Flush: %+v, want 5 calls", st)
	}
	for range 3 {
		record(t, b, "s", Ticket{}, Success)
	}
	if o := record(t, b, "s", Ticket{}, Failure); o.Calls != 9 || o.Failures != 1 || o.State != redisstate.StateClosed {
		t.Fatalf("a failure after 3 more successes: %+v, want 9 calls, 1 failure, closed", o)
	}

	// Three failures below the minimum of calls, then a success reaches it
	// at 75% failed: counted, but only the next failure opens it.
	for range 3 {
		record(t, b, "t", Ticket{}, Failure)
	}
	record(t, b, "t", Ticket{}, Success)
	b.Flush(ctx)
	if st := read("t"); st.Calls != 4 || st.State != redisstate.StateClosed {
		t.Fatalf("after a flushed success: %+v, want 4 calls, closed", st)
	}
	if o := record(t, b, "t", Ticket{}, Failure); o.Transition != Opened {
		t.Fatalf("the next failure: %+v, want opened", o)
	}
}

func TestWindowForgetsOldCalls(t *testing.T) { redistest.Topologies(t, testWindowForgetsOldCalls) }

func testWindowForgetsOldCalls(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 3, Window: 120 * time.Millisecond, SleepWindow: time.Hour, Probes: 1}
	b := New(guard(t, rc), cfg)
	record(t, b, "s", Ticket{}, Failure)
	record(t, b, "s", Ticket{}, Failure)
	// Once the window slid past them, two more failures are not enough.
	waitFor(t, 5*time.Second, "the window to slide", func() bool {
		st, err := b.g.ReadBreaker(ctx, "s")
		return err == nil && st.Calls == 0
	})
	record(t, b, "s", Ticket{}, Failure)
	if o := record(t, b, "s", Ticket{}, Failure); o.State != redisstate.StateClosed || o.Calls > 2 {
		t.Fatalf("failures outside the window counted: %+v", o)
	}
}

func TestFailsOpenWithoutRedis(t *testing.T) {
	srv := redistest.Start(t)
	g := guard(t, redisstate.Config{URL: srv.URL(), KeyPrefix: "t:"})
	b := New(g, Config{MinCalls: 1, SleepWindow: time.Hour})
	record(t, b, "s", Ticket{}, Failure)
	if d := b.Allow(ctx, "s"); d.Allowed {
		t.Fatalf("open breaker allows: %+v", d)
	}
	srv.Kill()
	if _, err := b.Record(ctx, "s", Ticket{}, Failure); err == nil {
		t.Fatal("Record with Redis down: no error")
	}
	if d := b.Allow(ctx, "s"); !d.Allowed {
		t.Fatalf("Allow with Redis down = %+v, want allowed (fail open)", d)
	}
	if g.FailOpenTotal() == 0 || g.OutagesTotal() != 1 {
		t.Fatalf("fail-open %d, outages %d", g.FailOpenTotal(), g.OutagesTotal())
	}
	// Redis is back (empty: it kept nothing): protection resumes.
	srv.Restart()
	waitFor(t, 5*time.Second, "redis to be used again", func() bool {
		_, err := b.Record(ctx, "s", Ticket{}, Failure)
		return err == nil
	})
	if d := b.Allow(ctx, "s"); d.Allowed {
		t.Fatalf("breaker after Redis came back and the endpoint failed again: %+v, want open", d)
	}
}

func TestNilBreakerAllows(t *testing.T) {
	b := New(nil, Config{})
	if d := b.Allow(ctx, "s"); !d.Allowed {
		t.Fatal("nil breaker blocks")
	}
}

// TestConfigTags: the validate tags (checked by config.Parse, or
// config.Check for a Config built in code) bound every field.
func TestConfigTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"threshold 0 is the default", Config{ThresholdPercent: 0}, true},
		{"threshold over 100", Config{ThresholdPercent: 101}, false},
		{"negative threshold", Config{ThresholdPercent: -1}, false},
		{"negative min calls", Config{MinCalls: -1}, false},
		{"window below a ms per bucket", Config{Window: time.Millisecond}, false},
		{"negative sleep", Config{SleepWindow: -time.Second}, false},
		{"negative probes", Config{Probes: -2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Defaults()
			if err := config.Check(&tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("Check(%+v) = %v, want ok %v", tc.cfg, err, tc.ok)
			}
		})
	}
}

// TestOpenSet: the breakers not closed are counted across replicas with
// the time since the oldest opened; closing removes one, and an entry
// whose breaker state expired is dropped.
func TestOpenSet(t *testing.T) { redistest.Topologies(t, testOpenSet) }

func testOpenSet(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 2, Window: time.Minute, SleepWindow: time.Millisecond, Probes: 1}
	a, b := New(guard(t, rc), cfg), New(guard(t, rc), cfg)
	clock := time.Now()
	a.now = func() time.Time { return clock }
	b.now = a.now
	if n, longest, err := a.Open(ctx); err != nil || n != 0 || longest != 0 {
		t.Fatalf("Open before any = %d, %v, %v; want none", n, longest, err)
	}
	for _, sub := range []string{"x", "y"} {
		record(t, a, sub, Ticket{}, Failure)
		if o := record(t, a, sub, Ticket{}, Failure); o.Transition != Opened {
			t.Fatalf("%s: %+v, want opened", sub, o)
		}
		clock = clock.Add(time.Minute)
	}
	// x opened two minutes ago (on a's clock); b sees the same set.
	if n, longest, err := b.Open(ctx); err != nil || n != 2 || longest < 2*time.Minute-time.Second || longest > 2*time.Minute+time.Second {
		t.Fatalf("Open = %d, %v, %v; want 2, about 2m", n, longest, err)
	}
	// x half-opens and its probe succeeds: closed, out of the set.
	clock = clock.Add(time.Second)
	var probe Decision
	// Time passes on the replicas' clock too: an answer "open, 1ms left"
	// that b caches must not outlive that millisecond.
	waitFor(t, 5*time.Second, "x to half-open", func() bool {
		clock = clock.Add(time.Millisecond)
		probe = b.Allow(ctx, "x")
		return probe.Allowed
	})
	if o := record(t, b, "x", probe.Ticket, Success); o.Transition != Closed {
		t.Fatalf("probe success: %+v, want closed", o)
	}
	if n, longest, err := a.Open(ctx); err != nil || n != 1 || longest < time.Minute || longest > time.Minute+2*time.Second {
		t.Fatalf("Open after x closed = %d, %v, %v; want 1, about 1m", n, longest, err)
	}
	// y's state expires: it is dropped.
	if err := a.g.Client().Del(ctx, a.keys.Breaker("y")).Err(); err != nil {
		t.Fatal(err)
	}
	if n, longest, err := a.Open(ctx); err != nil || n != 0 || longest != 0 {
		t.Fatalf("Open after y expired = %d, %v, %v; want none", n, longest, err)
	}
}

// TestOperatorControls: a breaker forced open blocks every replica's
// deliveries for the duration; forced closed it stays closed however many
// attempts fail; reset closes it and forgets the attempts counted.
func TestOperatorControls(t *testing.T) { redistest.Topologies(t, testOperatorControls) }

func testOperatorControls(t *testing.T, rc redisstate.Config) {
	cfg := Config{ThresholdPercent: 50, MinCalls: 4, Window: time.Minute, SleepWindow: time.Hour, Probes: 1}
	g := guard(t, rc)
	one, two := New(g, cfg), New(guard(t, rc), cfg)

	if err := g.ForceBreaker(ctx, "s", redisstate.ForceOpen, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Breaker{one, two} {
		if d := b.Allow(ctx, "s"); d.Allowed || d.RetryIn <= 50*time.Minute {
			t.Fatalf("forced open: Allow = %+v, want blocked for about an hour", d)
		}
	}
	if err := g.ForceBreaker(ctx, "s", redisstate.Reset, 0); err != nil {
		t.Fatal(err)
	}
	// A replica trusts what it last read for CacheTTL.
	waitFor(t, 10*time.Second, "the reset to reach a replica that saw the breaker open", func() bool {
		return one.Allow(ctx, "s").Allowed
	})
	if st, err := g.ReadBreaker(ctx, "s"); err != nil || st.State != redisstate.StateClosed || st.Calls != 0 {
		t.Fatalf("after reset: %+v, %v", st, err)
	}

	if err := g.ForceBreaker(ctx, "s", redisstate.ForceClose, time.Hour); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if o := record(t, two, "s", Ticket{}, Failure); o.State != redisstate.StateClosed {
			t.Fatalf("forced closed, a failure opened it: %+v", o)
		}
	}
	if err := g.ForceBreaker(ctx, "s", redisstate.ForceClose, 0); err != nil { // the force ends now
		t.Fatal(err)
	}
	var o Outcome
	for range 4 {
		o = record(t, two, "s", Ticket{}, Failure)
	}
	if o.Transition != Opened {
		t.Fatalf("after the forced close ended, 4 failures: %+v, want opened", o)
	}
}

// TestFailsOpenOnADeadClusterMaster: with one master of a Cluster killed,
// the breakers of subscriptions in its slots fail open, while the others,
// on live masters, keep counting and opening.
func TestFailsOpenOnADeadClusterMaster(t *testing.T) {
	c := redistest.StartCluster(t)
	g := guard(t, redisstate.Config{URL: "redis://", ClusterAddrs: c.Addrs(), KeyPrefix: "t:"})
	cfg := Config{MinCalls: 1, SleepWindow: time.Hour}
	dead, live := c.SubsOnTwoMasters(t, g.Keys().Breaker)
	b := New(g, cfg)
	record(t, b, dead.Sub, Ticket{}, Failure)
	if d := b.Allow(ctx, dead.Sub); d.Allowed {
		t.Fatalf("open breaker allows: %+v", d)
	}
	dead.Node.Kill()
	// A breaker without the cache of the one above.
	b = New(g, cfg)
	if _, err := b.Record(ctx, dead.Sub, Ticket{}, Failure); !errors.Is(err, redisstate.ErrUnavailable) {
		t.Fatalf("Record on the dead master: %v, want ErrUnavailable", err)
	}
	if d := b.Allow(ctx, dead.Sub); !d.Allowed {
		t.Fatalf("Allow on the dead master = %+v, want allowed (fail open)", d)
	}
	if o := record(t, b, live.Sub, Ticket{}, Failure); o.Transition != Opened {
		t.Fatalf("a failure on a live master: %+v, want opened", o)
	}
	if d := b.Allow(ctx, live.Sub); d.Allowed {
		t.Fatalf("open breaker on a live master allows: %+v", d)
	}
	if !g.Available() || g.OutagesTotal() != 1 {
		t.Fatalf("available %v, outages %d; want true (two masters live), 1", g.Available(), g.OutagesTotal())
	}
}
