package deliverer

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// protectEnv turns endpoint protection on against the Redis at url, under
// a key prefix of the test's own, with a breaker that opens after 3
// failures out of at least 3 calls.
func protectEnv(url, prefix string, more map[string]string) map[string]string {
	env := map[string]string{
		redisstate.EnvURL:              url,
		redisstate.EnvKeyPrefix:        prefix,
		redisstate.EnvTimeout:          "500ms", // -race on a small machine
		redisstate.EnvRetryInterval:    "500ms",
		"WEBHOOKS_BREAKER_MIN_CALLS":   "3",
		"WEBHOOKS_BREAKER_THRESHOLD":   "50",
		"WEBHOOKS_BREAKER_WINDOW":      "1m",
		"WEBHOOKS_BREAKER_SLEEP":       "1h",
		"WEBHOOKS_BREAKER_PROBES":      "1",
		"WEBHOOKS_RATE_LIMIT_MAX_WAIT": "0s",
		"WEBHOOKS_AUTO_DISABLE_AFTER":  "0s",
	}
	maps.Copy(env, more)
	return env
}

// guardFor opens the test's own view of the deliverer's Redis state.
func guardFor(t *testing.T, url, prefix string) *redisstate.Guard {
	t.Helper()
	g, err := redisstate.Open(redisstate.Config{URL: url, KeyPrefix: prefix, Timeout: time.Second, RetryInterval: time.Second}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// tierDelivery decodes the retry-tier record of an event.
func (h *harness) tierDelivery(tier time.Duration, eventID string) topics.Delivery {
	h.t.Helper()
	r := h.waitRecord(h.names.Retry(tier), eventID)
	d, err := topics.DecodeDelivery(r.Value)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// TestBreakerBlocksWithoutUsingAttempts: three failures open the breaker;
// later deliveries are not attempted, are recorded as blocked
// (breaker_open) and wait in a retry tier with their attempt number
// unchanged; an ordered key is held behind a blocked delivery.
func TestBreakerBlocksWithoutUsingAttempts(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, nil))
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusServiceUnavailable) })
	sub := newSub(t, "sub_br", rc.url())
	sub.Ordering = topics.OrderingKey
	h.putSub(sub)
	h.start(nil)

	for _, id := range ids("fail", 3) {
		h.deliver(newDelivery(sub.ID, id))
		if a := h.waitAttempt(id); a.Outcome != topics.OutcomeRetry {
			t.Fatalf("attempt of %s: %s, want retry", id, a.Outcome)
		}
	}
	st, err := guardFor(t, url, prefix).ReadBreaker(context.Background(), sub.ID)
	if err != nil || st.State != redisstate.StateOpen {
		t.Fatalf("breaker after 3 failures: %+v %v, want open", st, err)
	}

	blocked := newDelivery(sub.ID, "blocked_1")
	blocked.Attempt = 4 // a retry coming back: the breaker must not use it up
	h.deliver(blocked)
	a := h.waitAttempt("blocked_1")
	if a.Outcome != topics.OutcomeBlocked || a.FailureCategory != topics.FailureBreakerOpen || a.Attempt != 4 || a.HTTPStatus != 0 {
		t.Fatalf("attempt record while open: %+v, want blocked breaker_open attempt 4 without a request", a)
	}
	// Blocked until it half-opens (1h), capped at the longest tier (1m).
	next := h.tierDelivery(time.Minute, "blocked_1")
	if next.Attempt != 4 || next.NotBefore.Before(time.Now().Add(50*time.Second)) {
		t.Fatalf("tier record of the blocked delivery: attempt %d not-before %v, want attempt 4 in about a minute", next.Attempt, next.NotBefore)
	}

	// Ordered keys: a blocked delivery holds its key like a failed one.
	first, second := newDelivery(sub.ID, "k_1"), newDelivery(sub.ID, "k_2")
	first.Key, second.Key = "order_1", "order_1"
	h.produce(h.deliveryRecord(first, "order_1"), h.deliveryRecord(second, "order_1"))
	if a := h.waitAttempt("k_1"); a.Outcome != topics.OutcomeBlocked || a.FailureCategory != topics.FailureBreakerOpen {
		t.Fatalf("head of the key: %+v, want blocked", a)
	}
	if a := h.waitAttempt("k_2"); a.Outcome != topics.OutcomeBlocked || a.FailureCategory != topics.FailureKeyHeld {
		t.Fatalf("second of the key: %+v, want parked behind the head (key_held)", a)
	}
	if n := rc.count(); n != 3 {
		t.Fatalf("endpoint got %d requests, want only the 3 that opened the breaker", n)
	}
}

// TestBreakerHalfOpensClosesAndMarksRecovery: after the sleep window one
// probe goes through; its success closes the breaker and marks the
// subscription recovering for the retrier.
func TestBreakerHalfOpensClosesAndMarksRecovery(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, map[string]string{"WEBHOOKS_BREAKER_SLEEP": "300ms"}))
	var healthy atomic.Bool
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := newSub(t, "sub_rec", rc.url())
	h.putSub(sub)
	h.start(nil)
	for _, id := range ids("down", 3) {
		h.deliver(newDelivery(sub.ID, id))
		h.waitAttempt(id)
	}
	g := guardFor(t, url, prefix)
	if st, _ := g.ReadBreaker(context.Background(), sub.ID); st.State != redisstate.StateOpen {
		t.Fatalf("breaker after 3 failures: %+v, want open", st)
	}
	healthy.Store(true)
	// New deliveries are blocked until the breaker half-opens; then one
	// probe succeeds and closes it.
	n := 0
	waitFor(t, 20*time.Second, "a delivered probe", func() bool {
		n++
		id := fmt.Sprintf("up_%03d", n)
		h.deliver(newDelivery(sub.ID, id))
		return h.waitAttempt(id).Outcome == topics.OutcomeSuccess
	})
	if st, _ := g.ReadBreaker(context.Background(), sub.ID); st.State != redisstate.StateClosed {
		t.Fatalf("breaker after a successful probe: %+v, want closed", st)
	}
	marks, err := g.Recovering(context.Background(), time.Now().Add(-time.Minute))
	if err != nil || marks[sub.ID].IsZero() {
		t.Fatalf("recovery marks %v (%v), want one for %s", marks, err, sub.ID)
	}
	for _, a := range h.attempts() {
		if a.Outcome != topics.OutcomeBlocked && a.Outcome != topics.OutcomeSuccess && a.Outcome != topics.OutcomeRetry {
			t.Fatalf("unexpected attempt record %+v", a)
		}
	}
}

// TestProbeIgnoresTheRateLimit: a half-open probe is sent even when its
// subscription's rate limit is used up; delayed, it would never report and
// the breaker would stay half-open.
func TestProbeIgnoresTheRateLimit(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, map[string]string{"WEBHOOKS_BREAKER_SLEEP": "300ms", "WEBHOOKS_BREAKER_MIN_CALLS": "1"}))
	var healthy atomic.Bool
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := newSub(t, "sub_probe", rc.url())
	sub.RateLimitPerS = 0.01 // one now, the next in 100 s
	h.putSub(sub)
	h.start(nil)
	h.deliver(newDelivery(sub.ID, "down"))
	if a := h.waitAttempt("down"); a.Outcome != topics.OutcomeRetry {
		t.Fatalf("first attempt %+v, want a failed one", a)
	}
	healthy.Store(true)
	n := 0
	waitFor(t, 20*time.Second, "a delivered probe", func() bool {
		n++
		id := fmt.Sprintf("up_%03d", n)
		h.deliver(newDelivery(sub.ID, id))
		return h.waitAttempt(id).Outcome == topics.OutcomeSuccess
	})
	if st, _ := guardFor(t, url, prefix).ReadBreaker(context.Background(), sub.ID); st.State != redisstate.StateClosed {
		t.Fatalf("breaker after the probe: %+v, want closed", st)
	}
}

// TestDeliverersShareTheBreaker: a breaker opened by one deliverer blocks
// the deliveries of another process that never saw a failure.
func TestDeliverersShareTheBreaker(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, nil))
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusBadGateway) })
	sub := newSub(t, "sub_shared", rc.url())
	h.putSub(sub)
	first := h.start(nil)
	for _, id := range ids("a", 3) {
		h.deliver(newDelivery(sub.ID, id))
		h.waitAttempt(id)
	}
	if err := first.Stop(t); err != nil {
		t.Fatal(err)
	}
	h.start(nil) // a new process: nothing cached
	h.deliver(newDelivery(sub.ID, "b_1"))
	if a := h.waitAttempt("b_1"); a.Outcome != topics.OutcomeBlocked || a.FailureCategory != topics.FailureBreakerOpen {
		t.Fatalf("second deliverer: %+v, want blocked by the shared breaker", a)
	}
	if n := rc.count(); n != 3 {
		t.Fatalf("endpoint got %d requests, want 3", n)
	}
}

// TestRateLimitDelaysNotFails: a subscription limited to 5/s gets a burst
// of 40 deliveries; over the run it is never sent more than its rate
// allows (loose bounds), the rest are throttled into a retry tier with
// their attempt numbers, none fails; an unlimited subscription on the same
// deliverer gets all of its deliveries.
func TestRateLimitDelaysNotFails(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, map[string]string{"WEBHOOKS_RATE_LIMIT_MAX_WAIT": "300ms"}))
	limited := newReceiver(t, nil)
	free := newReceiver(t, nil)
	ls := newSub(t, "sub_limited", limited.url())
	ls.RateLimitPerS = 5
	h.putSub(ls)
	h.putSub(newSub(t, "sub_free", free.url()))
	h.start(nil)

	start := time.Now()
	var ds []topics.Delivery
	for _, id := range ids("rl", 40) {
		ds = append(ds, newDelivery(ls.ID, id))
	}
	for _, id := range ids("free", 40) {
		ds = append(ds, newDelivery("sub_free", id))
	}
	h.deliver(ds...)
	waitFor(t, 30*time.Second, "every unlimited delivery", func() bool { return free.count() == 40 })
	waitFor(t, 30*time.Second, "an outcome for every limited delivery", func() bool {
		seen := map[string]bool{}
		for _, a := range h.attempts() {
			if a.SubscriptionID == ls.ID {
				seen[a.EventID] = true
			}
		}
		return len(seen) == 40
	})
	elapsed := time.Since(start).Seconds()
	if got, most := float64(limited.count()), 5+5*elapsed*1.2+2; got > most {
		t.Fatalf("limited endpoint got %v requests in %.1fs at 5/s with a burst of 5: more than %.0f", got, elapsed, most)
	}
	throttled := 0
	for _, a := range h.attempts() {
		if a.SubscriptionID != ls.ID {
			continue
		}
		switch a.Outcome {
		case topics.OutcomeSuccess:
		case topics.OutcomeThrottled:
			throttled++
			if a.FailureCategory != topics.FailureThrottled || a.Attempt != 1 || a.NextAttemptAt.IsZero() {
				t.Fatalf("throttled attempt record: %+v", a)
			}
		default:
			t.Fatalf("limited delivery %s: outcome %s, want success or throttled", a.EventID, a.Outcome)
		}
	}
	if throttled+limited.count() != 40 || throttled == 0 {
		t.Fatalf("%d throttled + %d delivered, want 40 with some throttled", throttled, limited.count())
	}
	for _, r := range h.records(h.names.Retry(time.Second)) {
		d, err := topics.DecodeDelivery(r.Value)
		if err != nil || d.Attempt != 1 {
			t.Fatalf("throttled tier record: attempt %d (%v), want 1", d.Attempt, err)
		}
	}
	if n := len(h.records(h.names.DLQ())); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}

// TestFailsOpenWhenRedisDies: with Redis killed mid-run every delivery is
// attempted (breaker closed, no limit) and nothing waits on Redis; when
// Redis comes back, the breaker works again.
func TestFailsOpenWhenRedisDies(t *testing.T) {
	srv := redistest.Start(t)
	h := newHarness(t, protectEnv(srv.URL(), "t:", nil))
	var failing atomic.Bool
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := newSub(t, "sub_fo", rc.url())
	h.putSub(sub)
	h.start(nil)
	h.deliver(newDelivery(sub.ID, "before"))
	rc.waitRequest(t, "before")

	srv.Kill()
	failing.Store(true)
	// Far more failures than open the breaker: all attempted.
	fails := ids("dead_redis", 10)
	for _, id := range fails {
		h.deliver(newDelivery(sub.ID, id))
	}
	for _, id := range fails {
		if a := h.waitAttempt(id); a.Outcome != topics.OutcomeRetry {
			t.Fatalf("%s with Redis down: %+v, want attempted (retry)", id, a)
		}
	}

	srv.Restart()
	// Protection resumes by itself: failures open the breaker again.
	n := 0
	waitFor(t, 20*time.Second, "the breaker to block again", func() bool {
		n++
		id := fmt.Sprintf("back_%03d", n)
		h.deliver(newDelivery(sub.ID, id))
		return h.waitAttempt(id).Outcome == topics.OutcomeBlocked
	})
}

// TestAutoDisable: a subscription whose deliveries die by exhausted
// retries, with no success in between, for longer than the window is
// disabled with the reason; a success restarts the window.
func TestAutoDisable(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, map[string]string{
		"WEBHOOKS_AUTO_DISABLE_AFTER": "1ms",
		"WEBHOOKS_BREAKER_MIN_CALLS":  "1000", // keep the breaker out of it
	}))
	var ok atomic.Bool
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if !ok.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := newSub(t, "sub_ad", rc.url())
	sub.RetrySchedule = []string{"1s"}
	h.putSub(sub)
	h.start(nil)
	// Attempt 2 of a one-step schedule: a failure exhausts it.
	last := func(id string) topics.Attempt {
		t.Helper()
		d := newDelivery(sub.ID, id)
		d.Attempt = 2
		h.deliver(d)
		return h.waitAttempt(id)
	}
	disabled := func() *topics.Subscription {
		for _, r := range h.readAll(h.names.Subscriptions()) {
			s, err := topics.DecodeSubscriptionWith(r.Value, testKeys(t))
			if err == nil && !s.Enabled {
				return &s
			}
		}
		return nil
	}
	last("dead_1") // failing since now
	ok.Store(true)
	last("good") // a success: no longer failing
	ok.Store(false)
	a := last("dead_2") // failing since now, again: under the window
	if s := disabled(); s != nil {
		t.Fatalf("disabled after a success restarted the window: %+v", s)
	}
	waitFor(t, 5*time.Second, "the 1ms window to pass", func() bool { return time.Since(a.TS) > 2*time.Millisecond })
	last("dead_3")
	var s *topics.Subscription
	waitFor(t, 10*time.Second, "the subscription to be disabled", func() bool { s = disabled(); return s != nil })
	if !strings.Contains(s.DisabledReason, "auto-disabled") {
		t.Fatalf("disabled reason %q", s.DisabledReason)
	}
	if a := h.attemptsOf("dead_3"); len(a) != 1 || !strings.Contains(a[0].Error, "auto-disabled") {
		t.Fatalf("attempt record of the disabling delivery: %+v, want it to say why", a)
	}
	// Later deliveries are skipped (and kept in the dlq).
	h.deliver(newDelivery(sub.ID, "after"))
	waitFor(t, 20*time.Second, "the delivery after disabling to be skipped", func() bool {
		a := h.attemptsOf("after")
		return len(a) == 1 && a[0].Outcome == topics.OutcomeSkipped
	})
}

func TestProtectionConfig(t *testing.T) {
	base := baseEnv("127.0.0.1:1")
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(p Protection) bool
		err   string
	}{
		{"defaults", map[string]string{redisstate.EnvURL: ""}, func(p Protection) bool {
			return p.Redis.URL == redisstate.DefaultURL && p.Redis.KeyPrefix == "webhooks:" && p.Redis.Timeout == 100*time.Millisecond &&
				p.Breaker.ThresholdPercent == 50 && p.Breaker.MinCalls == 10 && p.Breaker.Window == time.Minute &&
				p.Breaker.SleepWindow == 30*time.Second && p.Breaker.Probes == 3 &&
				p.RateLimitMaxWait == 500*time.Millisecond && p.AutoDisableAfter == 120*time.Hour
		}, ""},
		{"no redis", map[string]string{redisstate.EnvURL: "-"}, func(p Protection) bool { return !p.Redis.Enabled() }, ""},
		{"all set", map[string]string{
			redisstate.EnvURL: "redis://10.0.0.1:6380/3", redisstate.EnvKeyPrefix: "x:", redisstate.EnvTimeout: "50ms",
			"WEBHOOKS_BREAKER_THRESHOLD": "30", "WEBHOOKS_BREAKER_MIN_CALLS": "20", "WEBHOOKS_BREAKER_WINDOW": "2m",
			"WEBHOOKS_BREAKER_SLEEP": "10s", "WEBHOOKS_BREAKER_PROBES": "5", "WEBHOOKS_RATE_LIMIT_MAX_WAIT": "250ms",
			"WEBHOOKS_AUTO_DISABLE_AFTER": "72h",
		}, func(p Protection) bool {
			return p.Redis.URL == "redis://10.0.0.1:6380/3" && p.Redis.KeyPrefix == "x:" && p.Redis.Timeout == 50*time.Millisecond &&
				p.Breaker.ThresholdPercent == 30 && p.Breaker.MinCalls == 20 && p.Breaker.Window == 2*time.Minute &&
				p.Breaker.SleepWindow == 10*time.Second && p.Breaker.Probes == 5 &&
				p.RateLimitMaxWait == 250*time.Millisecond && p.AutoDisableAfter == 72*time.Hour
		}, ""},
		{"auto-disable off", map[string]string{"WEBHOOKS_AUTO_DISABLE_AFTER": "0"}, func(p Protection) bool { return p.AutoDisableAfter == 0 }, ""},
		{"bad url", map[string]string{redisstate.EnvURL: "http://x"}, nil, "WEBHOOKS_REDIS_URL"},
		{"bad threshold", map[string]string{"WEBHOOKS_BREAKER_THRESHOLD": "150"}, nil, "WEBHOOKS_BREAKER_THRESHOLD"},
		{"threshold not a number", map[string]string{"WEBHOOKS_BREAKER_THRESHOLD": "half"}, nil, "WEBHOOKS_BREAKER_THRESHOLD"},
		{"zero probes", map[string]string{"WEBHOOKS_BREAKER_PROBES": "0"}, nil, "WEBHOOKS_BREAKER_PROBES"},
		{"bad window", map[string]string{"WEBHOOKS_BREAKER_WINDOW": "soon"}, nil, "WEBHOOKS_BREAKER_WINDOW"},
		{"negative wait", map[string]string{"WEBHOOKS_RATE_LIMIT_MAX_WAIT": "-1s"}, nil, "WEBHOOKS_RATE_LIMIT_MAX_WAIT"},
		{"negative auto-disable", map[string]string{"WEBHOOKS_AUTO_DISABLE_AFTER": "-1h"}, nil, "WEBHOOKS_AUTO_DISABLE_AFTER"},
		{"bad redis timeout", map[string]string{redisstate.EnvTimeout: "0"}, nil, "WEBHOOKS_REDIS_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := maps.Clone(base)
			maps.Copy(env, tc.env)
			c, err := LoadConfig(func(k string) string { return env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadConfig error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c.Protection) {
				t.Fatalf("Protection = %+v", c.Protection)
			}
		})
	}
}

// TestTenantQuota: a tenant over its delivery quota (WEBHOOKS_TENANT_RATE,
// shared by all its subscriptions) has deliveries delayed as throttled
// (tenant_quota) to a retry tier, none dropped, while a quiet tenant under the same
// default and a tenant whose override lifts the quota are never delayed.
func TestTenantQuota(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, map[string]string{"WEBHOOKS_TENANT_RATE": "5"}))
	rc := newReceiver(t, nil)
	for _, id := range []string{"sub_a", "sub_b"} {
		h.putSub(newSub(t, id, rc.url()))
	}
	unlimited := 0.0
	vip := topics.Tenant{ID: "vip", RatePerS: &unlimited, UpdatedAt: time.Now()}
	h.produce(&kgo.Record{Topic: h.names.Tenants(), Key: []byte(vip.ID), Value: vip.Encode()})
	h.start(nil)

	tenantOf := map[string]string{}
	var ds []topics.Delivery
	add := func(tenant string, n int) {
		for i, id := range ids(tenant, n) {
			d := newDelivery([]string{"sub_a", "sub_b"}[i%2], id)
			d.Tenant = tenant
			tenantOf[id] = tenant
			ds = append(ds, d)
		}
	}
	add("loud", 40)
	add("vip", 40)
	add("quiet", 3)
	h.deliver(ds...)
	h.waitOutcomes(len(ds), 60*time.Second)

	throttled := map[string]int{}
	for _, a := range h.attempts() {
		switch a.Outcome {
		case topics.OutcomeSuccess:
		case topics.OutcomeThrottled:
			throttled[tenantOf[a.EventID]]++
			if a.FailureCategory != topics.FailureTenantQuota || a.Attempt != 1 {
				t.Fatalf("throttled attempt record: %+v", a)
			}
		default:
			t.Fatalf("%s: outcome %s, want success or throttled", a.EventID, a.Outcome)
		}
	}
	if throttled["loud"] == 0 || throttled["quiet"] != 0 || throttled["vip"] != 0 {
		t.Fatalf("throttled per tenant %v: want loud's only", throttled)
	}
	if delivered := len(rc.perID()); delivered+throttled["loud"] != len(ds) {
		t.Fatalf("%d delivered + %d throttled, want %d", delivered, throttled["loud"], len(ds))
	}
	// An attempt record and its retry are produced apart: the retry may be
	// readable a moment after the attempt.
	waitFor(t, 30*time.Second, "the throttled deliveries in the retry tier", func() bool {
		return len(h.records(h.names.Retry(time.Second))) == throttled["loud"]
	})
	if n := len(h.records(h.names.DLQ())); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}
