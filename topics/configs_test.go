package topics

import (
	"strings"
	"testing"
	"time"
)

func TestTopicConfigs(t *testing.T) {
	n, err := NewNames(DefaultPrefix, "5s,5m,30m,2h,5h,10h,48h,72h")
	if err != nil {
		t.Fatal(err)
	}
	retention := func(topic string) time.Duration {
		t.Helper()
		d := n.Retention(topic)
		if d == 0 {
			t.Fatalf("%s has no retention.ms", topic)
		}
		return d
	}
	for _, d := range n.Tiers {
		t.Run(n.Retry(d), func(t *testing.T) {
			if got := retention(n.Retry(d)); got < 4*d {
				t.Fatalf("retention %v < 4 x %v", got, d)
			}
		})
	}
	for _, topic := range []string{n.Subscriptions(), n.Holds(), n.APIKeys(), n.Operations()} {
		t.Run(topic, func(t *testing.T) {
			cfg := n.TopicConfigs(topic)
			if p := cfg["cleanup.policy"]; p == nil || *p != "compact" {
				t.Fatalf("%s configs = %v, want cleanup.policy=compact", topic, cfg)
			}
			if _, ok := cfg["retention.ms"]; ok || n.Retention(topic) != 0 {
				t.Fatalf("%s must not expire records by time", topic)
			}
		})
	}
	t.Run("cancellations are a table that expires", func(t *testing.T) {
		cfg := n.TopicConfigs(n.Cancellations())
		if p := cfg["cleanup.policy"]; p == nil || *p != "compact,delete" {
			t.Fatalf("cancellations configs = %v, want cleanup.policy=compact,delete", cfg)
		}
		if got := retention(n.Cancellations()); got <= MaxScheduleAhead {
			t.Fatalf("cancellations retention %v does not outlive a schedule of %v", got, MaxScheduleAhead)
		}
	})
	t.Run("events keep a week for replay", func(t *testing.T) {
		if got := retention(n.Events()); got < 7*24*time.Hour {
			t.Fatalf("events retention %v < 7 days", got)
		}
	})
	t.Run("dlq outlives events", func(t *testing.T) {
		if got := retention(n.DLQ()); got < retention(n.Events()) {
			t.Fatalf("dlq retention %v < events retention", got)
		}
	})
	t.Run("others are not compacted", func(t *testing.T) {
		for _, topic := range append([]string{n.Events(), n.Deliveries(), n.DLQ(), n.Attempts()}, n.RetryTopics()...) {
			if p := n.TopicConfigs(topic)["cleanup.policy"]; p != nil && strings.Contains(*p, "compact") {
				t.Errorf("%s is compacted", topic)
			}
		}
	})
}
