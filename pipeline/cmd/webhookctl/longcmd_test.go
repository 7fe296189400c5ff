package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// produce writes records as the pipeline's components do (deliveries,
// retries and dead letters placed by subscription id) and returns them
// with their partitions and offsets.
func (h *harness) produce(recs ...*kgo.Record) []*kgo.Record {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers), kgo.RecordPartitioner(topics.Partitioner()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The results come in no particular order; the records are updated in
	// place.
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	return recs
}

// committed reads the committed records of topic up to its last stable
// offset, as the pipeline's read-committed consumers see them.
func (h *harness) committed(topic string) []*kgo.Record {
	h.t.Helper()
	return h.readTo(topic, true)
}

var progressRE = regexp.MustCompile(`^(redriven \d+ of \d+|replayed \d+, scanned \d+, skipped \d+)$`)

// okLong runs a long command that must succeed and returns its output; its
// stderr may hold progress lines only.
func (h *harness) okLong(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.t.Fatalf("webhookctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	for _, line := range strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n") {
		if line != "" && !progressRE.MatchString(line) {
			h.t.Fatalf("webhookctl %s: stderr line %q is not a progress line", strings.Join(args, " "), line)
		}
	}
	return r.stdout
}

func TestLongCommandUsage(t *testing.T) {
	// Nothing here may need a broker: point at one that does not exist.
	h := &harness{t: t, env: map[string]string{kafkaconfig.EnvBrokers: "127.0.0.1:1"}}
	out := h.ok("help")
	for _, want := range []string{"dlq list", "dlq redrive", "replay", "duration ago"} {
		if !strings.Contains(out, want) {
			t.Errorf("help does not mention %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{
		{"dlq"},
		{"dlq", "purge"},
		{"dlq", "list", "--since", "yesterday"},
		{"dlq", "list", "--since", "-2h"},
		{"dlq", "list", "--until", "2026-13-01T00:00:00Z"},
		{"dlq", "list", "--since", "1h", "--until", "2h"},
		{"dlq", "list", "--limit", "-1"},
		{"dlq", "list", "--type", "order created"},
		{"dlq", "list", "extra"},
		{"dlq", "redrive", "--rate", "0"},
		{"dlq", "redrive", "--rate", "-5"},
		{"dlq", "redrive", "--rate", "NaN"},
		{"dlq", "redrive", "--rate", "Inf"},
		{"dlq", "redrive", "--rate", "fast"},
		{"dlq", "redrive", "--since", "2026-11-22"},
		{"replay", "--since", "1h"},
		{"replay", "--subscription", "sub_1"},
		{"replay", "--subscription", "sub_1", "--since", "1h", "--types", "a,b c"},
		{"replay", "--subscription", "sub_1", "--since", "1h", "--rate", "0"},
		{"replay", "--subscription", "sub_1", "--since", "soon"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) { checkFailure(t, h.run(args...), 2) })
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"", time.Time{}},
		{"2026-11-20T10:00:00Z", time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)},
		{"2026-11-20T10:00:00.5+01:00", time.Date(2026, 11, 20, 9, 0, 0, 5e8, time.UTC)},
		{"90m", now.Add(-90 * time.Minute)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"3d", now.Add(-72 * time.Hour)},
		{"0s", now},
	} {
		got, err := parseTime("--since", tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"yesterday", "-1h", "-3d", "d", "1.5d", "2026-11-20"} {
		if _, err := parseTime("--since", in, now); err == nil {
			t.Errorf("parseTime(%q) accepted", in)
		}
	}
}

func TestPaceBatches(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		batch int
	}{{0.2, 1}, {1, 1}, {2.5, 3}, {50, 50}, {100, 100}, {5000, maxBatch}} {
		p, err := newPace(tc.rate)
		if err != nil || p.batch != tc.batch {
			t.Errorf("newPace(%v): batch %v, %v; want %d", tc.rate, p, err, tc.batch)
		}
	}
}

func TestMissingTopicsLong(t *testing.T) {
	h := newHarness(t, false)
	for _, args := range [][]string{
		{"dlq", "list"},
		{"dlq", "redrive", "--dry-run"},
		{"replay", "--subscription", "sub_1", "--since", "1h"},
	} {
		if line := h.fails(1, args...); !strings.Contains(line, "run webhookctl topics ensure") {
			t.Errorf("%v: %q does not tell to run topics ensure", args, line)
		}
	}
}
