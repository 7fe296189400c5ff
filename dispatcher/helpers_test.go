package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/topics"
)

// wait is testkit.WaitFor for a condition the caller does not name.
func wait(tb testing.TB, timeout time.Duration, cond func() bool) {
	tb.Helper()
	testkit.WaitFor(tb, timeout, "the condition", cond)
}

// harness is one broker with the pipeline's topics, a plain producer and
// an admin client: kfake, or the Apache Kafka broker the tests share
// (testkit.ApacheKafka), in topics and a consumer group of the test's own.
type harness struct {
	t       testing.TB
	ctx     context.Context
	cluster *kfake.Cluster // nil on Apache Kafka
	kafka   kafka.Config
	group   string
	cl      *kgo.Client
	adm     *kadm.Client
}

// newHarness is a harness on the broker the tests run on.
func newHarness(t testing.TB, partitions int32) *harness {
	t.Helper()
	if brokers, ok := testkit.ApacheKafka(t); ok {
		ns := testkit.Namespace(t)
		return newHarnessOn(t, partitions, brokers, ns, nil)
	}
	return newFaultHarness(t, partitions)
}

// newFaultHarness is a harness on kfake, whatever the tests run on: for
// the tests that inject faults (kfake's Fault and ControlKey).
func newFaultHarness(t testing.TB, partitions int32, opts ...kfake.Opt) *harness {
	t.Helper()
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return newHarnessOn(t, partitions, cluster.ListenAddrs(), "", cluster)
}

func newHarnessOn(t testing.TB, partitions int32, brokers []string, ns string, cluster *kfake.Cluster) *harness {
	t.Helper()
	k, err := kafka.Load(func(name string) string {
		if name == kafka.EnvPrefix {
			return ns
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	k.Brokers = brokers
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, cluster: cluster, kafka: k, group: ns + topics.GroupDispatcher, cl: cl, adm: kadm.NewClient(cl)}
	if _, err := kafka.Ensure(h.ctx, h.adm, k.Names, kafka.Layout{Partitions: partitions, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) names() topics.Names { return h.kafka.Names }

func (h *harness) config(txnID string) Config {
	return Config{
		Kafka:           h.kafka,
		Group:           h.group,
		Secrets:         testKeys(h.t),
		TransactionalID: txnID,
		ShutdownTimeout: time.Second,
	}
}

// start runs a dispatcher until the test ends or it is stopped.
func (h *harness) start(cfg Config) *testkit.Running {
	h.t.Helper()
	log := zaptest.NewLogger(h.t, zaptest.Level(zap.InfoLevel))
	return testkit.Go(h.t, func(ctx context.Context) error { return Run(ctx, cfg, log) })
}

// sub writes a subscription (with a fresh secret) to the subscriptions topic.
func (h *harness) sub(s topics.Subscription) {
	h.t.Helper()
	secret, err := topics.NewSecret()
	if err != nil {
		h.t.Fatal(err)
	}
	s.Secret = secret
	if s.URL == "" {
		s.URL = "https://example.com/hooks/" + s.ID
	}
	if err := s.Validate(); err != nil {
		h.t.Fatal(err)
	}
	h.produce(&kgo.Record{Topic: h.names().Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(testKeys(h.t))})
}

// deleteSub writes a subscription's tombstone.
func (h *harness) deleteSub(id string) {
	h.t.Helper()
	h.produce(&kgo.Record{Topic: h.names().Subscriptions(), Key: []byte(id)})
}

// publish writes event values (keyed by the event key, as producers do)
// and returns the produced records, with partition, offset and timestamp.
func (h *harness) publish(values ...[]byte) []*kgo.Record {
	h.t.Helper()
	rs := make([]*kgo.Record, len(values))
	for i, v := range values {
		var key []byte
		var e struct{ Key string }
		if json.Unmarshal(v, &e) == nil && e.Key != "" {
			key = []byte(e.Key)
		}
		rs[i] = &kgo.Record{Topic: h.names().Events(), Key: key, Value: v}
	}
	h.produce(rs...)
	return rs
}

func (h *harness) produce(rs ...*kgo.Record) {
	h.t.Helper()
	if err := h.cl.ProduceSync(h.ctx, rs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// waitDispatched waits until the dispatcher group has committed offsets
// past every given event record.
func (h *harness) waitDispatched(events []*kgo.Record) {
	h.t.Helper()
	h.waitDispatchedWithin(events, 20*time.Second)
}

// waitDispatchedWithin is waitDispatched with its own timeout.
func (h *harness) waitDispatchedWithin(events []*kgo.Record, timeout time.Duration) {
	h.t.Helper()
	wait(h.t, timeout, func() bool {
		offs, err := h.adm.FetchOffsets(h.ctx, h.group)
		if err != nil {
			return false
		}
		for _, r := range events {
			o, ok := offs.Lookup(r.Topic, r.Partition)
			if !ok || o.At <= r.Offset {
				return false
			}
		}
		return true
	})
}

// readAll reads a topic from the start to its end. Read committed, it first
// waits until no transaction is open on the topic, and returns exactly the
// committed records. Control records are read (and dropped) so the end is
// recognised even when the log ends with a transaction marker.
func (h *harness) readAll(topic string, committed bool) []*kgo.Record {
	h.t.Helper()
	var ends kadm.ListedOffsets
	wait(h.t, 20*time.Second, func() bool {
		hw, err := h.adm.ListEndOffsets(h.ctx, topic)
		if err != nil || hw.Error() != nil {
			return false
		}
		ends = hw
		if !committed {
			return true
		}
		stable, err := h.adm.ListCommittedOffsets(h.ctx, topic)
		if err != nil || stable.Error() != nil {
			return false
		}
		same := true
		hw.Each(func(o kadm.ListedOffset) {
			s, _ := stable.Lookup(topic, o.Partition)
			same = same && s.Offset == o.Offset
		})
		return same
	})
	start := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		start[o.Partition] = kgo.NewOffset().AtStart()
		next[o.Partition] = 0
	})
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kafka.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords())
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	done := func() bool {
		d := true
		ends.Each(func(o kadm.ListedOffset) { d = d && next[o.Partition] >= o.Offset })
		return d
	}
	ctx, cancel := context.WithTimeout(h.ctx, 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("reading %s: %v (at %v, end %v)", topic, ctx.Err(), next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// deliveries reads every committed delivery of normal priority.
func (h *harness) deliveries() []delivered {
	h.t.Helper()
	return h.deliveriesIn(h.names().Deliveries())
}

// deliveriesIn reads every committed delivery of one deliveries topic.
func (h *harness) deliveriesIn(topic string) []delivered {
	h.t.Helper()
	var out []delivered
	for _, r := range h.readAll(topic, true) {
		d, err := topics.DecodeDelivery(r.Value)
		if err != nil {
			h.t.Fatalf("delivery at %d/%d: %v", r.Partition, r.Offset, err)
		}
		out = append(out, delivered{Delivery: d, key: string(r.Key), partition: r.Partition})
	}
	return out
}

type delivered struct {
	topics.Delivery
	key       string
	partition int32
}

// event renders an event value with data spliced in byte for byte
// (json.Marshal would compact it).
func event(t testing.TB, e topics.Event, data string) []byte {
	t.Helper()
	b, err := json.Marshal(e) // Data is nil and last: ends with "data":null}
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.TrimSuffix(b, []byte("null}")), data...)
	return append(out, '}')
}

// pairKey names a (subscription, event) pair.
func pairKey(sub, ev string) string { return fmt.Sprintf("%s/%s", sub, ev) }

// testSecretsKey is the WEBHOOKS_SECRETS_KEY of the tests (bytes 0..31).
const testSecretsKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// testKeys seals the subscriptions the tests write, as webhookctl does.
func testKeys(tb testing.TB) *topics.Keyring {
	tb.Helper()
	k, err := topics.ParseKeyring(testSecretsKey)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// polledBatch judges every record of fs without a catalog, as a batch.
func polledBatch(fs kgo.Fetches) []polled {
	var b []polled
	for r := range fs.RecordsAll() {
		b = append(b, judge(r, nil, 0))
	}
	return b
}
