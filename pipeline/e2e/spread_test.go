package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestHotSubscriptionSpreads (ADR 0020): an ordered subscription spread
// over four partitions is carried by two deliverer processes at once, each
// delivering part of it, while every delivery arrives and per-key order
// holds, across failures that send deliveries through the retry tiers,
// holds and parked deliveries (all keyed, and so placed, by shard). With
// the subscription on one partition, one process would deliver all of it.
func TestHotSubscriptionSpreads(t *testing.T) {
	bin := filepath.Join(binaries(t), "deliverer")
	e := newEnv(t) // four partitions per topic
	r := newReceiver(t)
	r.delay = 3 * time.Millisecond
	// The first attempt of one event in seven fails (503): its key is held
	// and its next deliveries parked until the 1s tier brings it back.
	var mu sync.Mutex
	tries := map[string]int{}
	r.answer(func(q request, _ http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		tries[q.ID]++
		if strings.HasSuffix(q.ID, "3") && tries[q.ID] == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	fast := []string{"1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s"}
	r.trust(e.subscribe(topics.Subscription{ID: "hot", URL: r.url("hot"), EventTypes: []string{"*"}, Enabled: true,
		Ordering: topics.OrderingKey, RetrySchedule: fast, Partitions: 4}))
	e.startDispatcher()
	e.startRetrier()
	addrs := map[string]string{"deliverer-a": testkit.FreeAddr(t), "deliverer-b": testkit.FreeAddr(t)}
	for name, addr := range addrs {
		e.startProcWith(bin, name, map[string]string{config.EnvHTTPAddr: addr})
	}
	// Both members hold partitions of the deliveries topic before anything
	// is published, so neither takes the whole subscription while the
	// other joins.
	e.waitDeliverers(2)

	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("K%02d", i)
	}
	const perKey = 15
	evs := orderedEvents(keys, perKey)
	e.publish(evs...)
	wait(t, 120*time.Second, "every delivery", func() bool {
		p := r.pairs()
		for _, ev := range evs {
			if p["hot/"+ev.ID] == 0 {
				return false
			}
		}
		return true
	})
	for _, k := range keys {
		checkKeyOrder(t, r, "hot", k)
	}
	r.checkSignatures(t)

	// Each process counts what it delivered.
	carried := map[string]float64{}
	for name, addr := range addrs {
		m, _ := scrape(t, addr)
		carried[name] = m[`webhooks_deliveries_total{outcome="success"}`]
	}
	t.Logf("%d events over %d keys; delivered per process: %v", len(evs), len(keys), carried)
	for name, n := range carried {
		if n == 0 {
			t.Errorf("%s delivered none of the spread subscription's events: %v", name, carried)
		}
	}
	if total := carried["deliverer-a"] + carried["deliverer-b"]; total < float64(len(evs)) {
		t.Errorf("the processes count %v deliveries, fewer than the %d events", total, len(evs))
	}
}

// waitDeliverers waits until the deliverer group is stable with n members,
// each holding partitions of the deliveries topic.
func (e *env) waitDeliverers(n int) {
	e.t.Helper()
	adm := kadm.NewClient(e.cl)
	wait(e.t, 60*time.Second, fmt.Sprintf("%d deliverers sharing the deliveries topic", n), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		groups, err := adm.DescribeGroups(ctx, e.group(topics.GroupDeliverer))
		if err != nil {
			return false
		}
		g := groups[e.group(topics.GroupDeliverer)]
		if g.State != "Stable" || len(g.Members) != n {
			return false
		}
		for _, m := range g.Members {
			c, ok := m.Assigned.AsConsumer()
			if !ok || !slices.ContainsFunc(c.Topics, func(tp kmsg.ConsumerMemberAssignmentTopic) bool {
				return tp.Topic == e.names.Deliveries() && len(tp.Partitions) > 0
			}) {
				return false
			}
		}
		return true
	})
}
