// Package breaker is the per-subscription circuit breaker that every
// deliverer replica shares through Redis (docs/design.md, "Endpoint protection").
//
// It counts attempts in buckets over a time window; when a failure leaves
// at least MinCalls in the window with at least ThresholdPercent of them
// failed, it opens: for SleepWindow no delivery of the subscription is attempted.
// Then it is half-open: Probes deliveries are let through (shared by all
// replicas); if all of them succeed it closes with a fresh window, if one
// fails it opens again. Probes that never report (their replica died) are
// replaced after SleepWindow.
//
// The decision and the counts live in Redis and change only inside Lua
// scripts, so replicas never race. Each replica caches what Redis last
// said: a closed breaker is trusted for CacheTTL (every recorded failure
// refreshes it), an open one until it may half-open. Successes, which
// cannot open it, are gathered and counted every FlushInterval, so a
// healthy subscription costs a few Redis calls a second, not one per
// attempt; a failing one costs one per failure. When Redis is unreachable
// the breaker is closed (fail open).
package breaker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// Config sets the breaker. Environment variables are read by the
// deliverer's configuration.
type Config struct {
	// ThresholdPercent of failed attempts in the window opens the breaker.
	ThresholdPercent int `env:"WEBHOOKS_BREAKER_THRESHOLD" envDefault:"50" validate:"min=1,max=100" desc:"Percent of failed attempts in the window that opens a subscription's breaker."`
	// MinCalls is the fewest attempts in the window that can open it.
	MinCalls int `env:"WEBHOOKS_BREAKER_MIN_CALLS" envDefault:"10" validate:"min=1" desc:"Fewest attempts in the window that can open the breaker."`
	// Window is the time window of the error rate, counted in 12 buckets
	// of at least a millisecond each (hence min=12ms).
	Window time.Duration `env:"WEBHOOKS_BREAKER_WINDOW" envDefault:"1m" validate:"min=12ms" desc:"Time window of the error rate."`
	// SleepWindow is how long it stays open before probing.
	SleepWindow time.Duration `env:"WEBHOOKS_BREAKER_SLEEP" envDefault:"30s" validate:"min=1ms" desc:"How long an open breaker waits before probing."`
	// Probes is how many half-open attempts must all succeed to close it.
	Probes int `env:"WEBHOOKS_BREAKER_PROBES" envDefault:"3" validate:"min=1" desc:"Half-open attempts that must all succeed to close the breaker."`
}

// Defaults fills zero fields.
func (c *Config) Defaults() {
	if c.ThresholdPercent == 0 {
		c.ThresholdPercent = 50
	}
	if c.MinCalls == 0 {
		c.MinCalls = 10
	}
	if c.Window == 0 {
		c.Window = time.Minute
	}
	if c.SleepWindow == 0 {
		c.SleepWindow = 30 * time.Second
	}
	if c.Probes == 0 {
		c.Probes = 3
	}
}

// buckets is how many counters a window is split into: the window slides
// in steps of Window/buckets (Window's validate tag keeps a step at least
// a millisecond).
const buckets = 12

// CacheTTL is how long a replica trusts a closed state it learned from
// Redis before asking again. Another replica's opening reaches it at its
// next recorded attempt or after CacheTTL, whichever comes first.
const CacheTTL = time.Second

// stateTTL keeps an idle breaker's state for a week, then Redis forgets it
// (closed).
const stateTTL = 7 * 24 * time.Hour

// Result of an attempt, as the breaker counts it.
type Result int

const (
	// Success is an endpoint that answered 2xx.
	Success Result = iota
	// Failure is a retried failure (5xx, 429, timeouts, connection errors).
	Failure
	// Neutral is an answer that says nothing about the endpoint's health
	// (permanent 4xx, 410); not counted, except that it concludes a probe
	// as a success (the endpoint answered).
	Neutral
)

// Transition names, as logged.
const (
	Opened   = "opened"
	Reopened = "reopened"
	HalfOpen = "half_open"
	Closed   = "closed"
)

// Ticket is what Allow handed out, to give back to Record.
type Ticket struct {
	// Probe is the half-open period the attempt probes, 0 for none.
	Probe int64
}

// Decision is Allow's answer.
type Decision struct {
	Allowed bool
	Ticket  Ticket
	// RetryIn is, when blocked, how long until the breaker may let a
	// delivery through (it half-opens, or the probes' deadline passes).
	RetryIn time.Duration
	// OpenFor is, when blocked, how long the breaker has not been closed
	// (since it opened, across reopenings): how long the endpoint has been
	// failing.
	OpenFor time.Duration
	// Transition is set for the one caller that moved the breaker
	// (HalfOpen), so that it is logged once.
	Transition string
}

// Outcome is what Record reports.
type Outcome struct {
	State string
	// Transition is set for the one caller whose result moved the breaker
	// (Opened, Reopened, Closed).
	Transition string
	// Calls and Failures are the counts over the window, after this one.
	Calls, Failures int64
}

// Breaker is the breakers of all subscriptions, as one replica sees them.
type Breaker struct {
	g    *redisstate.Guard
	keys redisstate.Keys
	cfg  Config
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]cached
	// successes not yet counted in Redis, per subscription (Record,
	// Flush).
	successes map[string]int64

	opened, halfOpened, closed atomic.Uint64
}

// cached is the last state Redis reported for a subscription, in local
// time.
type cached struct {
	state   string
	until   time.Time // open: when it may half-open
	outage  time.Time // not closed since
	checked time.Time
}

// New returns the breakers, nil when g is nil (no Redis: always closed).
func New(g *redisstate.Guard, cfg Config) *Breaker {
	if g == nil {
		return nil
	}
	cfg.Defaults()
	return &Breaker{g: g, keys: g.Keys(), cfg: cfg, now: time.Now, cache: map[string]cached{}, successes: map[string]int64{}}
}

// OpenedTotal counts the transitions to open made by this replica
// (opened and reopened), for a metrics counter.
func (b *Breaker) OpenedTotal() uint64 {
	if b == nil {
		return 0
	}
	return b.opened.Load()
}

// HalfOpenedTotal counts the transitions to half-open made by this replica.
func (b *Breaker) HalfOpenedTotal() uint64 {
	if b == nil {
		return 0
	}
	return b.halfOpened.Load()
}

// ClosedTotal counts the transitions to closed made by this replica.
func (b *Breaker) ClosedTotal() uint64 {
	if b == nil {
		return 0
	}
	return b.closed.Load()
}

// openPrune bounds the expired entries Open removes in one call.
const openPrune = 16

// Open reports how many breakers are not closed (open or half-open) across
// all replicas, and how long the one open longest has been, from the set
// the transitions maintain. An entry whose breaker state expired (its
// subscription went quiet for a week, or was deleted) is removed on the
// way.
func (b *Breaker) Open(ctx context.Context) (n int64, longest time.Duration, err error) {
	if b == nil {
		return 0, 0, redisstate.ErrDisabled
	}
	key := b.keys.OpenBreakers()
	err = b.g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		for range openPrune {
			oldest, err := rdb.ZRangeWithScores(ctx, key, 0, 0).Result()
			if err != nil || len(oldest) == 0 {
				return err
			}
			sub, _ := oldest[0].Member.(string)
			live, err := rdb.Exists(ctx, b.keys.Breaker(sub)).Result()
			if err != nil {
				return err
			}
			if live == 1 {
				longest = max(0, b.now().Sub(time.UnixMilli(int64(oldest[0].Score))))
				break
			}
			if err := rdb.ZRem(ctx, key, sub).Err(); err != nil {
				return err
			}
		}
		n, err = rdb.ZCard(ctx, key).Result()
		return err
	})
	return n, longest, err
}

// track keeps the set of breakers not closed up to date after a
// transition this replica made; an error only makes the metrics stale.
func (b *Breaker) track(ctx context.Context, sub, transition string, since time.Time) {
	_ = b.g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		if transition == Closed {
			return rdb.ZRem(ctx, b.keys.OpenBreakers(), sub).Err()
		}
		return rdb.ZAddNX(ctx, b.keys.OpenBreakers(), redis.Z{Score: float64(since.UnixMilli()), Member: sub}).Err()
	})
}

// Allow says whether a delivery of sub may be attempted now. It never
// blocks longer than one Redis call, and allows when Redis is unreachable.
func (b *Breaker) Allow(ctx context.Context, sub string) Decision {
	if b == nil || !b.g.Available() {
		return Decision{Allowed: true}
	}
	now := b.now()
	b.mu.Lock()
	c, ok := b.cache[sub]
	b.mu.Unlock()
	if ok {
		switch {
		case c.state == redisstate.StateClosed && now.Sub(c.checked) < CacheTTL:
			return Decision{Allowed: true}
		// Open is trusted for CacheTTL too: an operator's reset
		// (redisstate.ForceBreaker) reaches every replica within it.
		case c.state == redisstate.StateOpen && now.Before(c.until) && now.Sub(c.checked) < CacheTTL:
			return Decision{RetryIn: c.until.Sub(now), OpenFor: now.Sub(c.outage)}
		}
	}
	var v []any
	err := b.g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		var err error
		v, err = allowScript.Run(ctx, rdb, []string{b.keys.Breaker(sub)},
			b.cfg.Probes, b.cfg.SleepWindow.Milliseconds(), stateTTL.Milliseconds()).Slice()
		return err
	})
	if err != nil || len(v) < 6 {
		return Decision{Allowed: true}
	}
	decision, ms, gen := asInt(v[0]), asInt(v[1]), asInt(v[2])
	state, _ := v[3].(string)
	transition, _ := v[4].(string)
	outage := time.Duration(asInt(v[5])) * time.Millisecond
	b.remember(sub, state, now, time.Duration(ms)*time.Millisecond, outage)
	d := Decision{Transition: transition}
	if transition == HalfOpen {
		b.halfOpened.Add(1)
	}
	switch decision {
	case 1:
		d.Allowed = true
	case 2:
		d.Allowed, d.Ticket = true, Ticket{Probe: gen}
	default:
		d.RetryIn, d.OpenFor = time.Duration(ms)*time.Millisecond, outage
	}
	return d
}

// FlushInterval is how long a replica gathers successes before counting
// them in Redis (Flush). Failures and probes are counted at once, with the
// successes gathered before them, so the error rate a failure is judged by
// counts every success this replica saw; another replica's last successes
// reach it at most FlushInterval late.
const FlushInterval = 250 * time.Millisecond

// Record counts the result of an attempt that Allow let through. A success
// outside a probe, which cannot move the breaker, is only gathered here
// (counted by the next failure, probe or Flush), so a healthy endpoint's
// deliveries cost no Redis call each; its Outcome is the state last known.
// Errors (Redis unreachable) are swallowed: the attempts are simply not
// counted.
func (b *Breaker) Record(ctx context.Context, sub string, t Ticket, r Result) (Outcome, error) {
	if b == nil {
		return Outcome{State: redisstate.StateClosed}, redisstate.ErrDisabled
	}
	if r == Neutral {
		if t.Probe == 0 {
			return Outcome{}, nil
		}
		r = Success
	}
	b.mu.Lock()
	if r == Success && t.Probe == 0 {
		b.successes[sub]++
		state := b.cache[sub].state
		b.mu.Unlock()
		if state == "" {
			state = redisstate.StateClosed
		}
		return Outcome{State: state}, nil
	}
	successes := b.successes[sub]
	delete(b.successes, sub)
	b.mu.Unlock()
	failed := int64(0)
	if r == Success {
		successes++
	} else {
		failed = 1
	}
	return b.count(ctx, sub, t, successes, failed)
}

// Flush counts in Redis the successes gathered so far. The deliverer calls
// it every FlushInterval and once when it stops.
func (b *Breaker) Flush(ctx context.Context) {
	if b == nil {
		return
	}
	b.mu.Lock()
	gathered := b.successes
	b.successes = map[string]int64{}
	b.mu.Unlock()
	for sub, n := range gathered {
		if _, err := b.count(ctx, sub, Ticket{}, n, 0); err != nil {
			return
		}
	}
}

// count runs recordScript for successes and failed (0 or 1) results of sub.
func (b *Breaker) count(ctx context.Context, sub string, t Ticket, successes, failed int64) (Outcome, error) {
	now := b.now()
	bucket := b.cfg.Window / buckets
	var v []any
	err := b.g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		var err error
		v, err = recordScript.Run(ctx, rdb,
			[]string{b.keys.Breaker(sub), b.keys.BreakerCalls(sub), b.keys.FailingSince(sub)},
			successes, t.Probe, b.cfg.ThresholdPercent, b.cfg.MinCalls, b.cfg.Window.Milliseconds(), bucket.Milliseconds(),
			b.cfg.SleepWindow.Milliseconds(), b.cfg.Probes, stateTTL.Milliseconds(), failed).Slice()
		return err
	})
	if err != nil {
		return Outcome{State: redisstate.StateClosed}, err
	}
	if len(v) < 8 {
		return Outcome{State: redisstate.StateClosed}, fmt.Errorf("breaker record script: unexpected reply %v", v)
	}
	o := Outcome{Calls: asInt(v[6]), Failures: asInt(v[7])}
	o.State, _ = v[3].(string)
	o.Transition, _ = v[4].(string)
	b.remember(sub, o.State, now, time.Duration(asInt(v[1]))*time.Millisecond, time.Duration(asInt(v[5]))*time.Millisecond)
	switch o.Transition {
	case Opened, Reopened:
		b.opened.Add(1)
		b.track(ctx, sub, o.Transition, now.Add(-time.Duration(asInt(v[5]))*time.Millisecond))
	case Closed:
		b.closed.Add(1)
		b.track(ctx, sub, o.Transition, now)
	}
	return o, nil
}

func (b *Breaker) remember(sub, state string, now time.Time, left, outage time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cache[sub] = cached{state: state, until: now.Add(left), outage: now.Add(-outage), checked: now}
}

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
