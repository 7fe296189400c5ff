package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// withRedis sets cfg's Redis to rc (a server or a Cluster,
// redistest.Topologies).
func withRedis(cfg Config, rc redisstate.Config) Config {
	rc.Timeout, rc.RetryInterval = time.Second, time.Second
	cfg.Redis = rc
	return cfg
}

func idemEvent(t *testing.T, id, tenant, key string) []byte {
	return event(t, topics.Event{ID: id, Type: "order.created", Tenant: tenant, IdempotencyKey: key}, `{"n":1}`)
}

// countDeliveries counts the committed deliveries per event id.
func (h *harness) countDeliveries() map[string]int {
	out := map[string]int{}
	for _, d := range h.deliveries() {
		out[d.EventID]++
	}
	return out
}

// TestDedupOneDeliveryPerIdempotencyKey: three events with one idempotency
// key give one delivery, in one batch and across batches; the same key in
// another tenant, and events without a key, are not affected. The servers
// start without the claim script, as a Cluster's nodes do that never ran
// it: each must get it (the keys of a batch are on several nodes).
func TestDedupOneDeliveryPerIdempotencyKey(t *testing.T) {
	redistest.Topologies(t, testDedupOneDeliveryPerIdempotencyKey)
}

func testDedupOneDeliveryPerIdempotencyKey(t *testing.T, rc redisstate.Config) {
	g, err := redisstate.Open(rc, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// On a Cluster, SCRIPT FLUSH goes to every master.
	if err := g.Do(context.Background(), func(ctx context.Context, rdb redis.UniversalClient) error {
		return rdb.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 3)
	h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
	h.start(withRedis(h.config("dedup"), rc))

	first := h.publish(
		idemEvent(t, "e1", "acme", "pay-1"),
		idemEvent(t, "e2", "acme", "pay-1"),
		idemEvent(t, "o1", "other", "pay-1"),
		idemEvent(t, "n1", "acme", ""),
		idemEvent(t, "n2", "acme", ""),
	)
	h.waitDispatched(first)
	// Later: a third event with the key, and the first event published
	// again (a producer retry: same id, another record).
	h.waitDispatched(h.publish(idemEvent(t, "e3", "acme", "pay-1"), idemEvent(t, "e1", "acme", "pay-1")))

	got := h.countDeliveries()
	want := map[string]int{"e1": 1, "o1": 1, "n1": 1, "n2": 1}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("%s: %d deliveries, want %d", id, got[id], n)
		}
	}
	for _, id := range []string{"e2", "e3"} {
		if got[id] != 0 {
			t.Errorf("duplicate %s: %d deliveries, want none", id, got[id])
		}
	}
}

// TestDedupRedoAfterAbort: the transaction of a batch aborts after its
// idempotency keys were claimed; when the batch is dispatched again, the
// event that claimed a key is still delivered (once), and its duplicate
// is still dropped.
func TestDedupRedoAfterAbort(t *testing.T) { redistest.Topologies(t, testDedupRedoAfterAbort) }

func testDedupRedoAfterAbort(t *testing.T, rc redisstate.Config) {
	h := newFaultHarness(t, 1)
	h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
	fault := h.cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: h.names().Deliveries(),
		Err:   kerr.CorruptMessage, // not retriable: the transaction aborts
		Count: 1,
	})
	h.start(withRedis(h.config("dedup-abort"), rc))
	recs := h.publish(idemEvent(t, "first", "acme", "k"), idemEvent(t, "second", "acme", "k"))
	h.waitDispatched(recs)
	if fault.Hits() == 0 {
		t.Fatal("no produce failed: the test tests nothing")
	}
	got := h.countDeliveries()
	if got["first"] != 1 || got["second"] != 0 {
		t.Fatalf("deliveries after an aborted first try: %v, want first once and second never", got)
	}
}

// TestDedupAtomicAcrossReplicas: replicas claiming one key for different
// records at the same time: exactly one wins.
func TestDedupAtomicAcrossReplicas(t *testing.T) {
	redistest.Topologies(t, testDedupAtomicAcrossReplicas)
}

func testDedupAtomicAcrossReplicas(t *testing.T, rc redisstate.Config) {
	const replicas = 8
	var wg sync.WaitGroup
	wins := make(chan string, replicas)
	for i := range replicas {
		rc.Timeout, rc.RetryInterval = time.Second, time.Second
		g, err := redisstate.Open(rc, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		d := &dedup{g: g, window: time.Minute, log: zap.NewNop()}
		r := &kgo.Record{Topic: "events", Partition: int32(i), Offset: 7,
			Value: idemEvent(t, fmt.Sprintf("e%d", i), "acme", "same")}
		fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "events", Partitions: []kgo.FetchPartition{{Partition: int32(i), Records: []*kgo.Record{r}}}}}}}
		wg.Go(func() {
			if !d.duplicates(context.Background(), polledBatch(fs))[r] {
				wins <- string(r.Value)
			}
		})
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d replicas fanned the event out, want 1", n)
	}
}

// TestDedupWindowExpires: once the window passed, the key is free again.
func TestDedupWindowExpires(t *testing.T) { redistest.Topologies(t, testDedupWindowExpires) }

func testDedupWindowExpires(t *testing.T, rc redisstate.Config) {
	rc.Timeout, rc.RetryInterval = time.Second, time.Second
	g, err := redisstate.Open(rc, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	d := &dedup{g: g, window: 50 * time.Millisecond, log: zap.NewNop()}
	batch := func(offset int64, id string) (kgo.Fetches, *kgo.Record) {
		r := &kgo.Record{Offset: offset, Value: idemEvent(t, id, "", "k")}
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Partitions: []kgo.FetchPartition{{Records: []*kgo.Record{r}}}}}}}, r
	}
	fs, _ := batch(1, "a")
	if len(d.duplicates(context.Background(), polledBatch(fs))) != 0 {
		t.Fatal("first use of the key is a duplicate")
	}
	fs, r := batch(2, "b")
	if !d.duplicates(context.Background(), polledBatch(fs))[r] {
		t.Fatal("second use within the window is not a duplicate")
	}
	wait(t, 30*time.Second, func() bool {
		fs, r := batch(3, "c")
		return !d.duplicates(context.Background(), polledBatch(fs))[r]
	})
}

// TestDedupFailsOpen: with Redis killed, events with one key are all
// fanned out (no dedup, nothing lost); when it is back, dedup resumes.
func TestDedupFailsOpen(t *testing.T) {
	srv := redistest.Start(t)
	h := newHarness(t, 1)
	h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
	h.start(withRedis(h.config("dedup-open"), redisstate.Config{URL: srv.URL(), KeyPrefix: "t:"}))
	h.waitDispatched(h.publish(idemEvent(t, "a1", "acme", "k1")))
	srv.Kill()
	h.waitDispatched(h.publish(idemEvent(t, "a2", "acme", "k1"), idemEvent(t, "a3", "acme", "k1")))
	got := h.countDeliveries()
	if got["a1"] != 1 || got["a2"] != 1 || got["a3"] != 1 {
		t.Fatalf("with Redis down: %v, want every event fanned out", got)
	}
	srv.Restart()
	// Dedup resumes: the first event with a new key claims it (once Redis
	// is used again), the next one with it is dropped.
	n := 0
	wait(t, 20*time.Second, func() bool {
		n++
		id := fmt.Sprintf("b%d", n)
		h.waitDispatched(h.publish(idemEvent(t, id+"_1", "acme", id), idemEvent(t, id+"_2", "acme", id)))
		got := h.countDeliveries()
		return got[id+"_1"] == 1 && got[id+"_2"] == 0
	})
}
