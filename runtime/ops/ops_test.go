package ops

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
)

const topic = "t"

func cluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records to partition p of the topic.
func produce(t *testing.T, cl *kgo.Client, p int32, n int) {
	t.Helper()
	for range n {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor is testkit.WaitFor with this file's deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, what, cond)
}

func TestGroupLag(t *testing.T) {
	brokers := cluster(t)
	cl := client(t, kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	produce(t, cl, 0, 5)
	produce(t, cl, 1, 3)

	lags, err := GroupLag(ctx, adm, "nobody", topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(lags) != 2 || lags[0].Lag != 5 || lags[1].Lag != 3 || lags[0].Committed != -1 {
		t.Fatalf("group without commits: %+v, want every record as lag", lags)
	}

	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	lags, err = GroupLag(ctx, adm, "g", topic)
	if err != nil {
		t.Fatal(err)
	}
	want := []PartitionLag{
		{Topic: topic, Partition: 0, Committed: 4, Start: 0, End: 5, Lag: 1},
		{Topic: topic, Partition: 1, Committed: -1, Start: 0, End: 3, Lag: 3},
	}
	for i := range want {
		if lags[i] != want[i] {
			t.Errorf("partition %d: %+v, want %+v", i, lags[i], want[i])
		}
	}
	if got := TopicTotals(lags)[topic]; got != 4 {
		t.Errorf("topic total %d, want 4", got)
	}

	if _, err := GroupLag(ctx, adm, "g", "missing"); err == nil || !strings.Contains(err.Error(), "missing does not exist") {
		t.Errorf("missing topic: err %v", err)
	}
}

func TestServerDisabled(t *testing.T) {
	srv, err := Start(context.Background(), "", NewRegistry(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != "" {
		t.Errorf("Addr %q, want empty", srv.Addr())
	}
	srv.Watch(client(t, kgo.SeedBrokers(cluster(t)...)), "g", topic)
	srv.Close()
	srv.Close()
}

// TestServer: /healthz answers from the start; /readyz only once the
// client joined its group, and no longer once shutdown began; /metrics
// serves the consumer lag and the kprom client metrics; Close stops it.
func TestServer(t *testing.T) {
	brokers := cluster(t)
	prod := client(t, kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, prod, 0, 7)

	reg := NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := Start(ctx, "127.0.0.1:0", reg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.lagEvery = 50 * time.Millisecond
	base := "http://" + srv.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/readyz before Watch: %d %q, want 503 starting", code, body)
	}

	cl := client(t, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), KafkaMetrics(reg))
	srv.Watch(cl, "g", topic)
	// Polling joins the group (the client may join on its own already;
	// TestGroupReadyNotMember covers the check before joining).
	pollCtx, stopPoll := context.WithCancel(context.Background())
	defer stopPoll()
	go func() {
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx)
		}
	}()
	waitFor(t, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
	waitFor(t, "the lag gauge", func() bool {
		_, body := get(t, base+"/metrics")
		return strings.Contains(body, `webhooks_consumer_lag{group="g",topic="t"} 7`)
	})
	_, body := get(t, base+"/metrics")
	for _, want := range []string{"webhooks_kafka_connects_total", "go_goroutines", "process_"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	cancel() // the component begins shutting down
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz after shutdown began: %d %q, want 503 shutting down", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during shutdown: %d, want 200 until Close", code)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics during shutdown: %d, want 200 until Close", code)
	}
	srv.Close()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("/healthz still answers after Close")
	}
}

// TestGroupReadyNotMember: a group client that cannot reach a broker has
// not joined its group, and the check says so.
func TestGroupReadyNotMember(t *testing.T) {
	addr := testkit.FreeAddr(t) // nothing listens there
	cl := client(t, kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := GroupReady(cl, "g")(ctx)
	if err == nil || !strings.Contains(err.Error(), "not a member of consumer group g") {
		t.Errorf("err %v, want not a member of consumer group g", err)
	}
}

func TestStartBadAddr(t *testing.T) {
	if _, err := Start(context.Background(), "256.0.0.1:1", NewRegistry(), zaptest.NewLogger(t)); err == nil ||
		!strings.Contains(err.Error(), "WEBHOOKS_HTTP_ADDR") {
		t.Errorf("err %v, want one naming WEBHOOKS_HTTP_ADDR", err)
	}
}

// TestPprofOptIn: /debug/pprof/ is served only with WithPprof(true).
func TestPprofOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv, err := Start(context.Background(), "127.0.0.1:0", NewRegistry(), zaptest.NewLogger(t), WithPprof(on))
		if err != nil {
			t.Fatal(err)
		}
		code, body := get(t, "http://"+srv.Addr()+"/debug/pprof/cmdline")
		srv.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; code != want {
			t.Errorf("pprof %v: /debug/pprof/cmdline answered %d %q, want %d", on, code, body, want)
		}
	}
}
