package deliverer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/endpointtest"
	"github.com/hookpipe/hookpipe/topics"
)

// The shared test helpers (package testkit), by their names here.
var (
	waitFor      = testkit.WaitFor
	keepsHolding = testkit.KeepsHolding
	testCtx      = testkit.Ctx
	verify       = endpointtest.Verify
	testLogger   = testkit.Logger
	waitVirtual  = testkit.WaitEvery
)

// harness is one in-process Kafka with the pipeline topics, a client to
// produce and inspect, and a tail of everything the deliverer writes.
type harness struct {
	t       testing.TB
	cluster *kfake.Cluster
	cl      *kgo.Client
	adm     *kadm.Client
	names   topics.Names
	env     map[string]string
	log     *zap.Logger
	runs    int
	// released is the next offset per partition of the redeliveries
	// topic that drain reads.
	released map[int32]int64

	mu   sync.Mutex
	seen map[string][]*kgo.Record // by topic: attempts, dlq, retry tiers
}

// baseEnv is the test configuration: quick commits, short tiers, the
// loopback range allowed through the SSRF guard, kfake's minimum session
// timeout.
func baseEnv(brokers string) map[string]string {
	return map[string]string{
		kafka.EnvBrokers:                     brokers,
		kafka.EnvPrefix:                      "hp.",
		EnvAllowCIDRs:                        "127.0.0.0/8",
		config.EnvSecretsKey:                 testSecretsKey,
		redisstate.EnvURL:                    "-", // no endpoint protection unless a test asks for it
		kafka.EnvRetryTiers:                  "1s,1m",
		"WEBHOOKS_KAFKA_SESSION_TIMEOUT":     "6s",
		"WEBHOOKS_DELIVERER_COMMIT_INTERVAL": "50ms",
		"WEBHOOKS_SHUTDOWN_TIMEOUT":          "10s",
		"WEBHOOKS_CONNECT_TIMEOUT":           "2s",
	}
}

func newHarness(t testing.TB, env map[string]string) *harness {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	h := &harness{t: t, cluster: c, env: baseEnv(strings.Join(c.ListenAddrs(), ",")),
		log: testLogger(t), seen: map[string][]*kgo.Record{}, released: map[int32]int64{}}
	maps.Copy(h.env, env)
	k, err := kafka.Load(h.getenv)
	if err != nil {
		t.Fatal(err)
	}
	h.names = k.Names
	h.cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.RecordPartitioner(topics.Partitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cl.Close)
	h.adm = kadm.NewClient(h.cl)
	if _, err := kafka.Ensure(testCtx(t, 10*time.Second), h.adm, h.names,
		kafka.Layout{Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	h.startTail()
	return h
}

func (h *harness) getenv(k string) string { return h.env[k] }

// startTail consumes everything the deliverer produces except
// subscriptions, from the start, into h.seen.
func (h *harness) startTail() {
	tail, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...),
		kgo.ConsumeTopics(append([]string{h.names.Attempts(), h.names.DLQ()}, h.names.RetryTopics()...)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := tail.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			h.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { h.seen[r.Topic] = append(h.seen[r.Topic], r) })
			h.mu.Unlock()
		}
	}()
	h.t.Cleanup(func() { cancel(); <-done; tail.Close() })
}

// records returns what the tail saw on a topic so far.
func (h *harness) records(topic string) []*kgo.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*kgo.Record(nil), h.seen[topic]...)
}

func (h *harness) attempts() []topics.Attempt {
	var out []topics.Attempt
	for _, r := range h.records(h.names.Attempts()) {
		a, err := topics.DecodeAttempt(r.Value)
		if err != nil {
			h.t.Fatalf("attempt record %s: %v", r.Value, err)
		}
		if string(r.Key) != a.SubscriptionID {
			h.t.Fatalf("attempt record keyed %q, its subscription is %q", r.Key, a.SubscriptionID)
		}
		out = append(out, a)
	}
	return out
}

// attemptsOf returns the attempt records of one event.
func (h *harness) attemptsOf(eventID string) []topics.Attempt {
	var out []topics.Attempt
	for _, a := range h.attempts() {
		if a.EventID == eventID {
			out = append(out, a)
		}
	}
	return out
}

// waitAttempt waits for the first attempt record of an event.
func (h *harness) waitAttempt(eventID string) topics.Attempt {
	h.t.Helper()
	var got []topics.Attempt
	waitFor(h.t, 20*time.Second, "an attempt record of "+eventID, func() bool {
		got = h.attemptsOf(eventID)
		return len(got) > 0
	})
	return got[0]
}

// waitOutcomes waits until n events have an attempt record each.
func (h *harness) waitOutcomes(n int, within time.Duration) {
	h.t.Helper()
	waitFor(h.t, within, "an outcome for every delivery", func() bool {
		seen := map[string]bool{}
		for _, a := range h.attempts() {
			seen[a.EventID] = true
		}
		return len(seen) == n
	})
}

// waitRecord waits for a record on topic whose value contains the event id.
func (h *harness) waitRecord(topic, eventID string) *kgo.Record {
	h.t.Helper()
	var found *kgo.Record
	waitFor(h.t, 20*time.Second, "a record of "+eventID+" on "+topic, func() bool {
		for _, r := range h.records(topic) {
			if strings.Contains(string(r.Value), strconv.Quote(eventID)) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

func (h *harness) produce(recs ...*kgo.Record) {
	h.t.Helper()
	if err := h.cl.ProduceSync(testCtx(h.t, 10*time.Second), recs...).FirstErr(); err != nil {
		h.t.Fatalf("produce: %v", err)
	}
}

// newSub returns a valid subscription posting to url with a fresh secret.
func newSub(tb testing.TB, id, url string) topics.Subscription {
	secret, err := topics.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	return topics.Subscription{ID: id, URL: url, EventTypes: []string{"*"}, Enabled: true, Secret: secret}
}

// putSub publishes a subscription the way webhookctl does.
func (h *harness) putSub(s topics.Subscription) {
	h.t.Helper()
	if err := s.Validate(); err != nil {
		h.t.Fatalf("test subscription: %v", err)
	}
	h.produce(&kgo.Record{Topic: h.names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(testKeys(h.t))})
}

func (h *harness) deleteSub(id string) {
	h.produce(&kgo.Record{Topic: h.names.Subscriptions(), Key: []byte(id)})
}

// newDelivery is the first attempt of an event for a subscription.
func newDelivery(sub, eventID string) topics.Delivery {
	return topics.Delivery{
		SubscriptionID: sub, EventID: eventID, EventType: "order.created",
		Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{"n":1}`), Attempt: 1,
		PublishedAt: time.Now().UTC(),
	}
}

// deliveryRecord keys a delivery as the dispatcher does:
// "<subscription>/<ordering key or event id>".
func (h *harness) deliveryRecord(d topics.Delivery, key string) *kgo.Record {
	if key == "" {
		key = d.EventID
	}
	return &kgo.Record{Topic: h.names.Deliveries(), Key: []byte(d.SubscriptionID + "/" + key), Value: d.Encode()}
}

func (h *harness) deliver(ds ...topics.Delivery) {
	h.t.Helper()
	recs := make([]*kgo.Record, len(ds))
	for i, d := range ds {
		recs[i] = h.deliveryRecord(d, "")
	}
	h.produce(recs...)
}

// committed is the deliverer group's committed offset per partition of the
// deliveries topic (absent when never committed).
func (h *harness) committed() map[int32]int64 {
	h.t.Helper()
	return h.committedIn(h.names.Deliveries())
}

// committedIn is committed for any topic the group consumes.
func (h *harness) committedIn(topic string) map[int32]int64 {
	h.t.Helper()
	resp, err := h.adm.FetchOffsets(testCtx(h.t, 10*time.Second), topics.GroupDeliverer)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		h.t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err != nil {
			h.t.Fatalf("fetch offsets: %v", o.Err)
		}
		if o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

// ends is the end offset of every non-empty partition of a topic.
func (h *harness) ends(topic string) map[int32]int64 {
	h.t.Helper()
	l, err := h.adm.ListEndOffsets(testCtx(h.t, 10*time.Second), topic)
	if err != nil || l.Error() != nil {
		h.t.Fatalf("list end offsets: %v %v", err, l.Error())
	}
	out := map[int32]int64{}
	for p, o := range l[topic] {
		if o.Offset > 0 {
			out[p] = o.Offset
		}
	}
	return out
}

// readAll reads a whole topic with a fresh client.
func (h *harness) readAll(topic string) []*kgo.Record {
	h.t.Helper()
	ends := h.ends(topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	next := map[int32]int64{}
	ctx := testCtx(h.t, 10*time.Second)
	for !reached(next, ends) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("reading %s: got %v of %v", topic, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return out
}

func reached(next, ends map[int32]int64) bool {
	for p, e := range ends {
		if next[p] < e {
			return false
		}
	}
	return true
}

// start runs the deliverer with the harness's environment plus env.
func (h *harness) start(env map[string]string) *testkit.Running {
	h.t.Helper()
	all := maps.Clone(h.env)
	maps.Copy(all, env)
	cfg, err := LoadConfig(func(k string) string { return all[k] })
	if err != nil {
		h.t.Fatalf("LoadConfig: %v", err)
	}
	h.runs++
	log := h.log.Named(fmt.Sprintf("run%d", h.runs))
	return testkit.Go(h.t, func(ctx context.Context) error { return Run(ctx, cfg, log) })
}

// received is one request as the endpoint saw it.
type received struct {
	method string
	header http.Header
	body   []byte
	at     time.Time
}

func (r received) id() string { return r.header.Get("webhook-id") }

// receiver is an endpoint that records every request and answers with
// handle (200 when nil). It tracks how many requests it serves at once.
type receiver struct {
	srv    *httptest.Server
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
	conns  atomic.Int64 // open connections

	mu          sync.Mutex
	reqs        []received
	inflight    int
	maxInflight int
}

func newReceiver(tb testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *receiver {
	rc := &receiver{handle: handle}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, received{method: r.Method, header: r.Header.Clone(), body: body, at: time.Now()})
		rc.inflight++
		rc.maxInflight = max(rc.maxInflight, rc.inflight)
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inflight--
			rc.mu.Unlock()
		}()
		if rc.handle != nil {
			rc.handle(w, r, body)
		}
	}))
	rc.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			rc.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			rc.conns.Add(-1)
		}
	}
	rc.srv.Start()
	tb.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hooks" }

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

func (rc *receiver) concurrency() (now, peak int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.inflight, rc.maxInflight
}

// perID counts requests per webhook-id.
func (rc *receiver) perID() map[string]int {
	out := map[string]int{}
	for _, r := range rc.all() {
		out[r.id()]++
	}
	return out
}

// waitRequest waits for the request of an event.
func (rc *receiver) waitRequest(tb testing.TB, eventID string) received {
	tb.Helper()
	var got received
	waitFor(tb, 20*time.Second, "a request for "+eventID, func() bool {
		for _, r := range rc.all() {
			if r.id() == eventID {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// gate blocks handlers until opened.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate(tb testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	tb.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// wait blocks until the gate opens or the request is abandoned.
func (g *gate) wait(r *http.Request) {
	select {
	case <-g.ch:
	case <-r.Context().Done():
	}
}

// jsonString renders s as JSON without HTML escaping, as the body does.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s_%03d", prefix, i)
	}
	return out
}

// testSecretsKey is the harness's WEBHOOKS_SECRETS_KEY (bytes 0..31):
// subscriptions are written sealed with it, as webhookctl does.
const testSecretsKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

func testKeys(tb testing.TB) *topics.Keyring {
	tb.Helper()
	k, err := topics.ParseKeyring(testSecretsKey)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}
