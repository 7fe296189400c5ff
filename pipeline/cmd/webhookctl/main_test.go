package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/config"
	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// harness runs webhookctl against an in-process Kafka cluster.
type harness struct {
	t       *testing.T
	brokers string
	env     map[string]string
	names   topics.Names
}

// newHarness starts a cluster; with ensure, it also creates the topics.
func newHarness(t *testing.T, ensure bool) *harness {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := strings.Join(c.ListenAddrs(), ",")
	k, err := kafkaconfig.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, brokers: brokers, names: k.Names,
		env: map[string]string{kafkaconfig.EnvBrokers: brokers, config.EnvSecretsKey: testSecretsKey,
			redisstate.EnvURL: "-"}} // no breaker state unless a test asks for it
	if ensure {
		h.ok("topics", "ensure", "--partitions", "2")
	}
	return h
}

type result struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, func(k string) string { return h.env[k] })
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs a command that must succeed and returns its output.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 || r.stderr != "" {
		h.t.Fatalf("webhookctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// json runs a command that must succeed with "-o json" appended and decodes
// its output into v.
func (h *harness) json(v any, args ...string) {
	h.t.Helper()
	out := h.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		h.t.Fatalf("webhookctl %s: decoding %q: %v", strings.Join(args, " "), out, err)
	}
}

// fails runs a command that must fail with the given exit code and one
// error line, and returns that line.
func (h *harness) fails(code int, args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	checkFailure(h.t, r, code)
	return r.stderr
}

func checkFailure(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "webhookctl: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr %q is not one line starting with \"webhookctl: \"", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q on failure, want nothing", r.stdout)
	}
}

// records reads every record of topic up to its current end.
func (h *harness) records(topic string) []*kgo.Record {
	h.t.Helper()
	return h.readTo(topic, false)
}

// readTo reads the records of topic up to its end offsets, or with
// committed up to its last stable offsets, reading committed records only.
// Control records are read to step over transaction markers, not returned.
func (h *harness) readTo(topic string, committed bool) []*kgo.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(h.brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords()}
	list := (*kadm.Client).ListEndOffsets
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		list = (*kadm.Client).ListCommittedOffsets
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ends, err := list(kadm.NewClient(cl), ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		h.t.Fatal(err)
	}
	next := map[int32]int64{}
	behind := func() bool {
		b := false
		ends.Each(func(o kadm.ListedOffset) { b = b || next[o.Partition] < o.Offset })
		return b
	}
	var recs []*kgo.Record
	for behind() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { h.t.Fatalf("reading %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[topic][r.Partition].Offset {
				next[r.Partition] = r.Offset + 1
				if !r.Attrs.IsControl() {
					recs = append(recs, r)
				}
			}
		})
	}
	return recs
}

// stored returns the last record of subscription id, decoded; nil when it
// is a tombstone. The test fails when there is no record at all.
func (h *harness) stored(id string) *topics.Subscription {
	h.t.Helper()
	var last *kgo.Record
	for _, r := range h.records(h.names.Subscriptions()) {
		if string(r.Key) == id {
			last = r
		}
	}
	if last == nil {
		h.t.Fatalf("no record for subscription %s", id)
	}
	if last.Value == nil {
		return nil
	}
	s, err := topics.DecodeSubscriptionWith(last.Value, testKeyring(h.t))
	if err != nil {
		h.t.Fatalf("stored subscription %s: %v", id, err)
	}
	return &s
}

func TestUsage(t *testing.T) {
	// Nothing here may need a broker: point at one that does not exist.
	h := &harness{t: t, env: map[string]string{kafkaconfig.EnvBrokers: "127.0.0.1:1"}}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout when code is 0
	}{
		{name: "no args", code: 0, out: "Usage:\n  webhookctl"},
		{name: "help", args: []string{"help"}, code: 0, out: "subscriptions rotate-secret ID"},
		{name: "-h", args: []string{"-h"}, code: 0, out: "Usage:\n  webhookctl"},
		{name: "command -h", args: []string{"subscriptions", "create", "-h"}, code: 0, out: "-retry-schedule"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2},
		{name: "missing subcommand", args: []string{"subscriptions"}, code: 2},
		{name: "unknown subcommand", args: []string{"topics", "delete"}, code: 2},
		{name: "unknown flag", args: []string{"topics", "ensure", "--bogus"}, code: 2},
		{name: "unknown global flag", args: []string{"--bogus", "topics", "ensure"}, code: 2},
		{name: "bad output", args: []string{"-o", "yaml", "subscriptions", "list"}, code: 2},
		{name: "bad timeout", args: []string{"--timeout", "0s", "subscriptions", "list"}, code: 2},
		{name: "missing id", args: []string{"subscriptions", "get"}, code: 2},
		{name: "extra argument", args: []string{"subscriptions", "get", "a", "b"}, code: 2},
		{name: "unexpected argument", args: []string{"subscriptions", "list", "a"}, code: 2},
		{name: "bad partitions", args: []string{"topics", "ensure", "--partitions", "0"}, code: 2},
		{name: "update without flags", args: []string{"subscriptions", "update", "sub_1"}, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(tc.args...)
			if tc.code != 0 {
				checkFailure(t, r, tc.code)
				return
			}
			if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, tc.out) {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit 0 and %q in stdout", r.code, r.stderr, r.stdout, tc.out)
			}
		})
	}
}

func TestUnreachableBroker(t *testing.T) {
	// A listener that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	for _, tc := range []struct {
		name, addr string
		args       []string
	}{
		{name: "refused", addr: "127.0.0.1:1", args: []string{"subscriptions", "list"}},
		{name: "silent", addr: silent.Addr().String(), args: []string{"publish", "--type", "a", "--data", "{}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &harness{t: t, env: map[string]string{kafkaconfig.EnvBrokers: tc.addr}}
			done := make(chan result, 1)
			go func() { done <- h.run(append([]string{"--timeout", "1s"}, tc.args...)...) }()
			select {
			case r := <-done:
				checkFailure(t, r, 1)
				if want := "cannot reach Kafka at " + tc.addr + ": "; !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q does not contain %q", r.stderr, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("webhookctl did not give up within 5s with --timeout 1s")
			}
		})
	}
}

func TestMissingTopics(t *testing.T) {
	h := newHarness(t, false)
	for _, args := range [][]string{
		{"subscriptions", "list"},
		{"subscriptions", "get", "sub_1"},
		{"publish", "--type", "a", "--data", "{}"},
	} {
		if line := h.fails(1, args...); !strings.Contains(line, "run webhookctl topics ensure") {
			t.Errorf("%v: %q does not tell to run topics ensure", args, line)
		}
	}
}

func TestGlobalFlagPositions(t *testing.T) {
	h := newHarness(t, true)
	good := h.brokers
	h.env[kafkaconfig.EnvBrokers] = "127.0.0.1:1" // --brokers must override it
	var before, after topics.Subscription
	out := h.ok("-o", "json", "--brokers", good, "subscriptions", "create", "--url", "https://a.example/", "--events", "a")
	if err := json.Unmarshal([]byte(out), &before); err != nil {
		t.Fatalf("-o json before the command: %v in %q", err, out)
	}
	out = h.ok("subscriptions", "create", "--url", "https://b.example/", "--events", "b", "--brokers", good, "-o", "json")
	if err := json.Unmarshal([]byte(out), &after); err != nil {
		t.Fatalf("-o json after the command: %v in %q", err, out)
	}
	// --timeout is the command's wherever it stands; --http-timeout the subscription's.
	h.ok("--timeout", "20s", "subscriptions", "update", before.ID, "--brokers", good, "--http-timeout", "30s", "--timeout", "25s")
	if got := h.stored(before.ID).TimeoutMS; got != 30_000 {
		t.Errorf("timeout_ms %d after update --http-timeout 30s, want 30000", got)
	}
	// Flags may follow the positional argument, and "--" ends the flags.
	h.ok("subscriptions", "get", "--brokers", good, after.ID, "-o", "json")
	h.ok("subscriptions", "get", "--brokers", good, "--", after.ID)
}

// idRE matches the ids webhookctl makes up (topics.NewID).
var idRE = regexp.MustCompile(`^(sub|evt)_[a-z0-9]{20}$`)
