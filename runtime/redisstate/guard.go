package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// ErrUnavailable is returned instead of calling Redis while it is
// considered down, and wraps the error of a call that found it down. The
// caller fails open: it goes on as if the protection were not configured.
var ErrUnavailable = errors.New("redis unavailable")

// ErrDisabled is returned by every call of a nil Guard (no Redis
// configured).
var ErrDisabled = errors.New("redis not configured")

// Guard is fail-open access to Redis. Every call gets Config.Timeout; a
// call that finds Redis unreachable (a timeout, a refused or broken
// connection, a server that is loading) marks it down, and for
// Config.RetryInterval every call fails at once with ErrUnavailable. Then
// one call probes; its success brings Redis back. A warning is logged
// once when Redis goes down and an info line once when it is back.
//
// On a Redis Cluster each master node is marked down on its own (a hook
// on its client): a dead master fails open the calls on its slots, at once
// after the first, while the other masters keep serving theirs.
//
// A nil *Guard is valid: Redis is not configured and every call returns
// ErrDisabled.
type Guard struct {
	rdb  redis.UniversalClient
	cfg  Config
	keys Keys
	log  *zap.Logger

	// whole is the gate of a single server or Sentinel-watched master; nil
	// on a Cluster, whose node gates are counted in nodes and nodesDown.
	whole     *gate
	nodes     atomic.Int64
	nodesDown atomic.Int64

	failOpen atomic.Uint64
	outages  atomic.Uint64
	commands atomic.Uint64
	byOp     *prometheus.CounterVec
}

// gate is the up or down state of one server: the whole Redis, or one
// Cluster node.
type gate struct {
	addr    string
	down    atomic.Bool
	retryAt atomic.Int64 // unix nanos: when a down server may be probed
	probing atomic.Bool
}

// enter reports whether a call may go to the server: always while it is
// up; while down, once per retry interval, as the probe (then probe is
// true and the caller must store false in probing when done).
func (gt *gate) enter() (ok, probe bool) {
	if !gt.down.Load() {
		return true, false
	}
	if time.Now().UnixNano() < gt.retryAt.Load() || !gt.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// errCallTimeout is the cause of a call's deadline set by Do: a context
// ended by it says the server was too slow, not that the caller gave up.
var errCallTimeout = errors.New("redis call timeout")

// Open returns a Guard for cfg, or nil when cfg has no URL. It does not
// wait for Redis: an unreachable one is found by the first call (and
// logged), and the component runs without protection meanwhile.
func Open(cfg Config, log *zap.Logger) (*Guard, error) {
	if !cfg.Enabled() {
		log.Info("redis not configured: no circuit breaker, rate limit or dedup")
		return nil, nil
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	// Every call is bounded by its context (ContextTimeoutEnabled); the
	// socket timeouts are a backstop. Retries would multiply the time a
	// dead Redis costs: the caller fails open instead.
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = max(cfg.Timeout, 500*time.Millisecond)
	opts.ReadTimeout = max(cfg.Timeout, 500*time.Millisecond)
	opts.WriteTimeout = opts.ReadTimeout
	opts.PoolTimeout = cfg.Timeout
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.PoolSize = max(opts.PoolSize, 64)
	opts.DisableIdentity = true // CLIENT SETINFO: unknown to older servers
	// The library would print every failed dial to stderr; the Guard logs
	// once per change of state instead.
	logging.Disable()
	g := &Guard{cfg: cfg, keys: Keys{Prefix: cfg.KeyPrefix},
		byOp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhooks_redis_calls_total",
			Help: "Redis commands sent (each command of a pipeline counts), by command."}, []string{"op"})}
	switch cfg.Topology() {
	case Cluster:
		addrs := config.SplitList(cfg.ClusterAddrs)
		g.log = log.Named("redis").With(zap.String("topology", Cluster), zap.Strings("seeds", addrs))
		cc := redis.NewClusterClient(clusterOptions(opts, addrs))
		// Every node client (of a seed, or of a node the slot map names)
		// gets a gate of its own as the Cluster client creates it.
		cc.OnNewNode(func(node *redis.Client) {
			g.nodes.Add(1)
			node.AddHook(nodeHook{g: g, gt: &gate{addr: node.Options().Addr}})
		})
		g.rdb = cc
	case Sentinel:
		addrs := config.SplitList(cfg.SentinelAddrs)
		g.log = log.Named("redis").With(zap.String("topology", Sentinel), zap.Strings("sentinels", addrs),
			zap.String("master", cfg.SentinelMaster), zap.Int("db", opts.DB))
		g.rdb = redis.NewFailoverClient(failoverOptions(opts, cfg.SentinelMaster, addrs))
		g.whole = &gate{addr: cfg.SentinelMaster}
	default:
		g.log = log.Named("redis").With(zap.String("addr", opts.Addr), zap.Int("db", opts.DB))
		g.rdb = redis.NewClient(opts)
		g.whole = &gate{addr: opts.Addr}
	}
	g.rdb.AddHook(countHook{g})
	return g, nil
}

// clusterOptions are the options of a Cluster client: opts (from the URL)
// for every node, with the seeds for its address. Redirects (MOVED, ASK
// while slots move) are followed within the call's deadline.
func clusterOptions(opts *redis.Options, seeds []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: seeds, Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLSConfig,
		Protocol: opts.Protocol, ContextTimeoutEnabled: true, DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout, PoolTimeout: opts.PoolTimeout, PoolSize: opts.PoolSize, MaxRetries: -1,
		DialerRetries: opts.DialerRetries, DisableIdentity: true}
}

// failoverOptions are the options of a client of the master the Sentinels
// locate: opts (from the URL) with the master name and Sentinels for its
// address.
func failoverOptions(opts *redis.Options, master string, sentinels []string) *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels, Username: opts.Username, Password: opts.Password,
		DB: opts.DB, TLSConfig: opts.TLSConfig, Protocol: opts.Protocol, ContextTimeoutEnabled: true, DialTimeout: opts.DialTimeout,
		ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout, PoolTimeout: opts.PoolTimeout, PoolSize: opts.PoolSize,
		MaxRetries: -1, DialerRetries: opts.DialerRetries, DisableIdentity: true}
}

// Keys is the key layout under the configured prefix.
func (g *Guard) Keys() Keys {
	if g == nil {
		return Keys{Prefix: DefaultKeyPrefix}
	}
	return g.keys
}

// Client is the underlying client (nil for a nil Guard), for libraries
// that take one (redis_rate); call it only inside Do.
func (g *Guard) Client() redis.UniversalClient {
	if g == nil {
		return nil
	}
	return g.rdb
}

// Close closes the client.
func (g *Guard) Close() error {
	if g == nil {
		return nil
	}
	return g.rdb.Close()
}

// Available reports whether calls currently go to Redis: false while it is
// down (and for a nil Guard). On a Cluster, false only while every node
// known is down: the calls on a live master's slots still go.
func (g *Guard) Available() bool {
	if g == nil {
		return false
	}
	if g.whole != nil {
		return !g.whole.down.Load()
	}
	return g.nodesDown.Load() < g.nodes.Load() || g.nodes.Load() == 0
}

// FailOpenTotal counts the calls that failed open because Redis was down
// or failed: for a metrics counter (webhooks_redis_fail_open_total).
func (g *Guard) FailOpenTotal() uint64 {
	if g == nil {
		return 0
	}
	return g.failOpen.Load()
}

// OutagesTotal counts the times Redis (on a Cluster: a node) went from up
// to down.
func (g *Guard) OutagesTotal() uint64 {
	if g == nil {
		return 0
	}
	return g.outages.Load()
}

// CommandsTotal counts the commands sent to Redis, each of a pipeline
// too: what webhooks_redis_calls_total adds up, for a benchmark's Redis
// operations per delivery.
func (g *Guard) CommandsTotal() uint64 {
	if g == nil {
		return 0
	}
	return g.commands.Load()
}

// Do runs fn with a client and a context bounded by Config.Timeout. While
// Redis is down it returns ErrUnavailable without calling fn, except for
// one probe per retry interval (on a Cluster, the commands fn sends to a
// node that is down fail so). Errors that say Redis is unreachable come
// back wrapping ErrUnavailable; redis.Nil and other server replies come
// back as they are.
func (g *Guard) Do(ctx context.Context, fn func(ctx context.Context, rdb redis.UniversalClient) error) error {
	if g == nil {
		return ErrDisabled
	}
	if g.whole != nil {
		ok, probe := g.whole.enter()
		if !ok {
			g.failOpen.Add(1)
			return ErrUnavailable
		}
		if probe {
			defer g.whole.probing.Store(false)
		}
	}
	cctx, cancel := context.WithTimeoutCause(ctx, g.cfg.Timeout, errCallTimeout)
	err := fn(cctx, g.rdb)
	cancel()
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		g.up(g.whole)
		return err
	case errors.Is(err, ErrUnavailable):
		// A Cluster node found down, by this call or before.
		g.failOpen.Add(1)
		return err
	case ctx.Err() != nil:
		// The caller gave up (shutdown): says nothing about Redis.
		return err
	case outage(err):
		g.markDown(g.whole, err)
		g.failOpen.Add(1)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	default:
		g.up(g.whole)
		return err
	}
}

// up notes that gt (nil: none, on a Cluster in Do) answered.
func (g *Guard) up(gt *gate) {
	if gt == nil || !gt.down.Load() || !gt.down.CompareAndSwap(true, false) {
		return
	}
	if g.whole == nil {
		g.nodesDown.Add(-1)
		g.log.Info("redis node reachable again: the calls on its slots go to it again", zap.String("node", gt.addr))
		return
	}
	g.log.Info("redis reachable again: circuit breakers, rate limits and dedup resumed")
}

// markDown notes that gt (nil: none) did not answer.
func (g *Guard) markDown(gt *gate, err error) {
	if gt == nil {
		return
	}
	gt.retryAt.Store(time.Now().Add(g.cfg.RetryInterval).UnixNano())
	if !gt.down.CompareAndSwap(false, true) {
		return
	}
	g.outages.Add(1)
	if g.whole == nil {
		g.nodesDown.Add(1)
		g.log.Warn("redis node unreachable: failing open (no circuit breaker, rate limit or dedup) for the keys in its slots until it answers",
			zap.String("node", gt.addr), zap.Duration("retry_every", g.cfg.RetryInterval), zap.Error(err))
		return
	}
	g.log.Warn("redis unreachable: failing open (no circuit breaker, rate limit or dedup) until it answers",
		zap.Duration("retry_every", g.cfg.RetryInterval), zap.Error(err))
}

// nodeHook gates the commands to one Cluster node: while it is down they
// fail at once with ErrUnavailable (one probe per retry interval), so a
// dead master costs one timeout per interval, and only the calls on its
// slots.
type nodeHook struct {
	g  *Guard
	gt *gate
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.gated(ctx, []redis.Cmder{cmd}, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}

func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.gated(ctx, cmds, func(ctx context.Context) error { return next(ctx, cmds) })
	}
}

func (h nodeHook) gated(ctx context.Context, cmds []redis.Cmder, send func(context.Context) error) error {
	ok, probe := h.gt.enter()
	if !ok {
		err := fmt.Errorf("%w: node %s is down", ErrUnavailable, h.gt.addr)
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
	if probe {
		defer h.gt.probing.Store(false)
	}
	err := send(ctx)
	switch {
	case err == nil || !outage(err):
		h.g.up(h.gt)
	case ctx.Err() == nil || errors.Is(context.Cause(ctx), errCallTimeout):
		// Not when the caller gave up: that says nothing about the node.
		h.g.markDown(h.gt, err)
		return fmt.Errorf("%w: node %s: %w", ErrUnavailable, h.gt.addr, err)
	}
	return err
}

// countHook counts the commands sent, by name.
type countHook struct{ g *Guard }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h countHook) count(cmd redis.Cmder) {
	h.g.commands.Add(1)
	h.g.byOp.WithLabelValues(cmd.Name()).Inc()
}

// outage tells errors that mean Redis cannot serve from replies to a
// command (a script error, a wrong type), which say Redis is up.
func outage(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true // timeouts, refused or broken connections, pool timeouts
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
