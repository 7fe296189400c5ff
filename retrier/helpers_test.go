package retrier

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// The shared test helpers (package testkit), by their names here.
var (
	waitFor    = testkit.WaitFor
	waitEvery  = testkit.WaitEvery
	testCtx    = testkit.Ctx
	testLogger = testkit.Logger
)

type dialFunc = func(ctx context.Context, network, host string) (net.Conn, error)

// harness is one in-process Kafka with the pipeline topics (3 partitions
// each), a client to produce and inspect, and a tail of the redeliveries topic.
type harness struct {
	t       testing.TB
	cluster *kfake.Cluster
	cl      *kgo.Client
	adm     *kadm.Client
	names   topics.Names
	env     map[string]string
	dial    dialFunc // nil: the real network
	// tick is how often waits poll: 5ms, or a virtual second in a bubble.
	tick time.Duration

	mu   sync.Mutex
	seen []received // deliveries, in the order they were fetched
}

// received is a record read from the redeliveries topic and when.
type received struct {
	rec *kgo.Record
	at  time.Time
}

const partitions = 3

// newHarness starts a one-broker cluster; env overrides the retrier's test
// configuration. With vn, everything runs over that virtual network
// (synctest); without, over loopback TCP.
func newHarness(t testing.TB, env map[string]string, vn *kfake.VirtualNetwork) *harness {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second)}
	var dial dialFunc
	if vn != nil {
		// Client telemetry (KIP-714) would push every 30 virtual seconds
		// from every client: real work for no virtual time; turn it off.
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(int16(kmsg.GetTelemetrySubscriptions), -1)
		versions.SetMaxKeyVersion(int16(kmsg.PushTelemetry), -1)
		opts = append(opts, kfake.Ports(9092), kfake.ListenFn(vn.Listen), kfake.MaxVersions(versions))
		dial = vn.DialContext
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	h := &harness{t: t, cluster: c, dial: dial, tick: 5 * time.Millisecond, env: map[string]string{
		kafka.EnvBrokers:                   c.ListenAddrs()[0],
		kafka.EnvRetryTiers:                "1s,1m",
		kafka.EnvSessionTimeout:            "2s",
		"WEBHOOKS_RETRIER_COMMIT_INTERVAL": "100ms",
		// A release the broker refuses is abandoned this long after stop.
		"WEBHOOKS_SHUTDOWN_TIMEOUT": "3s",
		redisstate.EnvURL:           "-", // no recovery marks unless a test asks for them
	}}
	if vn != nil {
		h.tick = time.Second
	}
	for k, v := range env {
		h.env[k] = v
	}
	k, err := kafka.Load(h.getenv)
	if err != nil {
		t.Fatalf("LoadKafka: %v", err)
	}
	h.names = k.Names
	h.cl = h.client(kgo.RecordPartitioner(topics.Partitioner()))
	h.adm = kadm.NewClient(h.cl)
	if _, err := kafka.Ensure(testCtx(t, 15*time.Second), h.adm, h.names, kafka.Layout{Partitions: partitions, ReplicationFactor: -1}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	// A fresh admin client: the first one cached the metadata it saw
	// before the topics existed.
	h.adm = kadm.NewClient(h.client())
	return h
}

func (h *harness) getenv(k string) string { return h.env[k] }

// client is a client of the harness cluster, closed at the end of the test.
func (h *harness) client(opts ...kgo.Opt) *kgo.Client {
	h.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(h.cluster.ListenAddrs()...)}, opts...)
	if h.dial != nil {
		opts = append(opts, kgo.Dialer(h.dial))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		h.t.Fatalf("client: %v", err)
	}
	h.t.Cleanup(cl.Close)
	return cl
}

// config is the retrier configuration the harness environment loads to.
func (h *harness) config() Config {
	h.t.Helper()
	cfg, err := LoadConfig(h.getenv)
	if err != nil {
		h.t.Fatalf("LoadConfig: %v", err)
	}
	cfg.dial = h.dial
	return cfg
}

// start runs a retrier with cfg until stopped (or the test ends).
func (h *harness) start(cfg Config) *testkit.Running {
	log := testLogger(h.t)
	return testkit.Go(h.t, func(ctx context.Context) error { return Run(ctx, cfg, log) })
}

// subOn returns a subscription id whose delivery keys ("<id>/x") the
// contract partitioner puts on partition p, skipping the ids in not.
func subOn(tb testing.TB, p int32, not ...string) string {
	tb.Helper()
	part := topics.Partitioner().ForTopic("any")
next:
	for i := range 1000 {
		id := "sub_" + strconv.Itoa(i)
		for _, n := range not {
			if n == id {
				continue next
			}
		}
		if int32(part.Partition(&kgo.Record{Key: []byte(id + "/x")}, partitions)) == p {
			return id
		}
	}
	tb.Fatalf("no subscription id maps to partition %d", p)
	return ""
}

// retryRecord builds a valid retry-tier record for subscription sub, due at
// notBefore; with header, the due time also travels in the not-before header.
func (h *harness) retryRecord(tier time.Duration, sub, event string, notBefore time.Time, header bool) *kgo.Record {
	d := topics.Delivery{
		SubscriptionID: sub, EventID: event, EventType: "order.created", Tenant: "acme",
		Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{"n":"` + event + `"}`), Attempt: 2,
		PublishedAt: time.Now().Add(-time.Minute).UTC(), FirstAttemptAt: time.Now().Add(-time.Second).UTC(),
		NotBefore: notBefore.UTC(),
	}
	if err := d.Validate(); err != nil {
		h.t.Fatalf("test delivery: %v", err)
	}
	r := &kgo.Record{Topic: h.names.Retry(tier), Key: []byte(sub + "/x"), Value: d.Encode()}
	if header {
		r.Headers = []kgo.RecordHeader{topics.NotBeforeHeader(notBefore)}
	}
	return r
}

// produce writes records synchronously; they come back with their
// partitions and offsets.
func (h *harness) produce(rs ...*kgo.Record) []*kgo.Record {
	h.t.Helper()
	if err := h.cl.ProduceSync(testCtx(h.t, 10*time.Second), rs...).FirstErr(); err != nil {
		h.t.Fatalf("produce: %v", err)
	}
	return rs
}

// tail reads the redeliveries topic from the start, read committed, into
// h.seen until the test ends.
func (h *harness) tail() {
	cl := h.client(
		kgo.ConsumeTopics(h.names.Redeliveries()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(max(100*time.Millisecond, h.tick*60)), // long polls in virtual time
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			now := time.Now()
			h.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { h.seen = append(h.seen, received{r, now}) })
			h.mu.Unlock()
		}
	}()
}

// receivedOf returns what the tail read so far with the given value.
func (h *harness) receivedOf(value []byte) []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []received
	for _, r := range h.seen {
		if string(r.rec.Value) == string(value) {
			out = append(out, r)
		}
	}
	return out
}

// all returns a copy of what the tail read so far.
func (h *harness) all() []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]received(nil), h.seen...)
}

// waitReceived waits until a record with the value of r was read.
func (h *harness) waitReceived(timeout time.Duration, r *kgo.Record) received {
	h.t.Helper()
	waitEvery(h.t, h.tick, timeout, fmt.Sprintf("the release of %s", r.Value), func() bool { return len(h.receivedOf(r.Value)) > 0 })
	return h.receivedOf(r.Value)[0]
}

// drain waits until the tail read everything on the redeliveries topic up to
// its current end, so that what it has not read was not released.
func (h *harness) drain() {
	h.t.Helper()
	ends, err := h.adm.ListEndOffsets(testCtx(h.t, 10*time.Second), h.names.Redeliveries())
	if err != nil || ends.Error() != nil {
		h.t.Fatalf("list end offsets: %v, %v", err, ends.Error())
	}
	waitEvery(h.t, h.tick, 10*time.Second, "the tail to read the redeliveries topic to its end", func() bool {
		next := map[int32]int64{}
		for _, r := range h.all() {
			next[r.rec.Partition] = r.rec.Offset + 1
		}
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if next[o.Partition] < o.Offset {
				ok = false
			}
		})
		return ok
	})
}

// committed returns the group's committed offsets on the tier topics, by
// topic and partition; an absent partition has none.
func (h *harness) committed(group string) map[string]map[int32]int64 {
	h.t.Helper()
	os, err := h.adm.FetchOffsets(testCtx(h.t, 10*time.Second), group)
	if err != nil {
		h.t.Fatalf("fetch offsets: %v", err)
	}
	out := map[string]map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			h.t.Fatalf("fetch offsets %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

// tierEnds returns the end offsets of the tier topics.
func (h *harness) tierEnds() map[string]map[int32]int64 {
	h.t.Helper()
	ends, err := h.adm.ListEndOffsets(testCtx(h.t, 10*time.Second), h.names.RetryTopics()...)
	if err != nil || ends.Error() != nil {
		h.t.Fatalf("list end offsets: %v, %v", err, ends.Error())
	}
	out := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out
}

// hasNotBefore reports whether r carries the not-before header.
func hasNotBefore(r *kgo.Record) bool {
	for _, hd := range r.Headers {
		if hd.Key == topics.HeaderNotBefore {
			return true
		}
	}
	return false
}
