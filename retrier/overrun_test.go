package retrier

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookpipe/hookpipe/retrier/internal/window"
)

// TestOverrun: a paused partition whose horizon has passed (a record
// behind its window, not fetched, may be due) is counted and logged once;
// it stops counting once resumed. Before the horizon, or with the
// partition fetching, nothing behind can be late.
func TestOverrun(t *testing.T) {
	const tier = 10 * time.Second
	written := time.UnixMilli(1_800_000_000_000)
	var h window.Partition
	h.Add(&kgo.Record{Offset: 0, Timestamp: written})
	core, logs := observer.New(zapcore.WarnLevel)
	k := tp{"webhooks.retry.10s", 3}
	r := &retrier{
		log:     zap.New(core),
		tiers:   map[string]time.Duration{k.topic: tier},
		held:    map[tp]*window.Partition{k: &h},
		paused:  map[tp]bool{},
		overrun: map[tp]bool{},
	}
	horizon := written.Add(8 * time.Second)

	r.checkOverrun(horizon.Add(time.Hour))
	if r.overrun[k] {
		t.Fatal("a partition still fetching is counted as overrun")
	}
	r.paused[k] = true
	r.checkOverrun(horizon.Add(-time.Millisecond))
	if r.overrun[k] {
		t.Fatal("overrun before the horizon: nothing behind the window can be due yet")
	}
	for range 2 {
		r.checkOverrun(horizon)
	}
	if !r.overrun[k] {
		t.Fatal("paused past the horizon, not counted as overrun")
	}
	if n := logs.FilterMessageSnippet("may be released late").Len(); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
	delete(r.paused, k)
	r.checkOverrun(horizon.Add(time.Hour))
	if r.overrun[k] {
		t.Fatal("still overrun after the partition resumed")
	}
	if overrun(&window.Partition{}, tier, horizon.Add(time.Hour)) {
		t.Fatal("an empty partition is overrun")
	}
}

// TestLatenessOfDueReleasesOnly: the lateness histogram observes the
// records released as due, how long after their due time; a record released
// early for a recovered endpoint is not late and is not observed.
func TestLatenessOfDueReleasesOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, &retrier{})
	now := time.UnixMilli(1_800_000_000_000)
	m.late([]window.Record{
		{Due: now.Add(-2 * time.Second)}, // due 2 s before the release decision
		{Due: now.Add(time.Hour)},        // early: due in an hour
	}, now, now.Add(500*time.Millisecond))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "webhooks_retrier_release_lateness_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() != 2.5 {
			t.Fatalf("%d observations summing to %vs, want 1 of 2.5s", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatal("no webhooks_retrier_release_lateness_seconds")
}
