package retrier

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestRecoveryReleasesHeldRetriesEarly: retries of a subscription whose
// breaker closed are released before they are due, at the recovery rate;
// retries of other subscriptions, and ones written after the breaker
// closed, wait out their tiers.
func TestRecoveryReleasesHeldRetriesEarly(t *testing.T) {
	url, prefix := redistest.Shared(t)
	const rate = 20.0
	h := newHarness(t, map[string]string{
		redisstate.EnvURL:        url,
		redisstate.EnvKeyPrefix:  prefix,
		redisstate.EnvTimeout:    "500ms",
		"WEBHOOKS_RECOVERY_RATE": fmt.Sprint(rate),
		"WEBHOOKS_RECOVERY_RAMP": "0", // the full rate at once (TestRamp covers the ramp)
	}, nil)
	h.tail()
	recovered := subOn(t, 0)
	other := subOn(t, 0, recovered) // same partition: it must not be held up either
	due := time.Now().Add(time.Hour)
	var outage []*kgo.Record
	for i := range 30 {
		outage = append(outage, h.retryRecord(time.Minute, recovered, fmt.Sprintf("out_%02d", i), due, true))
	}
	h.produce(outage...)
	h.produce(h.retryRecord(time.Minute, other, "other_1", due, true))
	h.start(h.config())

	g, err := redisstate.Open(redisstate.Config{URL: url, KeyPrefix: prefix, Timeout: time.Second, RetryInterval: time.Second}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	closedAt := time.Now()
	if err := g.MarkRecovering(context.Background(), recovered, closedAt); err != nil {
		t.Fatal(err)
	}
	// Written after the breaker closed: a new failure, not one of the outage.
	late := h.produce(h.retryRecord(time.Minute, recovered, "late_1", due, true))[0]

	for _, r := range outage {
		h.waitReceived(20*time.Second, r)
	}
	h.drain()
	got := map[string]time.Time{}
	for _, r := range h.all() {
		d, err := topics.DecodeDelivery(r.rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[d.EventID] = r.at
	}
	if _, ok := got["other_1"]; ok {
		t.Error("a retry of a subscription that did not recover was released early")
	}
	if _, ok := got["late_1"]; ok || len(h.receivedOf(late.Value)) > 0 {
		t.Error("a retry written after the breaker closed was released early")
	}
	// Ramped: 30 records at 20/s with a burst of 2 take well over a second.
	times := slices.SortedFunc(maps.Values(got), time.Time.Compare)
	if span, least := times[len(times)-1].Sub(times[0]), time.Duration((30-2)/rate*0.7*float64(time.Second)); span < least {
		t.Errorf("30 early releases within %v: not ramped at %v/s (want at least %v)", span, rate, least)
	}
}

// TestRecoveryOffWithoutRate: WEBHOOKS_RECOVERY_RATE=0 leaves retries in
// their tiers even for a marked subscription.
func TestRecoveryOffWithoutRate(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, map[string]string{
		redisstate.EnvURL:        url,
		redisstate.EnvKeyPrefix:  prefix,
		"WEBHOOKS_RECOVERY_RATE": "0",
	}, nil)
	h.tail()
	sub := subOn(t, 1)
	r := h.produce(h.retryRecord(time.Minute, sub, "e1", time.Now().Add(time.Hour), true))[0]
	// A record of another subscription due at once shows that the retrier
	// is running and polled past the held one.
	probe := h.produce(h.retryRecord(time.Second, subOn(t, 2), "probe", time.Now(), true))[0]
	h.start(h.config())
	g, err := redisstate.Open(redisstate.Config{URL: url, KeyPrefix: prefix, Timeout: time.Second, RetryInterval: time.Second}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.MarkRecovering(context.Background(), sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.waitReceived(20*time.Second, probe)
	// Two mark refreshes later, still held.
	deadline := time.Now().Add(2*marksRefresh + 500*time.Millisecond)
	waitFor(t, 10*time.Second, "two mark refreshes", func() bool { return time.Now().After(deadline) })
	h.drain()
	if len(h.receivedOf(r.Value)) != 0 {
		t.Fatal("released early with acceleration off")
	}
}

func TestRecoveryConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		rate float64
		url  string
		err  string
	}{
		{"defaults", nil, 10, redisstate.DefaultURL, ""},
		{"set", map[string]string{"WEBHOOKS_RECOVERY_RATE": "2.5", redisstate.EnvURL: "redis://r:1/2"}, 2.5, "redis://r:1/2", ""},
		{"off", map[string]string{"WEBHOOKS_RECOVERY_RATE": "0", redisstate.EnvURL: "-"}, 0, "", ""},
		{"not a number", map[string]string{"WEBHOOKS_RECOVERY_RATE": "fast"}, 0, "", "WEBHOOKS_RECOVERY_RATE"},
		{"negative", map[string]string{"WEBHOOKS_RECOVERY_RATE": "-1"}, 0, "", "WEBHOOKS_RECOVERY_RATE"},
		{"infinite", map[string]string{"WEBHOOKS_RECOVERY_RATE": "+Inf"}, 0, "", "WEBHOOKS_RECOVERY_RATE"},
		{"bad redis url", map[string]string{redisstate.EnvURL: "mysql://x"}, 0, "", "WEBHOOKS_REDIS_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadConfig error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || c.RecoveryRate != tc.rate || c.Redis.URL != tc.url {
				t.Fatalf("LoadConfig = rate %v, redis %q, %v; want %v, %q", c.RecoveryRate, c.Redis.URL, err, tc.rate, tc.url)
			}
		})
	}
}

// TestRamp: early releases start at a tenth of the rate and grow linearly
// to all of it over the ramp; new failures halve the rate and ramp again
// from there; without a ramp the full rate applies at once.
func TestRamp(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	r := newRamped(50, 100*time.Second, t0, 3)
	for _, tc := range []struct {
		after time.Duration
		want  float64
	}{{0, 5}, {50 * time.Second, 27.5}, {100 * time.Second, 50}, {time.Hour, 50}} {
		if got := r.at(t0.Add(tc.after)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("after %v: %v/s, want %v", tc.after, got, tc.want)
		}
	}
	if r.failed(3, t0.Add(50*time.Second)) {
		t.Fatal("no new failure, yet the rate halved")
	}
	if !r.failed(5, t0.Add(100*time.Second)) || r.at(t0.Add(100*time.Second)) != 25 || r.at(t0.Add(150*time.Second)) != 37.5 {
		t.Fatalf("after new failures at the full rate: %v/s, then %v/s; want 25, ramping to 50", r.at(t0.Add(100*time.Second)),
			r.at(t0.Add(150*time.Second)))
	}
	for _, f := range []int64{9, 12, 15} { // 12.5, 6.25, then the floor
		r.failed(f, t0.Add(100*time.Second))
	}
	if got := r.at(t0.Add(100 * time.Second)); got != 5 {
		t.Fatalf("after failing again and again: %v/s, want the floor of a tenth", got)
	}
	flat := newRamped(50, 0, t0, 0)
	if flat.at(t0) != 50 {
		t.Fatalf("without a ramp: %v/s, want 50 at once", flat.at(t0))
	}
	// Releases follow the rate: in the first second of a ramp from 5/s, the
	// burst (a tenth of a second at the full rate: 5) and about 5 more.
	fresh := newRamped(50, 100*time.Second, t0, 0)
	got := 0
	for i := range 1000 {
		if fresh.allow(t0.Add(time.Duration(i) * time.Millisecond)) {
			got++
		}
	}
	if got < 5 || got > 12 {
		t.Fatalf("%d releases in the first second of a ramp from 5/s (burst 5), want about 10", got)
	}
}
