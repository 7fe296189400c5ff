package recorder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// The shared test helpers (package testkit), by their names here.
var (
	waitFor    = testkit.WaitFor
	testLogger = testkit.Logger
)

const partitions = 3

// harness is one kfake cluster with the pipeline topics, a producer, and a
// fresh ClickHouse database on the test server.
type harness struct {
	t     testing.TB
	kfake *kfake.Cluster
	cl    *kgo.Client
	adm   *kadm.Client
	names topics.Names
	env   map[string]string
	ch    driver.Conn
	db    string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	ch, addr, db := chtest.Database(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	h := &harness{t: t, kfake: c, ch: ch, db: db, env: map[string]string{
		kafka.EnvBrokers:                   c.ListenAddrs()[0],
		kafka.EnvSessionTimeout:            "2s",
		schema.EnvClickHouseAddr:           addr,
		schema.EnvClickHouseDatabase:       db,
		"WEBHOOKS_RECORDER_BATCH_WAIT":     "100ms",
		"WEBHOOKS_RECORDER_RETRY_MAX":      "500ms",
		"WEBHOOKS_RECORDER_INSERT_TIMEOUT": "5s",
	}}
	k, err := kafka.Load(h.getenv)
	if err != nil {
		t.Fatalf("LoadKafka: %v", err)
	}
	h.names = k.Names
	h.cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(topics.Partitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cl.Close)
	ctx := chtest.Ctx(t, 15*time.Second)
	if _, err := kafka.Ensure(ctx, kadm.NewClient(h.cl), h.names, kafka.Layout{Partitions: partitions, ReplicationFactor: -1}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	h.adm = kadm.NewClient(adm)
	return h
}

func (h *harness) getenv(k string) string { return h.env[k] }

func (h *harness) config() Config {
	h.t.Helper()
	cfg, err := LoadConfig(h.getenv)
	if err != nil {
		h.t.Fatalf("LoadConfig: %v", err)
	}
	return cfg
}

// start runs a recorder with cfg until stopped (or the test ends).
func (h *harness) start(cfg Config) *testkit.Running {
	log := testLogger(h.t)
	return testkit.Go(h.t, func(ctx context.Context) error { return Run(ctx, cfg, log) })
}

var attemptSeq atomic.Int64

// attempts builds n attempt records spread over subscriptions and tenants,
// with every outcome, retries (attempt > 1), and absent optional fields.
func attempts(n int, prefix string) []topics.Attempt {
	outcomes := []string{topics.OutcomeSuccess, topics.OutcomeRetry, topics.OutcomeDead, topics.OutcomeBlocked,
		topics.OutcomeThrottled, topics.OutcomeSkipped}
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	out := make([]topics.Attempt, n)
	for i := range out {
		seq := attemptSeq.Add(1)
		a := topics.Attempt{
			AttemptID:      fmt.Sprintf("%s-%d-%s", prefix, seq, topics.NewAttemptID()[:8]),
			EventID:        fmt.Sprintf("evt_%s_%d", prefix, i/3),
			EventType:      []string{"order.created", "invoice.paid"}[i%2],
			SubscriptionID: "sub_" + strconv.Itoa(i%5),
			Attempt:        1 + i%4,
			Outcome:        outcomes[i%len(outcomes)],
			DurationMS:     float64(i%97) + 0.25,
			TS:             base.Add(time.Duration(i) * 1500 * time.Millisecond),
		}
		if i%5 != 4 {
			a.Tenant = "tenant_" + strconv.Itoa(i%5%2)
		}
		switch a.Outcome {
		case topics.OutcomeSuccess:
			a.HTTPStatus = 200 + i%5
			if i%3 == 0 {
				a.BatchID = topics.BatchID([]string{a.EventID, "evt_other"})
			}
		case topics.OutcomeRetry:
			a.HTTPStatus, a.FailureCategory, a.Error = 503, topics.FailureServerError, "endpoint answered 503"
			a.ResponseSample = `{"error":"down for maintenance","retry":"é"}`
			a.NextAttemptAt = a.TS.Add(5 * time.Second)
		case topics.OutcomeDead:
			a.HTTPStatus, a.FailureCategory, a.Error = 404, topics.FailurePermanent4xx, "endpoint answered 404"
		case topics.OutcomeBlocked:
			a.FailureCategory, a.DurationMS = topics.FailureKeyHeld, 0
		default:
			a.DurationMS = 0
		}
		if i%7 != 0 {
			a.PublishedAt = a.TS.Add(-2 * time.Second)
		}
		out[i] = a
	}
	return out
}

// produce writes attempts to the attempts topic, keyed by subscription.
func (h *harness) produce(as ...topics.Attempt) {
	h.t.Helper()
	recs := make([]*kgo.Record, len(as))
	for i := range as {
		recs[i] = &kgo.Record{Topic: h.names.Attempts(), Key: []byte(as[i].SubscriptionID), Value: as[i].Encode()}
	}
	h.produceRaw(recs...)
}

func (h *harness) produceRaw(recs ...*kgo.Record) {
	h.t.Helper()
	if err := h.cl.ProduceSync(chtest.Ctx(h.t, 30*time.Second), recs...).FirstErr(); err != nil {
		h.t.Fatalf("produce: %v", err)
	}
}

// count runs SELECT count() on the attempts table, FINAL or not.
func (h *harness) count(final bool) uint64 {
	q := "SELECT count() FROM " + h.db + ".attempts"
	if final {
		q += " FINAL"
	}
	return chtest.Count(h.t, h.ch, q)
}

// waitRows waits until the attempts table holds n distinct attempts.
func (h *harness) waitRows(timeout time.Duration, n int) {
	h.t.Helper()
	waitFor(h.t, timeout, fmt.Sprintf("%d attempts in ClickHouse", n), func() bool {
		var got uint64
		// Fails until the recorder created the table.
		err := h.ch.QueryRow(chtest.Ctx(h.t, 10*time.Second), "SELECT count() FROM "+h.db+".attempts FINAL").Scan(&got)
		return err == nil && got >= uint64(n)
	})
	if got := h.count(true); got != uint64(n) {
		h.t.Fatalf("%d attempts in ClickHouse, want %d", got, n)
	}
}

// committedAll reports whether the group committed every partition of the
// attempts topic up to its end.
func (h *harness) committedAll(group string) bool {
	ctx := chtest.Ctx(h.t, 10*time.Second)
	ends, err := h.adm.ListEndOffsets(ctx, h.names.Attempts())
	if err != nil || ends.Error() != nil {
		return false
	}
	committed, err := h.adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		c, found := committed.Lookup(o.Topic, o.Partition)
		if o.Offset > 0 && (!found || c.At < o.Offset) {
			ok = false
		}
	})
	return ok
}

// committed returns the group's committed offsets on the attempts topic.
func (h *harness) committed(group string) map[int32]int64 {
	h.t.Helper()
	os, err := h.adm.FetchOffsets(chtest.Ctx(h.t, 10*time.Second), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		h.t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == h.names.Attempts() {
			out[o.Partition] = o.At
		}
	})
	return out
}

// proxy is a TCP proxy to ClickHouse that a test can cut: while cut, it
// closes every connection it has and every new one at once. It can also
// stall: bytes stop flowing (connections stay open) until it resumes.
type proxy struct {
	ln     net.Listener
	target string
	gate   sync.RWMutex // write-locked while stalled

	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]bool
	refused atomic.Int64 // connections closed at once while cut
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
		p.setCut(true)
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		p.refused.Add(1)
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		p.refused.Add(1)
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.gate.RLock()
				_, werr := dst.Write(buf[:n])
				p.gate.RUnlock()
				if werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// setCut cuts (true) or restores (false) the connection to ClickHouse.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// stall stops the bytes flowing until the returned function is called.
func (p *proxy) stall() (resume func()) {
	p.gate.Lock()
	var once sync.Once
	return func() { once.Do(p.gate.Unlock) }
}
