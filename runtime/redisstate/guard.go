package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/zap"
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
// A nil *Guard is valid: Redis is not configured and every call returns
// ErrDisabled.
type Guard struct {
	rdb  *redis.Client
	cfg  Config
	keys Keys
	log  *zap.Logger

	down     atomic.Bool
	retryAt  atomic.Int64 // unix nanos: when a down Redis may be probed
	probing  atomic.Bool
	failOpen atomic.Uint64
	outages  atomic.Uint64
}

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
	g := &Guard{rdb: redis.NewClient(opts), cfg: cfg, keys: Keys{Prefix: cfg.KeyPrefix},
		log: log.Named("redis").With(zap.String("addr", opts.Addr), zap.Int("db", opts.DB))}
	return g, nil
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
func (g *Guard) Client() *redis.Client {
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
// down (and for a nil Guard).
func (g *Guard) Available() bool {
	return g != nil && !g.down.Load()
}

// FailOpenTotal counts the calls that failed open because Redis was down
// or failed: for a metrics counter (webhooks_redis_fail_open_total).
func (g *Guard) FailOpenTotal() uint64 {
	if g == nil {
		return 0
	}
	return g.failOpen.Load()
}

// OutagesTotal counts the times Redis went from up to down.
func (g *Guard) OutagesTotal() uint64 {
	if g == nil {
		return 0
	}
	return g.outages.Load()
}

// Do runs fn with a client and a context bounded by Config.Timeout. While
// Redis is down it returns ErrUnavailable without calling fn, except for
// one probe per retry interval. Errors that say Redis is unreachable come
// back wrapping ErrUnavailable; redis.Nil and other server replies come
// back as they are.
func (g *Guard) Do(ctx context.Context, fn func(ctx context.Context, rdb *redis.Client) error) error {
	if g == nil {
		return ErrDisabled
	}
	if g.down.Load() {
		if time.Now().UnixNano() < g.retryAt.Load() || !g.probing.CompareAndSwap(false, true) {
			g.failOpen.Add(1)
			return ErrUnavailable
		}
		defer g.probing.Store(false)
	}
	cctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	err := fn(cctx, g.rdb)
	cancel()
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		g.up()
		return err
	case ctx.Err() != nil:
		// The caller gave up (shutdown): says nothing about Redis.
		return err
	case outage(err):
		g.markDown(err)
		g.failOpen.Add(1)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	default:
		g.up()
		return err
	}
}

func (g *Guard) up() {
	if g.down.Load() && g.down.CompareAndSwap(true, false) {
		g.log.Info("redis reachable again: circuit breakers, rate limits and dedup resumed")
	}
}

func (g *Guard) markDown(err error) {
	g.retryAt.Store(time.Now().Add(g.cfg.RetryInterval).UnixNano())
	if g.down.CompareAndSwap(false, true) {
		g.outages.Add(1)
		g.log.Warn("redis unreachable: failing open (no circuit breaker, rate limit or dedup) until it answers",
			zap.Duration("retry_every", g.cfg.RetryInterval), zap.Error(err))
	}
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
