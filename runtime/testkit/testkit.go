// Package testkit is what the tests of every module share: waiting on a
// condition with a deadline (never a bare sleep), a context bounded by the
// test, a logger that outlives the test quietly, a buffer safe to write
// from another goroutine, the rule for tests that need a real service, a
// consumer-group member that holds a rebalance, a component's Run going in
// a goroutine, a watchdog on testing/synctest bubbles, and free ports for
// the servers a test starts (FreePorts).
package testkit

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// EnvRequireServices names the variable that, when set (`make test` sets it), turns the skip of a
// test whose service (redis-server, clickhouse-server) is missing into a
// failure: under `make test` and in CI the real thing always runs.
const EnvRequireServices = "WEBHOOKS_TEST_REQUIRE_SERVICES"

// NeedService skips tb for the reason why, or fails it when services are
// required.
func NeedService(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv(EnvRequireServices) != "" {
		tb.Fatalf("%s (%s is set: the services must be there)", why, EnvRequireServices)
	}
	tb.Skip(why)
}

// poll is how often WaitFor and KeepsHolding check their condition.
const poll = 10 * time.Millisecond

// WaitFor polls cond until it holds, failing tb after timeout.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	WaitEvery(tb, poll, timeout, what, cond)
}

// WaitEvery is WaitFor polling every period: in a testing/synctest bubble
// each poll is real work for a moment of virtual time, so long virtual
// waits poll sparingly.
func WaitEvery(tb testing.TB, period, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !holdsWithin(period, timeout, cond) {
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Within polls cond until it holds, for at most timeout, and says whether
// it did: for a test that goes on to explain a timeout rather than stop at
// it.
func Within(timeout time.Duration, cond func() bool) bool { return holdsWithin(poll, timeout, cond) }

func holdsWithin(period, timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// KeepsHolding checks that cond stays true for the whole of d: for
// asserting that something does not happen (a commit that must not move, a
// request that must not start).
func KeepsHolding(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if !cond() {
			tb.Fatalf("%s stopped holding", what)
		}
		select {
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// Done is a condition for WaitFor: ch is closed.
func Done(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// Ctx is a context that ends after d or with the test.
func Ctx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Logger logs at info level to the test, and drops what is written after
// the test ended: client goroutines may log a last line while closing, and
// testing panics on a Log after the test completed.
func Logger(tb testing.TB) *zap.Logger {
	q := &quietAfterEnd{TB: tb}
	tb.Cleanup(func() { q.mu.Lock(); q.done = true; q.mu.Unlock() })
	return zaptest.NewLogger(q, zaptest.Level(zap.InfoLevel))
}

type quietAfterEnd struct {
	testing.TB
	mu   sync.Mutex
	done bool
}

func (q *quietAfterEnd) Logf(format string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.done {
		q.TB.Logf(format, args...)
	}
}

func (q *quietAfterEnd) Errorf(format string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.done {
		q.TB.Errorf(format, args...)
	}
}

// EnvClickHouseAddr names the test ClickHouse server (native protocol);
// `make test` starts one and sets it.
const EnvClickHouseAddr = "WEBHOOKS_TEST_CLICKHOUSE_ADDR"

// ClickHouseAddr returns the test ClickHouse server's address; without one
// the test is skipped (failed when services are required).
func ClickHouseAddr(tb testing.TB) string {
	tb.Helper()
	addr := os.Getenv(EnvClickHouseAddr)
	if addr == "" {
		NeedService(tb, EnvClickHouseAddr+" is not set: run `make test`, which starts a clickhouse-server for the tests")
	}
	return addr
}

// Buffer is a bytes.Buffer that a goroutine under test may write while the
// test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Kafka starts an in-process one-broker Kafka (kfake) and returns it with
// a client and an admin client on it, all closed at the end of the test.
func Kafka(tb testing.TB, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client, *kadm.Client) {
	tb.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return c, cl, kadm.NewClient(cl)
}
