package topics

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultPrefix is the topic name prefix when WEBHOOKS_TOPIC_PREFIX is unset.
const DefaultPrefix = "webhooks."

// DefaultRetryTiers is the tier list when WEBHOOKS_RETRY_TIERS is unset.
const DefaultRetryTiers = "5s,5m,30m,2h,5h,10h"

// Consumer groups, one per component.
const (
	GroupDispatcher = "webhooks-dispatcher"
	GroupDeliverer  = "webhooks-deliverer"
	GroupRetrier    = "webhooks-retrier"
	GroupRecorder   = "webhooks-recorder"
)

// Names turns the configured prefix and retry tiers into topic names.
type Names struct {
	Prefix string
	// Tiers are the distinct retry delays, ascending; one topic each.
	Tiers []time.Duration
}

// NewNames returns the names for a prefix and a comma-separated tier list.
func NewNames(prefix, tiers string) (Names, error) {
	ts, err := ParseTiers(tiers)
	if err != nil {
		return Names{}, err
	}
	return Names{Prefix: prefix, Tiers: ts}, nil
}

// Events is the input topic producers write to.
func (n Names) Events() string { return n.Prefix + "events" }

// Subscriptions is the compacted topic holding subscriptions by id.
func (n Names) Subscriptions() string { return n.Prefix + "subscriptions" }

// Deliveries holds one record per (event, matching subscription) of normal
// priority, and every delivery of an ordered subscription.
func (n Names) Deliveries() string { return n.Prefix + "deliveries" }

// DeliveriesHigh holds the deliveries of high-priority events, partitioned
// like Deliveries.
func (n Names) DeliveriesHigh() string { return n.Prefix + "deliveries.high" }

// DeliveriesLow holds the deliveries of low-priority events, partitioned
// like Deliveries.
func (n Names) DeliveriesLow() string { return n.Prefix + "deliveries.low" }

// DeliveriesFor is the deliveries topic of a priority ("" is normal).
func (n Names) DeliveriesFor(priority string) string {
	switch priority {
	case PriorityHigh:
		return n.DeliveriesHigh()
	case PriorityLow:
		return n.DeliveriesLow()
	}
	return n.Deliveries()
}

// DeliveryTopics are the topics of fresh deliveries, high priority first.
func (n Names) DeliveryTopics() []string {
	return []string{n.DeliveriesHigh(), n.Deliveries(), n.DeliveriesLow()}
}

// Redeliveries holds the retries the retrier released when due, keyed and
// partitioned like Deliveries. The deliverer consumes it next to
// Deliveries with a budget of its own, so fresh deliveries never queue
// behind a storm of due retries.
func (n Names) Redeliveries() string { return n.Prefix + "redeliveries" }

// DLQ holds what the pipeline gave up on.
func (n Names) DLQ() string { return n.Prefix + "dlq" }

// Attempts holds one record per delivery attempt.
func (n Names) Attempts() string { return n.Prefix + "attempts" }

// Parked holds the deliveries of ordered keys waiting behind a failed
// delivery of the same key, in arrival order.
func (n Names) Parked() string { return n.Prefix + "parked" }

// Holds is the compacted topic of held ordered keys: delivery key -> Hold.
func (n Names) Holds() string { return n.Prefix + "holds" }

// APIKeys is the compacted topic of the control plane's API keys.
func (n Names) APIKeys() string { return n.Prefix + "apikeys" }

// Tenants is the compacted topic of per-tenant quotas: tenant -> Tenant.
func (n Names) Tenants() string { return n.Prefix + "tenants" }

// EventTypes is the compacted topic of the event catalog: type name ->
// EventType.
func (n Names) EventTypes() string { return n.Prefix + "event-types" }

// AlertChannels is the compacted topic of the alert channels: id ->
// AlertChannel.
func (n Names) AlertChannels() string { return n.Prefix + "alert-channels" }

// Notices is the one-partition topic of the operational events the
// dispatcher fanned out, copied there in its transaction for the alerter,
// which then need not read the whole events topic for them.
func (n Names) Notices() string { return n.Prefix + "notices" }

// OnePartition reports whether a topic is created with one partition
// whatever the layout: small tables read whole by every reader, and the
// topics one consumer of a group reads alone.
func (n Names) OnePartition(topic string) bool {
	return topic == n.Subscriptions() || topic == n.Operations() || topic == n.EventTypes() || topic == n.Notices()
}

// Operations is the compacted, one-partition topic of the API's bulk
// operations.
func (n Names) Operations() string { return n.Prefix + "operations" }

// Cancellations is the topic of cancelled scheduled events, keyed by
// CancellationKey (compacted, and deleted after CancellationRetention).
func (n Names) Cancellations() string { return n.Prefix + "cancellations" }

// Retry is the topic of the tier with the given delay.
func (n Names) Retry(d time.Duration) string { return n.Prefix + "retry." + FormatDelay(d) }

// RetryTopics lists the tier topics, shortest delay first.
func (n Names) RetryTopics() []string {
	out := make([]string, len(n.Tiers))
	for i, d := range n.Tiers {
		out[i] = n.Retry(d)
	}
	return out
}

// TierFor picks the tier for a wanted delay: the longest tier not longer than
// the delay (so a record never waits in a tier longer than it asked for), or
// the shortest tier when the delay is below every tier. Within one tier topic
// not-before times then grow with publish time, give or take jitter.
func (n Names) TierFor(delay time.Duration) time.Duration {
	if len(n.Tiers) == 0 {
		return 0
	}
	tier := n.Tiers[0]
	for _, t := range n.Tiers {
		if t <= delay {
			tier = t
		}
	}
	return tier
}

// Compacted lists the compacted topics: tables keyed by id.
func (n Names) Compacted() []string {
	return []string{n.Subscriptions(), n.Holds(), n.APIKeys(), n.Operations(), n.Tenants(), n.EventTypes(), n.Cancellations(), n.AlertChannels()}
}

// All lists every topic of the pipeline.
func (n Names) All() []string {
	out := []string{n.Events(), n.Subscriptions(), n.Deliveries(), n.DeliveriesHigh(), n.DeliveriesLow(), n.Redeliveries(), n.DLQ(), n.Attempts(), n.Parked(), n.Holds(), n.APIKeys(), n.Operations(), n.Tenants(), n.EventTypes(), n.Cancellations(), n.AlertChannels(), n.Notices()}
	return append(out, n.RetryTopics()...)
}

// ParseTiers parses a comma-separated list of delays ("5s,5m,2h"), returning
// them sorted and without duplicates.
func ParseTiers(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, fmt.Errorf("retry tier %q: %w", f, err)
		}
		if d < time.Second {
			return nil, fmt.Errorf("retry tier %q: must be at least 1s", f)
		}
		if d%time.Second != 0 {
			return nil, fmt.Errorf("retry tier %q: must be a whole number of seconds", f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("retry tiers %q: at least one tier is required", s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatDelay renders a delay the way tier topics are named: 5s, 5m, 2h,
// 1h30m; whole units only, no trailing zero units.
func FormatDelay(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
