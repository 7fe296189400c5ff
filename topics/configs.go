package topics

import (
	"slices"
	"strconv"
	"time"
)

const day = 24 * time.Hour

// TopicConfigs returns the configs a topic is created with.
func (n Names) TopicConfigs(topic string) map[string]*string {
	ms := func(d time.Duration) *string { s := strconv.FormatInt(d.Milliseconds(), 10); return &s }
	if topic == n.Cancellations() {
		// A table (compacted), whose records are of no use once the
		// events they cancel are past their deliver_at: deleted then,
		// so that it does not grow forever.
		policy := "compact,delete"
		return map[string]*string{"cleanup.policy": &policy, "retention.ms": ms(CancellationRetention)}
	}
	if slices.Contains(n.Compacted(), topic) {
		compact := "compact"
		return map[string]*string{"cleanup.policy": &compact}
	}
	switch topic {
	case n.Parked():
		// A key can be held for the whole retry schedule (about 28 h) and
		// then some; parked records must outlive any hold.
		return map[string]*string{"retention.ms": ms(30 * day)}
	case n.Events():
		// Events are the replay store: keep a week.
		return map[string]*string{"retention.ms": ms(7 * day)}
	case n.DLQ():
		return map[string]*string{"retention.ms": ms(30 * day)}
	}
	for _, d := range n.Tiers {
		if topic == n.Retry(d) {
			// A record must outlive its hold-back by a wide margin.
			return map[string]*string{"retention.ms": ms(max(7*day, 4*d))}
		}
	}
	return map[string]*string{"retention.ms": ms(7 * day)}
}

// Retention is how long a topic created by TopicConfigs keeps its records
// (0: compacted, kept until a newer record of the key replaces them). The
// broker may have been told otherwise since.
func (n Names) Retention(topic string) time.Duration {
	v := n.TopicConfigs(topic)["retention.ms"]
	if v == nil {
		return 0
	}
	ms, err := strconv.ParseInt(*v, 10, 64)
	if err != nil {
		panic(err)
	}
	return time.Duration(ms) * time.Millisecond
}
