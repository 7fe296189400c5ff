// Package e2e drives the assembled pipeline through its public contract:
// records on Kafka topics, webhookctl, kcat, and HTTP requests arriving at
// receivers that verify signatures with the official Standard Webhooks
// library.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/retrier"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// wait is the shared waitFor (package testkit).
var wait = testkit.WaitFor

// binDir holds the component binaries built once for the subprocess tests.
var binDir string

func TestMain(m *testing.M) {
	if port := os.Getenv(envBrokerProcess); port != "" {
		os.Exit(serveBroker(port))
	}
	if port := os.Getenv(envReceiverProcess); port != "" {
		os.Exit(serveReceiver(port))
	}
	dir, err := os.MkdirTemp("", "hookpipe-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var buildOnce sync.Once

// binaries builds the components, webhookctl and the API for tests that run
// them as real processes.
func binaries(t testing.TB) string {
	t.Helper()
	var err error
	var out []byte
	buildOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", binDir+"/",
			"github.com/hookpipe/hookpipe/dispatcher/cmd/dispatcher",
			"github.com/hookpipe/hookpipe/deliverer/cmd/deliverer",
			"github.com/hookpipe/hookpipe/retrier/cmd/retrier",
			"github.com/hookpipe/hookpipe/recorder/cmd/recorder",
			"github.com/hookpipe/hookpipe/pipeline/cmd/webhookctl",
			"github.com/hookpipe/hookpipe/api/cmd/api")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err = cmd.CombinedOutput()
	})
	if err != nil {
		t.Fatalf("building binaries: %v\n%s", err, out)
	}
	for _, b := range []string{"dispatcher", "deliverer", "retrier", "recorder", "webhookctl", "api"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			t.Fatalf("binary %s missing after build", b)
		}
	}
	return binDir
}

// envBrokerProcess, set to a port, makes the test binary a broker process
// (serveBroker) instead of running tests.
const envBrokerProcess = "WEBHOOKS_E2E_BROKER_PORT"

// serveBroker runs kfake on 127.0.0.1:port, as `make run` does in a
// process of its own, until SIGTERM.
func serveBroker(port string) int {
	n, err := strconv.Atoi(port)
	if err != nil {
		fmt.Fprintln(os.Stderr, envBrokerProcess, err)
		return 2
	}
	b, err := stack.StartBroker(n, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "broker listening on %s since %s\n", b.Addr(), time.Now().Format(time.RFC3339Nano))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	b.Close()
	return 0
}

// env is one pipeline: a kfake broker on a 127.0.0.1 port with the topics
// created, and a producer client.
type env struct {
	t       testing.TB
	brokers []string
	names   topics.Names
	cl      *kgo.Client
	vars    map[string]string
	stops   []func() // of the components started, in start order
	// base is the context components run in: a test that traces puts a
	// tracer provider there (tracing.NewContext).
	base context.Context
}

// newEnv is an env on kfake, or, with WEBHOOKS_TEST_KAFKA=apache, on the
// Apache Kafka broker the tests share, in topics and groups of the test's
// own (testkit.Namespace).
func newEnv(t testing.TB) *env {
	t.Helper()
	if brokers, ok := testkit.ApacheKafka(t); ok {
		ns := testkit.Namespace(t)
		vars := map[string]string{kafka.EnvPrefix: ns}
		for _, g := range groupVars {
			vars[g.env] = ns + g.group
		}
		return newEnvOn(t, brokers, func() {}, vars)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return newEnvOn(t, c.ListenAddrs(), c.Close, nil)
}

// groupVars are the components' consumer groups and the variables that
// name them.
var groupVars = []struct{ env, group string }{
	{"WEBHOOKS_DISPATCHER_GROUP", topics.GroupDispatcher},
	{"WEBHOOKS_DELIVERER_GROUP", topics.GroupDeliverer},
	{"WEBHOOKS_RETRIER_GROUP", topics.GroupRetrier},
	{"WEBHOOKS_RECORDER_GROUP", topics.GroupRecorder},
	{"WEBHOOKS_API_GROUP", "webhooks-api"},
	{"WEBHOOKS_ALERTER_GROUP", "webhooks-alerter"},
}

// group is the name of a component's consumer group in this env (one of
// topics.Group...).
func (e *env) group(name string) string {
	for _, g := range groupVars {
		if g.group == name && e.vars[g.env] != "" {
			return e.vars[g.env]
		}
	}
	return name
}

// newEnvBrokerProcess is newEnv with the broker in a process of its own
// (this test binary, serveBroker), as `make run` runs it: its CPU is its
// own, apart from the test's clients and receivers.
func newEnvBrokerProcess(t testing.TB) (*env, *stack.Process) {
	t.Helper()
	p, addr, stop := startSelf(t, "broker", envBrokerProcess)
	wait(t, 30*time.Second, "the broker process to listen", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return newEnvOn(t, []string{addr}, stop, nil), p
}

// startSelf starts this test binary as a process of its own, told by the
// variable envVar which port of 127.0.0.1 (addr) to serve on. stop, also
// run at cleanup, stops it and keeps its log (keepLog); a failed test
// prints the log's end.
func startSelf(t testing.TB, name, envVar string, env ...string) (p *stack.Process, addr string, stop func()) {
	t.Helper()
	port := testkit.FreePort(t)
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := stack.Start(name, os.Args[0], nil, append(append(os.Environ(), envVar+"="+strconv.Itoa(port)), env...), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kept := keptName(name)
	stop = func() {
		_ = p.Stop(30 * time.Second)
		keepLog(t, p, kept)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.LogPath)
			t.Logf("--- %s log ---\n%s", name, tail(b, 4000))
		}
	})
	return p, addr, stop
}

// newEnvOn is an env on the given brokers, with vars on top of the
// defaults; stopBroker stops them when the env closes.
func newEnvOn(t testing.TB, brokers []string, stopBroker func(), vars map[string]string) *env {
	t.Helper()
	e := &env{t: t, brokers: brokers, base: context.Background()}
	e.vars = map[string]string{
		kafka.EnvBrokers:                 e.brokers[0],
		send.EnvAllowCIDRs:               "127.0.0.0/8",
		config.EnvSecretsKey:             testSecretsKey,
		redisstate.EnvURL:                "-", // no endpoint protection unless a test asks for it
		kafka.EnvRetryTiers:              "1s,5m",
		"WEBHOOKS_RETRY_FLOOR":           "1s",
		"WEBHOOKS_KAFKA_SESSION_TIMEOUT": "2s",
	}
	maps.Copy(e.vars, vars)
	k, err := kafka.Load(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	e.names = k.Names
	e.cl, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	closeCl := sync.OnceFunc(e.cl.Close)
	t.Cleanup(closeCl)
	e.stops = append(e.stops, stopBroker, closeCl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kafka.Ensure(ctx, kadm.NewClient(e.cl), e.names, kafka.Layout{Partitions: 4, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) getenv(k string) string { return e.vars[k] }

// environ is the process environment for a component subprocess.
func (e *env) environ() []string {
	out := os.Environ()
	for k, v := range e.vars {
		out = append(out, k+"="+v)
	}
	return out
}

// run starts a component in-process; the returned stop cancels it and
// waits for Run to return, failing the test on an error.
func (e *env) run(name string, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(e.base)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("%s: %v", name, err)
				}
			case <-time.After(60 * time.Second):
				e.t.Errorf("%s did not stop within 60s", name)
			}
		})
	}
	e.t.Cleanup(stop)
	e.stops = append(e.stops, stop)
	return stop
}

// close stops the components, then the producer client and the broker,
// before the test ends (a benchmark comparing runs stops one before the
// next).
func (e *env) close() {
	for _, stop := range slices.Backward(e.stops) {
		stop()
	}
}

// logger logs into the test output; benchmarks log warnings only.
func (e *env) logger() *zap.Logger {
	if _, bench := e.t.(*testing.B); bench {
		return zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel))
	}
	return zaptest.NewLogger(e.t)
}

func (e *env) startDispatcher() (stop func()) {
	cfg, err := dispatcher.LoadConfig(e.getenv)
	if err != nil {
		e.t.Fatal(err)
	}
	log := e.logger().Named("d")
	return e.run("dispatcher", func(ctx context.Context) error { return dispatcher.Run(ctx, cfg, log) })
}

func (e *env) startRetrier() (stop func()) {
	cfg, err := retrier.LoadConfig(e.getenv)
	if err != nil {
		e.t.Fatal(err)
	}
	log := e.logger().Named("r")
	return e.run("retrier", func(ctx context.Context) error { return retrier.Run(ctx, cfg, log) })
}

func (e *env) startDeliverer() (stop func()) {
	cfg, err := deliverer.LoadConfig(e.getenv)
	if err != nil {
		e.t.Fatal(err)
	}
	log := e.logger().Named("w")
	return e.run("deliverer", func(ctx context.Context) error { return deliverer.Run(ctx, cfg, log) })
}

// subscribe writes a subscription (with a fresh secret) and returns it.
func (e *env) subscribe(s topics.Subscription) topics.Subscription {
	e.t.Helper()
	var err error
	if s.Secret == "" {
		if s.Secret, err = topics.NewSecret(); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := s.Validate(); err != nil {
		e.t.Fatal(err)
	}
	e.produce(&kgo.Record{Topic: e.names.Subscriptions(), Key: []byte(s.ID), Value: s.EncodeWith(e.keys())})
	return s
}

func (e *env) produce(recs ...*kgo.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// publish produces events keyed by their ordering key, in order.
func (e *env) publish(evs ...topics.Event) {
	e.t.Helper()
	recs, err := e.eventRecords(evs)
	if err != nil {
		e.t.Fatal(err)
	}
	e.produce(recs...)
}

// eventRecords are the events topic's records of evs, keyed by their
// ordering key.
func (e *env) eventRecords(evs []topics.Event) ([]*kgo.Record, error) {
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		recs[i] = &kgo.Record{Topic: e.names.Events(), Key: keyOf(ev.Key), Value: b}
	}
	return recs, nil
}

func keyOf(k string) []byte {
	if k == "" {
		return nil
	}
	return []byte(k)
}

// drained reports whether the deliverer group has committed past every
// delivery record, fresh or due retry. Transaction markers sit after the last record, so the
// group's offsets trail the end offsets by design; instead this reads, read
// committed, from the group's offsets: no record left means drained.
func (e *env) drained() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	adm := kadm.NewClient(e.cl)
	committed, err := adm.FetchOffsets(ctx, e.group(topics.GroupDeliverer))
	if err != nil || committed.Error() != nil {
		return false
	}
	consumed := append(e.names.DeliveryTopics(), e.names.Redeliveries())
	ends, err := adm.ListEndOffsets(ctx, consumed...)
	if err != nil {
		return false
	}
	from := map[string]map[int32]kgo.Offset{}
	for _, t := range consumed {
		from[t] = map[int32]kgo.Offset{}
	}
	ends.Each(func(o kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok {
			at = c.At
		}
		from[o.Topic][o.Partition] = kgo.NewOffset().At(at)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return false
	}
	defer cl.Close()
	pollCtx, cancelPoll := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelPoll()
	return cl.PollFetches(pollCtx).NumRecords() == 0
}

// consume reads every record of a topic from the start until cond holds
// for the records read so far.
func (e *env) consume(topic string, timeout time.Duration, cond func([]*kgo.Record) bool) []*kgo.Record {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var recs []*kgo.Record
	for !cond(recs) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("reading %s: timed out after %v with %d records", topic, timeout, len(recs))
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// request is one webhook as a receiver saw it.
type request struct {
	Sub    string
	Header http.Header
	Body   []byte
	ID     string
	Type   string
	Data   json.RawMessage
	At     time.Time
	// Timestamp is the body's timestamp: the event's created_at.
	Timestamp time.Time
}

// receiver is an endpoint for many subscriptions (/<sub id>) that verifies
// every request with the official Standard Webhooks library and records it.
type receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	secrets map[string]string
	reqs    []request      // accepted (2xx)
	perSub  map[string]int // accepted per subscription, for polling without copying reqs
	// lean (in benchmarks) keeps of each accepted request only its
	// subscription, id, type and times, in kept instead of reqs, and no
	// list of every request: the bodies and headers of 100,000 requests
	// would cost the receiver's process more garbage collection in each
	// row than in the one before.
	lean      bool
	kept      leanLog
	all       []request // every verified request, whatever was answered
	invalid   []string
	delay     time.Duration // max random delay per request
	inflight  int
	maxFlight int
	status    func(r request, w http.ResponseWriter) int // nil: 204; may set headers
	body      string                                     // of every answer

}

func newReceiver(t testing.TB) *receiver {
	_, bench := t.(*testing.B)
	r := &receiver{secrets: map[string]string{}, perSub: map[string]int{}, lean: bench}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url(sub string) string { return r.srv.URL + "/" + sub }

func (r *receiver) trust(s topics.Subscription) {
	r.mu.Lock()
	r.secrets[s.ID] = s.Secret
	r.mu.Unlock()
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sub := strings.TrimPrefix(req.URL.Path, "/")
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	secret := r.secrets[sub]
	r.inflight++
	r.maxFlight = max(r.maxFlight, r.inflight)
	delay := r.delay
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
	}()
	if delay > 0 {
		time.Sleep(rand.N(delay))
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err == nil {
		err = wh.Verify(body, req.Header)
	}
	if err != nil {
		r.mu.Lock()
		r.invalid = append(r.invalid, fmt.Sprintf("%s: %v", sub, err))
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var msg struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Data      json.RawMessage `json:"data"`
		Timestamp time.Time       `json:"timestamp"`
	}
	_ = json.Unmarshal(body, &msg)
	rq := request{Sub: sub, ID: msg.ID, Type: msg.Type, At: time.Now(), Timestamp: msg.Timestamp}
	if !r.lean {
		rq.Header, rq.Body, rq.Data = req.Header.Clone(), body, msg.Data
	}
	status := http.StatusNoContent
	r.mu.Lock()
	answer, reply := r.status, r.body
	r.mu.Unlock()
	if answer != nil {
		status = answer(rq, w)
	}
	r.mu.Lock()
	if !r.lean {
		r.all = append(r.all, rq)
	}
	if status < 300 {
		if r.lean {
			r.kept.add(rq)
		} else {
			r.reqs = append(r.reqs, rq)
		}
		r.perSub[sub]++
	}
	r.mu.Unlock()
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply)
}

// reply sets the body of every answer from now on.
func (r *receiver) reply(body string) {
	r.mu.Lock()
	r.body = body
	r.mu.Unlock()
}

func (r *receiver) got() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lean {
		return r.kept.all()
	}
	return append([]request(nil), r.reqs...)
}

// leanLog keeps requests without a pointer per request: ids one after
// another in one byte slice, subscriptions and types interned, times as
// numbers. The garbage collector has nothing of it to scan; as a list of
// requests (three strings and two times each), 150,000 of them took the
// receiver's collections up to 160 ms of marking, long enough to stall
// every subscription's requests (the p99 of BenchmarkDeployed).
type leanLog struct {
	index map[string]uint32 // of names
	names []string
	ids   []byte
	recs  []leanRec
}

type leanRec struct {
	sub, typ uint32
	idEnd    int
	at, ts   int64 // Unix nanoseconds; ts 0 for none
}

func (l *leanLog) name(s string) uint32 {
	i, ok := l.index[s]
	if !ok {
		if l.index == nil {
			l.index = map[string]uint32{}
		}
		i = uint32(len(l.names))
		l.index[s] = i
		l.names = append(l.names, s)
	}
	return i
}

func (l *leanLog) add(q request) {
	l.ids = append(l.ids, q.ID...)
	rec := leanRec{sub: l.name(q.Sub), typ: l.name(q.Type), idEnd: len(l.ids), at: q.At.UnixNano()}
	if !q.Timestamp.IsZero() {
		rec.ts = q.Timestamp.UnixNano()
	}
	l.recs = append(l.recs, rec)
}

func (l *leanLog) len() int { return len(l.recs) }

func (l *leanLog) all() []request {
	out := make([]request, len(l.recs))
	from := 0
	for i, rec := range l.recs {
		out[i] = request{Sub: l.names[rec.sub], Type: l.names[rec.typ], ID: string(l.ids[from:rec.idEnd]), At: time.Unix(0, rec.at)}
		if rec.ts != 0 {
			out[i].Timestamp = time.Unix(0, rec.ts)
		}
		from = rec.idEnd
	}
	return out
}

// requests returns every verified request, whatever was answered.
func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.all...)
}

// answer sets how the receiver answers from now on.
func (r *receiver) answer(f func(q request, w http.ResponseWriter) int) {
	r.mu.Lock()
	r.status = f
	r.mu.Unlock()
}

// attempts returns every verified request for one event id.
func (r *receiver) attempts(id string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.all {
		if q.ID == id {
			out = append(out, q)
		}
	}
	return out
}

// accepted counts the accepted requests of the subscriptions whose id
// starts with prefix. Benchmarks poll it: copying every request at each
// poll (got) took a quarter of the benchmark process's CPU from the
// pipeline it measures.
func (r *receiver) accepted(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for sub, c := range r.perSub {
		if strings.HasPrefix(sub, prefix) {
			n += c
		}
	}
	return n
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lean {
		return r.kept.len()
	}
	return len(r.reqs)
}

// pairs counts accepted requests per "sub/event id".
func (r *receiver) pairs() map[string]int {
	out := map[string]int{}
	for _, q := range r.got() {
		out[q.Sub+"/"+q.ID]++
	}
	return out
}

func (r *receiver) checkSignatures(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.invalid) > 0 {
		t.Errorf("%d requests failed signature verification, first: %s", len(r.invalid), r.invalid[0])
	}
}

// produceEvent writes a raw value to the events topic.
func (e *env) produceEvent(value []byte) {
	e.t.Helper()
	e.produce(&kgo.Record{Topic: e.names.Events(), Value: value})
}
