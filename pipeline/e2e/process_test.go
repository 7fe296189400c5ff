package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/topics"
)

// startProc runs a built component against the env's broker; its log is
// printed if the test fails.
func (e *env) startProc(bin, name string) *stack.Process {
	e.t.Helper()
	return e.startProcWith(bin, name, nil)
}

// startProcWith is startProc with variables added to the environment
// (e.g. a WEBHOOKS_HTTP_ADDR of its own).
func (e *env) startProcWith(bin, name string, vars map[string]string) *stack.Process {
	e.t.Helper()
	dir := e.t.TempDir()
	environ := e.environ()
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	kept := keptName(name)
	if profiles := os.Getenv("WEBHOOKS_BENCH_PROFILES"); profiles != "" {
		// Each process profiles its whole run (docs/testing.md).
		environ = append(environ, "WEBHOOKS_CPU_PROFILE="+filepath.Join(profiles, kept+".prof"))
	}
	p, err := stack.Start(name, bin, nil, environ, dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = p.Stop(30 * time.Second)
		keepLog(e.t, p, kept)
		if e.t.Failed() {
			b, _ := os.ReadFile(p.LogPath)
			e.t.Logf("--- %s log ---\n%s", name, tail(b, 4000))
		}
	})
	return p
}

var (
	keptMu    sync.Mutex
	keptNames = map[string]int{}
)

// keptName is the name a process's profile and log are kept under in
// WEBHOOKS_BENCH_PROFILES: its name, then <name>-2, <name>-3 for the next
// processes of that name in the test binary (a benchmark's columns each
// run a deliverer, all stopped at its end).
func keptName(name string) string {
	keptMu.Lock()
	defer keptMu.Unlock()
	keptNames[name]++
	if n := keptNames[name]; n > 1 {
		return name + "-" + strconv.Itoa(n)
	}
	return name
}

// keepLog copies, with WEBHOOKS_BENCH_PROFILES set, a stopped process's
// log there, as <name>.log (name from keptName).
func keepLog(t testing.TB, p *stack.Process, name string) {
	dir := os.Getenv("WEBHOOKS_BENCH_PROFILES")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(p.LogPath)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".log"), b, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestDelivererKilledMidStream: a deliverer process killed with SIGKILL
// mid-stream loses nothing: another replica takes its partitions over from
// the committed watermarks, every event arrives, and per key the first
// arrivals keep publish order.
func TestDelivererKilledMidStream(t *testing.T) {
	bin := filepath.Join(binaries(t), "deliverer")
	e := newEnv(t)
	r := newReceiver(t)
	r.delay = 4 * time.Millisecond
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"},
		Enabled: true, Ordering: topics.OrderingKey}))
	r.trust(e.subscribe(topics.Subscription{ID: "unordered", URL: r.url("unordered"), EventTypes: []string{"*"}, Enabled: true}))
	e.startDispatcher()
	e.startRetrier() // spilled deliveries come back (TestDispatcherKilledMidTransaction)
	a := e.startProc(bin, "deliverer-a")

	const n, keys = 400, 10
	var evs []topics.Event
	for i := range n {
		evs = append(evs, topics.Event{ID: fmt.Sprintf("e%04d", i), Type: "order.updated",
			Key: fmt.Sprintf("k%d", i%keys), Data: json.RawMessage(`{}`)})
	}
	e.publish(evs...)
	wait(t, 60*time.Second, "the first deliveries", func() bool { return r.count() >= 150 })
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	before := r.count()
	e.startProc(bin, "deliverer-b")

	waitEveryEvent(t, e, r, evs, 120*time.Second)
	if before >= 2*n {
		t.Fatalf("everything (%d) arrived before the kill: the test did not kill mid-stream", before)
	}
	dups := 0
	for _, c := range r.pairs() {
		dups += c - 1
	}
	t.Logf("%d deliveries before the kill, %d duplicates after takeover (at-least-once)", before, dups)

	assertKeyOrder(t, r, keys)
}

// assertKeyOrder checks that the ordered subscription's first arrivals of
// events "e<i>", keyed i modulo keys, keep publish order per key, and that
// every request was signed.
func assertKeyOrder(t *testing.T, r *receiver, keys int) {
	t.Helper()
	var arrived []string
	for _, q := range r.got() {
		if q.Sub == "ordered" {
			arrived = append(arrived, q.ID)
		}
	}
	assertFirstInKeyOrder(t, arrived, keys)
	r.checkSignatures(t)
}

// assertFirstInKeyOrder checks that the first arrivals of events "e<i>"
// keyed "k<i modulo keys>", listed in the order they arrived, are in
// publish order per key.
func assertFirstInKeyOrder(t *testing.T, arrived []string, keys int) {
	t.Helper()
	first := map[int][]string{}
	seen := map[string]bool{}
	for _, id := range arrived {
		if seen[id] {
			continue
		}
		seen[id] = true
		var idx int
		if _, err := fmt.Sscanf(id, "e%d", &idx); err != nil {
			t.Errorf("event id %q: %v", id, err)
		}
		first[idx%keys] = append(first[idx%keys], id)
	}
	for k, ids := range first {
		for i := 1; i < len(ids); i++ {
			if ids[i] < ids[i-1] {
				t.Errorf("key %d: first arrivals out of publish order at %d: %v", k, i, ids)
				break
			}
		}
	}
}

// TestEventFromKcat: an event produced by a non-Go client (kcat, with
// librdkafka) is delivered like any other.
func TestEventFromKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: run `make deps` (Debian package kcat)")
	}
	e := newEnv(t)
	r := newReceiver(t)
	r.trust(e.subscribe(topics.Subscription{ID: "kcat", URL: r.url("kcat"), EventTypes: []string{"order.*"},
		Enabled: true, Ordering: topics.OrderingKey}))
	e.startDispatcher()
	e.startDeliverer()
	ev := `{"id":"evt_kcat","type":"order.created","tenant":"acme","key":"order_42","data":{"from":"kcat"}}`
	cmd := exec.Command(kcat, "-P", "-b", e.brokers[0], "-t", e.names.Events(), "-k", "order_42",
		"-X", "partitioner=murmur2_random")
	cmd.Stdin = strings.NewReader(ev + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	wait(t, 60*time.Second, "the kcat event", func() bool { return r.count() == 1 })
	q := r.got()[0]
	if q.ID != "evt_kcat" || string(q.Data) != `{"from":"kcat"}` {
		t.Errorf("got id %q data %s", q.ID, q.Data)
	}
	r.checkSignatures(t)
}

// TestWebhookctlDrivesThePipeline: a program that knows only the public
// contract subscribes and publishes with the webhookctl binary and receives
// the event, signed with the secret webhookctl printed.
func TestWebhookctlDrivesThePipeline(t *testing.T) {
	ctl := filepath.Join(binaries(t), "webhookctl")
	e := newEnv(t)
	r := newReceiver(t)
	e.startDispatcher()
	e.startDeliverer()
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(ctl, args...)
		cmd.Env = e.environ()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("webhookctl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	run("topics", "ensure")
	out := run("-o", "json", "subscriptions", "create", "--url", r.url("cli"), "--id", "cli",
		"--events", "invoice.*", "--ordering", "key", "--header", "X-From:cli")
	var sub topics.Subscription
	if err := json.Unmarshal(out, &sub); err != nil {
		t.Fatalf("create output is not a subscription: %v\n%s", err, out)
	}
	if sub.ID != "cli" || !strings.HasPrefix(sub.Secret, topics.SecretPrefix) {
		t.Fatalf("create printed id %q secret %q", sub.ID, sub.Secret)
	}
	r.trust(sub)
	run("publish", "--type", "invoice.paid", "--id", "evt_cli", "--key", "inv_1", "--data", `{"amount":42}`)
	wait(t, 60*time.Second, "the event published by webhookctl", func() bool { return r.count() == 1 })
	q := r.got()[0]
	if q.ID != "evt_cli" || q.Header.Get("X-From") != "cli" || string(q.Data) != `{"amount":42}` {
		t.Errorf("got id %q X-From %q data %s", q.ID, q.Header.Get("X-From"), q.Data)
	}
	r.checkSignatures(t)
}

// TestHTTPSEndpoint: a deliverer process posts to an https endpoint whose
// certificate comes from a CA the process trusts as a system root
// (SSL_CERT_FILE), through its HTTP/1.1 pool with TLS (ADR 0032): every
// event arrives, signed.
func TestHTTPSEndpoint(t *testing.T) {
	bin := filepath.Join(binaries(t), "deliverer")
	e := newEnv(t)
	r, ca := newReceiverProcessTLS(t)
	s := e.subscribe(topics.Subscription{ID: "tls", URL: r.url("tls"), EventTypes: []string{"*"}, Enabled: true})
	r.trust(s)
	e.vars["SSL_CERT_FILE"] = ca
	e.startDispatcher()
	e.startProc(bin, "deliverer")
	const n = 50
	var evs []topics.Event
	for i := range n {
		evs = append(evs, topics.Event{ID: fmt.Sprintf("e%03d", i), Type: "order.created", Data: json.RawMessage(`{}`)})
	}
	e.publish(evs...)
	wait(t, 60*time.Second, "every event over https", func() bool { return r.accepted("tls") >= n })
	r.checkSignatures()
}
