package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// waitFor is the shared one (package testkit).
var waitFor = testkit.WaitFor

func ping(ctx context.Context, rdb redis.UniversalClient) error { return rdb.Ping(ctx).Err() }

// TestGuardFailsOpenAndRecovers: with Redis killed, one call finds it down
// and the next ones fail at once without touching Redis, for the retry
// interval; then one probe per interval; when Redis is back, calls go
// through again. Each change of state is logged once.
func TestGuardFailsOpenAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	core, logs := observer.New(zap.InfoLevel)
	g, err := redisstate.Open(redisstate.Config{URL: srv.URL(), Timeout: 300 * time.Millisecond, RetryInterval: 300 * time.Millisecond}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if err := g.Do(ctx, ping); err != nil || !g.Available() {
		t.Fatalf("ping with Redis up: %v", err)
	}

	srv.Kill()
	var calls atomic.Int64
	counted := func(ctx context.Context, rdb redis.UniversalClient) error { calls.Add(1); return ping(ctx, rdb) }
	if err := g.Do(ctx, counted); !errors.Is(err, redisstate.ErrUnavailable) {
		t.Fatalf("first call with Redis down: %v, want ErrUnavailable", err)
	}
	for range 100 {
		if err := g.Do(ctx, counted); !errors.Is(err, redisstate.ErrUnavailable) {
			t.Fatalf("call while down: %v", err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("Redis was called %d times while down within the retry interval, want once", n)
	}
	if g.Available() || g.OutagesTotal() != 1 || g.FailOpenTotal() != 101 {
		t.Fatalf("available %v, outages %d, fail-open %d; want false, 1, 101", g.Available(), g.OutagesTotal(), g.FailOpenTotal())
	}
	// After the interval, probes (one per interval) find it still down.
	waitFor(t, 5*time.Second, "a probe", func() bool { _ = g.Do(ctx, counted); return calls.Load() >= 2 })

	srv.Restart()
	waitFor(t, 5*time.Second, "redis to be used again", func() bool { return g.Do(ctx, ping) == nil })
	if !g.Available() || g.OutagesTotal() != 1 {
		t.Fatalf("after Redis came back: available %v, outages %d", g.Available(), g.OutagesTotal())
	}
	if n := logs.FilterMessageSnippet("redis unreachable").Len(); n != 1 {
		t.Errorf("%d warnings that redis is down, want 1", n)
	}
	if n := logs.FilterMessageSnippet("redis reachable again").Len(); n != 1 {
		t.Errorf("%d lines that redis is back, want 1", n)
	}
}

// TestGuardUnreachableAtStart: a Redis that never answered costs at most
// one call per retry interval, and replies that are not outages (redis.Nil)
// keep it up.
func TestGuardUnreachableAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	g, err := redisstate.Open(redisstate.Config{URL: srv.URL(), RetryInterval: time.Hour}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	var calls atomic.Int64
	for range 1000 {
		_ = g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error { calls.Add(1); return ping(ctx, rdb) })
	}
	if g.Available() || calls.Load() != 1 {
		t.Fatalf("available %v after %d calls reached Redis; want down after the first", g.Available(), calls.Load())
	}

	url, prefix := redistest.Shared(t)
	up, err := redisstate.Open(redisstate.Config{URL: url, KeyPrefix: prefix}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	err = up.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error { return rdb.Get(ctx, prefix+"absent").Err() })
	if !errors.Is(err, redis.Nil) || !up.Available() {
		t.Fatalf("GET of a missing key: %v, available %v; want redis.Nil and still up", err, up.Available())
	}
}

func TestNilGuard(t *testing.T) {
	g, err := redisstate.Open(redisstate.Config{}, zap.NewNop())
	if err != nil || g != nil {
		t.Fatalf("Open without URL = %v, %v; want nil, nil", g, err)
	}
	if err := g.Do(context.Background(), ping); !errors.Is(err, redisstate.ErrDisabled) {
		t.Fatalf("nil guard Do = %v", err)
	}
	if g.Available() || g.FailOpenTotal() != 0 || g.Close() != nil {
		t.Fatal("nil guard misbehaves")
	}
}

func TestRecoveryMarks(t *testing.T) { redistest.Topologies(t, testRecoveryMarks) }

func testRecoveryMarks(t *testing.T, cfg redisstate.Config) {
	cfg.Timeout, cfg.RetryInterval = time.Second, time.Second
	g, err := redisstate.Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	for sub, at := range map[string]time.Time{"old": now.Add(-2 * time.Hour), "a": now, "b": now.Add(-time.Minute)} {
		if err := g.MarkRecovering(ctx, sub, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.ClearRecovering(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	marks, err := g.Recovering(ctx, now.Add(-time.Hour))
	if err != nil || len(marks) != 1 || !marks["a"].Equal(now) {
		t.Fatalf("Recovering = %v, %v; want only a at %v", marks, err, now)
	}
	// The old mark was dropped from Redis, not just filtered.
	marks, err = g.Recovering(ctx, now.Add(-24*time.Hour))
	if err != nil || len(marks) != 1 {
		t.Fatalf("after the cleanup: %v, %v", marks, err)
	}
}

func TestKeys(t *testing.T) {
	k := redisstate.Keys{Prefix: "p:"}
	for got, want := range map[string]string{
		k.Breaker("s1"):          "p:breaker:{s1}",
		k.BreakerCalls("s1"):     "p:breaker:{s1}:calls",
		k.RateLimit("s1"):        "p:ratelimit:s1",
		k.FailingSince("s1"):     "p:failing:{s1}",
		k.Recovering():           "p:recovering",
		k.Dedup("acme", "pay:1"): "p:dedup:acme:pay:1",
		k.Dedup("", "x"):         "p:dedup::x",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
	long := k.Dedup("acme", strings.Repeat("k", 300))
	if len(long) > 100 || !strings.HasPrefix(long, "p:dedup:acme:sha256:") {
		t.Errorf("long idempotency key: %q", long)
	}
	if k.Dedup("acme", strings.Repeat("k", 300)) == k.Dedup("acme", strings.Repeat("k", 301)) {
		t.Error("two long keys collide")
	}
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want redisstate.Config
		err  string
	}{
		{"defaults", nil, redisstate.Config{URL: redisstate.DefaultURL, KeyPrefix: "webhooks:", Timeout: 100 * time.Millisecond, RetryInterval: 2 * time.Second}, ""},
		{"disabled", map[string]string{redisstate.EnvURL: "-"}, redisstate.Config{KeyPrefix: "webhooks:", Timeout: 100 * time.Millisecond, RetryInterval: 2 * time.Second}, ""},
		{"set", map[string]string{redisstate.EnvURL: "redis://h:1/3", redisstate.EnvKeyPrefix: "x:", redisstate.EnvTimeout: "20ms", redisstate.EnvRetryInterval: "5s"},
			redisstate.Config{URL: "redis://h:1/3", KeyPrefix: "x:", Timeout: 20 * time.Millisecond, RetryInterval: 5 * time.Second}, ""},
		{"bad url", map[string]string{redisstate.EnvURL: "h:1"}, redisstate.Config{}, redisstate.EnvURL},
		{"bad url with a password", map[string]string{redisstate.EnvURL: "redis://:s3cretpw@host:po rt/0"}, redisstate.Config{}, redisstate.EnvURL},
		{"bad timeout", map[string]string{redisstate.EnvTimeout: "soon"}, redisstate.Config{}, redisstate.EnvTimeout},
		{"zero timeout", map[string]string{redisstate.EnvTimeout: "0s"}, redisstate.Config{}, redisstate.EnvTimeout},
		{"retry below timeout", map[string]string{redisstate.EnvTimeout: "1s", redisstate.EnvRetryInterval: "10ms"}, redisstate.Config{}, redisstate.EnvRetryInterval},
		{"cluster", map[string]string{redisstate.EnvURL: "rediss://:pw@", redisstate.EnvClusterAddrs: "a:1, b:2"},
			redisstate.Config{URL: "rediss://:pw@", ClusterAddrs: "a:1, b:2", KeyPrefix: "webhooks:", Timeout: 100 * time.Millisecond, RetryInterval: 2 * time.Second}, ""},
		{"sentinel", map[string]string{redisstate.EnvSentinelAddrs: "s:26379", redisstate.EnvSentinelMaster: "m"},
			redisstate.Config{URL: redisstate.DefaultURL, SentinelAddrs: "s:26379", SentinelMaster: "m", KeyPrefix: "webhooks:", Timeout: 100 * time.Millisecond, RetryInterval: 2 * time.Second}, ""},
		{"cluster address without port", map[string]string{redisstate.EnvClusterAddrs: "a:1,b"}, redisstate.Config{}, redisstate.EnvClusterAddrs},
		{"cluster of no address", map[string]string{redisstate.EnvClusterAddrs: " , "}, redisstate.Config{}, redisstate.EnvClusterAddrs},
		{"cluster with a database", map[string]string{redisstate.EnvURL: "redis://h/2", redisstate.EnvClusterAddrs: "a:1"}, redisstate.Config{}, redisstate.EnvURL},
		{"cluster with a hash tag in the prefix", map[string]string{redisstate.EnvClusterAddrs: "a:1", redisstate.EnvKeyPrefix: "{x}:"}, redisstate.Config{}, redisstate.EnvKeyPrefix},
		{"cluster and sentinel", map[string]string{redisstate.EnvClusterAddrs: "a:1", redisstate.EnvSentinelAddrs: "s:1", redisstate.EnvSentinelMaster: "m"}, redisstate.Config{}, redisstate.EnvSentinelAddrs},
		{"sentinel without master", map[string]string{redisstate.EnvSentinelAddrs: "s:1"}, redisstate.Config{}, redisstate.EnvSentinelMaster},
		{"master without sentinels", map[string]string{redisstate.EnvSentinelMaster: "m"}, redisstate.Config{}, redisstate.EnvSentinelMaster},
		{"cluster without redis", map[string]string{redisstate.EnvURL: "-", redisstate.EnvClusterAddrs: "a:1"}, redisstate.Config{}, redisstate.EnvClusterAddrs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redisstate.Load(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Load error %v, want one naming %s", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cretpw") {
					t.Fatalf("Load error %q shows the password", err)
				}
				return
			}
			if err != nil || c != tc.want {
				t.Fatalf("Load = %+v, %v; want %+v", c, err, tc.want)
			}
		})
	}
}

// TestClusterKeySlots: the keys a breaker script touches share a slot;
// the breakers of different subscriptions spread over the masters.
func TestClusterKeySlots(t *testing.T) {
	addrs, prefix := redistest.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	defer rdb.Close()
	ctx := context.Background()
	k := redisstate.Keys{Prefix: prefix}
	masters := map[string]bool{}
	for i := range 32 {
		sub := fmt.Sprintf("sub-%d", i)
		slot, err := rdb.ClusterKeySlot(ctx, k.Breaker(sub)).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{k.BreakerCalls(sub), k.FailingSince(sub)} {
			if s, err := rdb.ClusterKeySlot(ctx, key).Result(); err != nil || s != slot {
				t.Fatalf("%s in slot %d (%v), %s in %d", key, s, err, k.Breaker(sub), slot)
			}
		}
		m, err := rdb.MasterForKey(ctx, k.Breaker(sub))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the breakers of 32 subscriptions are on %d master(s), want them spread", len(masters))
	}
}

// TestClusterMasterDown: with one master of a Cluster killed, the calls on
// its keys fail open (ErrUnavailable, within the call's timeout, and at
// once without touching it once it is known down), while the calls on the
// other masters' keys go through.
func TestClusterMasterDown(t *testing.T) {
	c := redistest.StartCluster(t)
	core, logs := observer.New(zap.InfoLevel)
	g, err := redisstate.Open(redisstate.Config{URL: "redis://", ClusterAddrs: c.Addrs(), KeyPrefix: "t:", Timeout: 300 * time.Millisecond,
		RetryInterval: time.Hour}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	k := g.Keys()
	dead, live := c.SubsOnTwoMasters(t, k.Breaker)
	set := func(ctx context.Context, sub string) error {
		return g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
			return rdb.Set(ctx, k.Breaker(sub), "x", 0).Err()
		})
	}
	ctx := context.Background()
	for _, sub := range []string{dead.Sub, live.Sub} {
		if err := set(ctx, sub); err != nil {
			t.Fatalf("SET with every master up: %v", err)
		}
	}
	dead.Node.Kill()
	// The caller's deadline is far beyond the call's: a call that hangs
	// past its own fails with the caller's context instead.
	caller, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for range 20 {
		if err := set(caller, dead.Sub); !errors.Is(err, redisstate.ErrUnavailable) || caller.Err() != nil {
			t.Fatalf("SET on the dead master: %v (caller: %v), want ErrUnavailable", err, caller.Err())
		}
		if err := set(caller, live.Sub); err != nil {
			t.Fatalf("SET on a live master: %v", err)
		}
	}
	if !g.Available() || g.OutagesTotal() != 1 || g.FailOpenTotal() != 20 {
		t.Fatalf("available %v, outages %d, fail-open %d; want true, 1, 20", g.Available(), g.OutagesTotal(), g.FailOpenTotal())
	}
	if n := logs.FilterMessageSnippet("redis node unreachable").FilterField(zap.String("node", dead.Node.Addr())).Len(); n != 1 {
		t.Errorf("%d warnings that the node is down, want 1", n)
	}
}

// TestSentinel: a Guard configured with Sentinels finds the master they
// watch and works on it; with the master killed it fails open.
func TestSentinel(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "hooks")
	g, err := redisstate.Open(redisstate.Config{URL: "redis:///0", SentinelAddrs: sentinel.Addr(), SentinelMaster: "hooks", KeyPrefix: "t:",
		Timeout: time.Second, RetryInterval: time.Hour}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if err := g.MarkRecovering(ctx, "s", time.Now()); err != nil {
		t.Fatalf("through the Sentinel: %v", err)
	}
	direct := redis.NewClient(&redis.Options{Addr: master.Addr()})
	defer direct.Close()
	if n, err := direct.ZCard(ctx, g.Keys().Recovering()).Result(); err != nil || n != 1 {
		t.Fatalf("the master holds %d marks (%v), want the one written through the Sentinel", n, err)
	}
	master.Kill()
	if err := g.MarkRecovering(ctx, "s", time.Now()); !errors.Is(err, redisstate.ErrUnavailable) {
		t.Fatalf("master killed: %v, want ErrUnavailable", err)
	}
}

// TestSchemaCounts: counts add up by type and outcome over the last 24
// hours; older hours are not summed.
func TestSchemaCounts(t *testing.T) { redistest.Topologies(t, testSchemaCounts) }

func testSchemaCounts(t *testing.T, cfg redisstate.Config) {
	cfg.Timeout, cfg.RetryInterval = time.Second, time.Second
	g, err := redisstate.Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 12, 30, 0, 0, time.UTC)
	for at, counts := range map[time.Time]map[[2]string]int{
		now:                      {{"order.created", "invalid"}: 2, {"", "unknown"}: 1},
		now.Add(-23 * time.Hour): {{"order.created", "invalid"}: 3},
		now.Add(-25 * time.Hour): {{"order.created", "invalid"}: 100},
	} {
		if err := g.CountSchema(ctx, at, counts); err != nil {
			t.Fatal(err)
		}
	}
	got, err := g.SchemaCounts(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[[2]string{"order.created", "invalid"}] != 5 || got[[2]string{"", "unknown"}] != 1 {
		t.Fatalf("SchemaCounts = %v, want 5 invalid order.created and 1 unknown", got)
	}
}
