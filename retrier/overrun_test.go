package retrier

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookpipe/hookpipe/retrier/internal/hold"
)

// TestOverrun: a paused partition whose horizon has passed (a record
// behind its window, not fetched, may be due) is counted and logged once;
// it stops counting once resumed. Before the horizon, or with the
// partition fetching, nothing behind can be late.
func TestOverrun(t *testing.T) {
	const tier = 10 * time.Second
	written := time.UnixMilli(1_800_000_000_000)
	var h hold.Partition
	h.Add(&kgo.Record{Offset: 0, Timestamp: written})
	core, logs := observer.New(zapcore.WarnLevel)
	k := tp{"webhooks.retry.10s", 3}
	r := &retrier{
		log:     zap.New(core),
		tiers:   map[string]time.Duration{k.topic: tier},
		held:    map[tp]*hold.Partition{k: &h},
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
	if overrun(&hold.Partition{}, tier, horizon.Add(time.Hour)) {
		t.Fatal("an empty partition is overrun")
	}
}
