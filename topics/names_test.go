package topics

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTiers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []time.Duration
		wantErr string // substring; empty means success
	}{
		{name: "default", in: DefaultRetryTiers, want: []time.Duration{
			5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}},
		{name: "single", in: "5s", want: []time.Duration{5 * time.Second}},
		{name: "sorted", in: "2h,5s,30m", want: []time.Duration{5 * time.Second, 30 * time.Minute, 2 * time.Hour}},
		{name: "dedup", in: "5m,5s,5m,5s", want: []time.Duration{5 * time.Second, 5 * time.Minute}},
		{name: "dedup equal durations spelled differently", in: "90s,1m30s,5s", want: []time.Duration{5 * time.Second, 90 * time.Second}},
		{name: "spaces and empty fields", in: " 5s , ,10h,", want: []time.Duration{5 * time.Second, 10 * time.Hour}},
		{name: "exactly 1s", in: "1s", want: []time.Duration{time.Second}},
		{name: "empty", in: "", wantErr: "at least one tier"},
		{name: "only commas", in: " , ,", wantErr: "at least one tier"},
		{name: "below 1s", in: "5s,500ms", wantErr: "at least 1s"},
		{name: "zero", in: "0s", wantErr: "at least 1s"},
		{name: "negative", in: "-5s", wantErr: "at least 1s"},
		{name: "garbage", in: "5s,soon", wantErr: `"soon"`},
		{name: "number without unit", in: "5", wantErr: `"5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTiers(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseTiers(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTiers(%q): %v", tc.in, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ParseTiers(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// Names.Tiers promises one topic per tier. Every tier list ParseTiers accepts
// must therefore give distinct topic names, or two tiers would share a topic
// (and Ensure, All and the retrier would see it twice).
func TestParseTiersGivesDistinctTopics(t *testing.T) {
	for _, in := range []string{
		DefaultRetryTiers,
		"1s,2s,3s",
		"59s,1m,61s",
		"1500ms,2s", // 1.5s is named retry.2s, like 2s
		"2500ms,3s",
	} {
		t.Run(in, func(t *testing.T) {
			n, err := NewNames(DefaultPrefix, in)
			if err != nil {
				return // rejecting such a list is fine too
			}
			topics := n.RetryTopics()
			seen := map[string]time.Duration{}
			for i, tp := range topics {
				if d, dup := seen[tp]; dup {
					t.Fatalf("tiers %v and %v share the topic %q (tiers %q)", d, n.Tiers[i], tp, in)
				}
				seen[tp] = n.Tiers[i]
			}
		})
	}
}

func TestFormatDelay(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{time.Second, "1s"},
		{5 * time.Second, "5s"},
		{59 * time.Second, "59s"},
		{time.Minute, "1m"},
		{5 * time.Minute, "5m"},
		{30 * time.Minute, "30m"},
		{time.Hour, "1h"},
		{2 * time.Hour, "2h"},
		{5 * time.Hour, "5h"},
		{10 * time.Hour, "10h"},
		{48 * time.Hour, "48h"},
		{time.Hour + 30*time.Minute, "1h30m"},
		{2*time.Hour + 10*time.Minute, "2h10m"},
		{90 * time.Second, "1m30s"},
		{time.Hour + 5*time.Second, "1h0m5s"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := FormatDelay(tc.d); got != tc.want {
				t.Fatalf("FormatDelay(%v) = %q, want %q", tc.d, got, tc.want)
			}
			// The name must parse back to the same delay.
			if back, err := time.ParseDuration(FormatDelay(tc.d)); err != nil || back != tc.d {
				t.Fatalf("FormatDelay(%v) = %q parses back to %v, %v", tc.d, FormatDelay(tc.d), back, err)
			}
		})
	}
}

func TestNamesTopics(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   map[string]string
	}{
		{prefix: DefaultPrefix, want: map[string]string{
			"events": "webhooks.events", "subscriptions": "webhooks.subscriptions",
			"deliveries": "webhooks.deliveries", "dlq": "webhooks.dlq", "attempts": "webhooks.attempts",
			"retry5s": "webhooks.retry.5s", "retry2h": "webhooks.retry.2h", "retry1h30m": "webhooks.retry.1h30m",
		}},
		{prefix: "", want: map[string]string{
			"events": "events", "subscriptions": "subscriptions",
			"deliveries": "deliveries", "dlq": "dlq", "attempts": "attempts",
			"retry5s": "retry.5s", "retry2h": "retry.2h", "retry1h30m": "retry.1h30m",
		}},
		{prefix: "staging-", want: map[string]string{
			"events": "staging-events", "subscriptions": "staging-subscriptions",
			"deliveries": "staging-deliveries", "dlq": "staging-dlq", "attempts": "staging-attempts",
			"retry5s": "staging-retry.5s", "retry2h": "staging-retry.2h", "retry1h30m": "staging-retry.1h30m",
		}},
	} {
		t.Run("prefix="+tc.prefix, func(t *testing.T) {
			n := Names{Prefix: tc.prefix}
			got := map[string]string{
				"events": n.Events(), "subscriptions": n.Subscriptions(),
				"deliveries": n.Deliveries(), "dlq": n.DLQ(), "attempts": n.Attempts(),
				"retry5s": n.Retry(5 * time.Second), "retry2h": n.Retry(2 * time.Hour),
				"retry1h30m": n.Retry(90 * time.Minute),
			}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

func TestNewNames(t *testing.T) {
	n, err := NewNames("p.", "2h,5s")
	if err != nil {
		t.Fatal(err)
	}
	if n.Prefix != "p." || !slices.Equal(n.Tiers, []time.Duration{5 * time.Second, 2 * time.Hour}) {
		t.Fatalf("NewNames = %+v", n)
	}
	if _, err := NewNames("p.", "fast"); err == nil {
		t.Fatal("NewNames with bad tiers: no error")
	}
}

func TestRetryTopicsAndAll(t *testing.T) {
	n, err := NewNames(DefaultPrefix, DefaultRetryTiers)
	if err != nil {
		t.Fatal(err)
	}
	wantRetry := []string{
		"webhooks.retry.5s", "webhooks.retry.5m", "webhooks.retry.30m",
		"webhooks.retry.2h", "webhooks.retry.5h", "webhooks.retry.10h",
	}
	if got := n.RetryTopics(); !slices.Equal(got, wantRetry) {
		t.Fatalf("RetryTopics = %q, want %q", got, wantRetry)
	}
	wantAll := append([]string{
		"webhooks.events", "webhooks.subscriptions", "webhooks.deliveries", "webhooks.deliveries.high", "webhooks.deliveries.low", "webhooks.redeliveries", "webhooks.dlq", "webhooks.attempts", "webhooks.parked", "webhooks.holds", "webhooks.apikeys", "webhooks.operations", "webhooks.tenants", "webhooks.event-types", "webhooks.cancellations", "webhooks.alert-channels", "webhooks.notices",
	}, wantRetry...)
	if got := n.All(); !slices.Equal(got, wantAll) {
		t.Fatalf("All = %q, want %q", got, wantAll)
	}
	// All must not alias RetryTopics' or anything else's backing array
	// across calls.
	a := n.All()
	a[0] = "mutated"
	if n.All()[0] != "webhooks.events" {
		t.Fatal("All returns shared storage")
	}

	if got := (Names{Prefix: "x."}).RetryTopics(); len(got) != 0 {
		t.Fatalf("RetryTopics without tiers = %q", got)
	}
	if got := (Names{Prefix: "x."}).All(); len(got) != 17 {
		t.Fatalf("All without tiers = %q, want the 17 fixed topics", got)
	}
}

func TestTierFor(t *testing.T) {
	n, err := NewNames(DefaultPrefix, DefaultRetryTiers) // 5s,5m,30m,2h,5h,10h
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		delay time.Duration
		want  time.Duration
	}{
		{"negative: shortest", -time.Second, 5 * time.Second},
		{"zero: shortest", 0, 5 * time.Second},
		{"below every tier: shortest", 1 * time.Second, 5 * time.Second},
		{"just below shortest", 5*time.Second - 1, 5 * time.Second},
		{"exactly shortest", 5 * time.Second, 5 * time.Second},
		{"between 5s and 5m", 4 * time.Minute, 5 * time.Second},
		{"exactly 5m", 5 * time.Minute, 5 * time.Minute},
		{"between 5m and 30m", 29 * time.Minute, 5 * time.Minute},
		{"between 30m and 2h", 90 * time.Minute, 30 * time.Minute},
		{"just below 2h", 2*time.Hour - time.Second, 30 * time.Minute},
		{"exactly 5h", 5 * time.Hour, 5 * time.Hour},
		{"between 5h and 10h", 7 * time.Hour, 5 * time.Hour},
		{"exactly longest", 10 * time.Hour, 10 * time.Hour},
		{"above every tier: longest", 48 * time.Hour, 10 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := n.TierFor(tc.delay); got != tc.want {
				t.Fatalf("TierFor(%v) = %v, want %v", tc.delay, got, tc.want)
			}
			if !slices.Contains(n.Tiers, n.TierFor(tc.delay)) {
				t.Fatalf("TierFor(%v) is not a tier", tc.delay)
			}
		})
	}
	if got := (Names{}).TierFor(time.Hour); got != 0 {
		t.Fatalf("TierFor without tiers = %v, want 0", got)
	}
}
