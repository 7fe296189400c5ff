package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// withRedis turns endpoint protection on for every component of e.
func (e *env) withRedis(url, prefix string, more map[string]string) {
	e.vars[redisstate.EnvURL] = url
	e.vars[redisstate.EnvKeyPrefix] = prefix
	e.vars[redisstate.EnvRetryInterval] = "1s"
	e.vars[redisstate.EnvTimeout] = "1s" // the default 100 ms fails open under -race on a loaded machine
	for k, v := range more {
		e.vars[k] = v
	}
}

// withTiers switches e to other retry tiers, creating their topics.
func (e *env) withTiers(tiers string) {
	e.t.Helper()
	e.vars[kafka.EnvRetryTiers] = tiers
	k, err := kafka.Load(e.getenv)
	if err != nil {
		e.t.Fatal(err)
	}
	e.names = k.Names
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kafka.Ensure(ctx, kadm.NewClient(e.cl), e.names, kafka.Layout{Partitions: 4, ReplicationFactor: -1}); err != nil {
		e.t.Fatal(err)
	}
}

// dispatchedIDs counts the committed deliveries of the given events. The
// last id is a marker published after the others with the same key: once
// its delivery is there, so is every delivery of the others.
func (e *env) dispatchedIDs(ids ...string) map[string]int {
	e.t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := map[string]int{}
	e.consume(e.names.Deliveries(), 30*time.Second, func(recs []*kgo.Record) bool {
		clear(out)
		for _, r := range recs {
			if d, err := topics.DecodeDelivery(r.Value); err == nil && want[d.EventID] {
				out[d.EventID]++
			}
		}
		return out[ids[len(ids)-1]] > 0
	})
	return out
}

// TestRedisKilledMidRun runs the pipeline with its own redis-server and
// kills it mid-run: every event still arrives (no dedup, breaker closed,
// no rate limit while it is gone), and dedup resumes by itself once Redis
// is back.
func TestRedisKilledMidRun(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	e.withRedis(srv.URL(), "e2e:", map[string]string{"WEBHOOKS_BREAKER_MIN_CALLS": "5"})
	r := newReceiver(t)
	s := e.subscribe(topics.Subscription{ID: "sub_redis", URL: r.url("sub_redis"), EventTypes: []string{"*"}, Enabled: true,
		RateLimitPerS: 1000})
	r.trust(s)
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()

	ev := func(id, idem string) topics.Event {
		return topics.Event{ID: id, Type: "t.x", Key: "k", IdempotencyKey: idem, Data: json.RawMessage(`{}`)}
	}
	var before []topics.Event
	for i := range 20 {
		before = append(before, ev(fmt.Sprintf("before_%02d", i), fmt.Sprintf("idem_b_%02d", i)))
	}
	e.publish(before...)
	wait(t, 60*time.Second, "the events before the kill", func() bool { return r.count() >= 20 })

	srv.Kill()
	var during []topics.Event
	for i := range 20 {
		// Pairs sharing an idempotency key: without Redis both go out.
		during = append(during, ev(fmt.Sprintf("during_%02d", i), fmt.Sprintf("idem_d_%02d", i/2)))
	}
	e.publish(during...)
	wait(t, 60*time.Second, "every event while Redis is down", func() bool {
		p := r.pairs()
		for _, x := range append(before, during...) {
			if p["sub_redis/"+x.ID] == 0 {
				return false
			}
		}
		return true
	})

	srv.Restart()
	// Dedup resumes: a round whose second event of a key is dropped.
	n := 0
	wait(t, 60*time.Second, "dedup to resume", func() bool {
		n++
		first, second, marker := fmt.Sprintf("after_%d_a", n), fmt.Sprintf("after_%d_b", n), fmt.Sprintf("after_%d_c", n)
		e.publish(ev(first, fmt.Sprintf("idem_a_%d", n)), ev(second, fmt.Sprintf("idem_a_%d", n)), ev(marker, ""))
		got := e.dispatchedIDs(first, second, marker)
		return got[first] == 1 && got[second] == 0 && got[marker] == 1
	})
	r.checkSignatures(t)
}

// TestProtectionMetrics: with Redis, the components export its state and
// what the protections did: breaker transitions and the breakers open
// across replicas, rate-limit waits, events dropped as duplicates, and the
// fail-open state once Redis is gone.
func TestProtectionMetrics(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t)
	e.withRedis(srv.URL(), "metrics:", map[string]string{"WEBHOOKS_BREAKER_MIN_CALLS": "3", "WEBHOOKS_BREAKER_SLEEP": "1h"})
	r := newReceiver(t)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if q.Sub == "sub_down" {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	r.trust(e.subscribe(topics.Subscription{ID: "sub_down", URL: r.url("sub_down"), EventTypes: []string{"down.*"}, Enabled: true}))
	r.trust(e.subscribe(topics.Subscription{ID: "sub_slow", URL: r.url("sub_slow"), EventTypes: []string{"slow.*"}, Enabled: true,
		RateLimitPerS: 5}))
	addrs, _ := e.startServing()

	var evs []topics.Event
	for i := range 3 {
		evs = append(evs, topics.Event{ID: fmt.Sprintf("down_%d", i), Type: "down.x", Key: fmt.Sprintf("k%d", i), Data: json.RawMessage(`{}`)})
	}
	for i := range 10 {
		evs = append(evs, topics.Event{ID: fmt.Sprintf("slow_%d", i), Type: "slow.x", Key: fmt.Sprintf("k%d", i), Data: json.RawMessage(`{}`)})
	}
	evs = append(evs,
		topics.Event{ID: "dup_1", Type: "none.x", IdempotencyKey: "once", Data: json.RawMessage(`{}`)},
		topics.Event{ID: "dup_2", Type: "none.x", IdempotencyKey: "once", Data: json.RawMessage(`{}`)})
	e.publish(evs...)

	atLeast := func(addr string, want map[string]float64) func() bool {
		return func() bool {
			got, _ := scrape(t, addr)
			for series, v := range want {
				if g, ok := got[series]; !ok || g < v {
					return false
				}
			}
			return true
		}
	}
	wait(t, 60*time.Second, "the deliverer's protection metrics", atLeast(addrs["deliverer"], map[string]float64{
		`webhooks_redis_up`:                             1,
		`webhooks_breaker_transitions_total{to="open"}`: 1,
		`webhooks_breakers_open`:                        1,
		`webhooks_breaker_open_longest_seconds`:         0,
		`webhooks_rate_limit_waits_total`:               1,
		`webhooks_rate_limit_waiting`:                   0,
		`webhooks_redis_fail_open_total`:                0,
	}))
	wait(t, 60*time.Second, "the dispatcher's dedup metrics", atLeast(addrs["dispatcher"], map[string]float64{
		`webhooks_redis_up`:                             1,
		`webhooks_dispatcher_events_deduplicated_total`: 1,
	}))
	wait(t, 60*time.Second, "the retrier's recovery metrics", atLeast(addrs["retrier"], map[string]float64{
		`webhooks_redis_up`:                     1,
		`webhooks_retrier_released_early_total`: 0,
	}))

	srv.Kill()
	e.publish(topics.Event{ID: "down_after", Type: "down.x", Data: json.RawMessage(`{}`)})
	wait(t, 60*time.Second, "the deliverer to report Redis down and failing open", func() bool {
		got, _ := scrape(t, addrs["deliverer"])
		return got[`webhooks_redis_up`] == 0 && got[`webhooks_redis_outages_total`] >= 1 && got[`webhooks_redis_fail_open_total`] >= 1
	})
}
