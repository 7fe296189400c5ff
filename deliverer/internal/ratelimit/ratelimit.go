// Package ratelimit applies a subscription's rate_limit_per_s, and a
// tenant's delivery quota, across all deliverer replicas: GCRA in Redis
// through github.com/go-redis/redis_rate, with a burst of max(1,
// ceil(rate)). What follows says subscription; a tenant's quota works the
// same, under a key of its own.
//
// A throttled delivery is delayed, never failed. When its turn is near
// (within MaxWait) it waits in-process, on a timer and the context; a tier
// trip through Kafka costs two produced records and at least the shortest
// tier, far more than a short wait. In-process waiting holds a delivery
// worker, so it is bounded: at most waitersPerSubscription deliveries of a
// subscription and MaxWaiters in all wait at once; the rest are handed
// back with a delay, for the caller to park them in a retry tier. Those
// delays are spread at the subscription's rate (each replica keeps the
// next free slot), so a backlog comes back from the tiers paced instead of
// all at once and throttled again.
//
// When Redis is unreachable nothing is limited (fail open).
package ratelimit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// waitersPerSubscription bounds the deliveries of one subscription (or
// tenant) that wait in-process at once.
const waitersPerSubscription = 2

// Limiter is the rate limits of all subscriptions and tenants, as one
// replica applies them.
type Limiter struct {
	g       *redisstate.Guard
	lim     *redis_rate.Limiter
	keys    redisstate.Keys
	maxWait time.Duration
	waiters chan struct{} // a slot per in-process waiter

	mu   sync.Mutex
	subs map[string]*subState // by Redis key

	waited atomic.Uint64
}

type subState struct {
	waiting int
	next    time.Time // next free slot for a delayed delivery
}

// New returns the limiter, nil when g is nil (no Redis: no limits).
// maxWait bounds an in-process wait; maxWaiters bounds the deliveries
// waiting in-process at once.
func New(g *redisstate.Guard, maxWait time.Duration, maxWaiters int) *Limiter {
	if g == nil {
		return nil
	}
	return &Limiter{g: g, lim: redis_rate.NewLimiter(g.Client()), keys: g.Keys(), maxWait: maxWait,
		waiters: make(chan struct{}, max(1, maxWaiters)), subs: map[string]*subState{}}
}

// Limit is the redis_rate limit for a rate per second: one event per
// emission interval, with a burst of max(1, ceil(rate)).
func Limit(perSecond float64) redis_rate.Limit {
	period := max(time.Duration(float64(time.Second)/perSecond), time.Microsecond)
	return redis_rate.Limit{Rate: 1, Period: period, Burst: max(1, int(math.Ceil(perSecond)))}
}

// Take returns 0 when a delivery of sub may be attempted now, possibly
// after waiting in-process, or how long to delay it otherwise. perSecond
// <= 0 means unlimited. When ctx ends during a wait, it returns the wait
// left.
func (l *Limiter) Take(ctx context.Context, sub string, perSecond float64) time.Duration {
	if l == nil {
		return 0
	}
	return l.take(ctx, l.keys.RateLimit(sub), perSecond, 1)
}

// TakeTenant is Take for n deliveries of a tenant (a batch's events of it
// are each one) against its quota: the deliveries of all its
// subscriptions share it.
func (l *Limiter) TakeTenant(ctx context.Context, tenant string, perSecond float64, n int) time.Duration {
	if l == nil {
		return 0
	}
	return l.take(ctx, l.keys.TenantRate(tenant), perSecond, max(1, n))
}

// take applies the limit kept at the Redis key key to n deliveries; the
// in-process waits and spreading are per key too. n above the burst goes
// once the limit has not been used for n emission intervals, and moves it
// that far on: the rate holds, and a batch larger than the burst is not
// refused for ever.
func (l *Limiter) take(ctx context.Context, key string, perSecond float64, n int) time.Duration {
	if perSecond <= 0 || !l.g.Available() {
		return 0
	}
	limit := Limit(perSecond)
	limit.Burst = max(limit.Burst, n)
	deadline := time.Now().Add(l.maxWait)
	waiting := false
	defer func() {
		if waiting {
			l.release(key)
		}
	}()
	for {
		var res *redis_rate.Result
		err := l.g.Do(ctx, func(ctx context.Context, _ redis.UniversalClient) error {
			var err error
			res, err = l.lim.AllowN(ctx, key, limit, n)
			return err
		})
		if err != nil || res.Allowed > 0 {
			if waiting {
				l.waited.Add(1)
			}
			return 0 // allowed, or Redis failed: fail open
		}
		retry := max(res.RetryAfter, time.Millisecond)
		now := time.Now()
		if now.Add(retry).After(deadline) || (!waiting && !l.acquire(key)) {
			return l.spread(key, perSecond, n, now, retry)
		}
		waiting = true
		t := time.NewTimer(retry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return retry
		}
	}
}

// acquire takes an in-process waiting slot for key, if one is free.
func (l *Limiter) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(key)
	if s.waiting >= waitersPerSubscription {
		return false
	}
	select {
	case l.waiters <- struct{}{}:
		s.waiting++
		return true
	default:
		return false
	}
}

func (l *Limiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	<-l.waiters
	l.state(key).waiting--
}

// spread returns the delay of n deliveries that cannot wait in-process:
// the later of their GCRA retry-after and the limit's next free slot,
// which then moves n emission intervals on.
func (l *Limiter) spread(key string, perSecond float64, n int, now time.Time, retry time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(key)
	at := now.Add(retry)
	if s.next.After(at) {
		at = s.next
	}
	s.next = at.Add(time.Duration(float64(n) * float64(time.Second) / perSecond))
	return at.Sub(now)
}

// state is the in-process state of the limit at key (a subscription's or
// a tenant's).
func (l *Limiter) state(key string) *subState {
	s := l.subs[key]
	if s == nil {
		// Drop the states of limits that are idle, so the map holds only
		// the ones throttled lately.
		if len(l.subs) > 1024 {
			now := time.Now()
			for k, v := range l.subs {
				if v.waiting == 0 && v.next.Before(now) {
					delete(l.subs, k)
				}
			}
		}
		s = &subState{}
		l.subs[key] = s
	}
	return s
}

// WaitedTotal counts the deliveries let through after an in-process wait
// (a counter).
func (l *Limiter) WaitedTotal() uint64 {
	if l == nil {
		return 0
	}
	return l.waited.Load()
}

// Waiting is how many deliveries wait in-process now (a gauge).
func (l *Limiter) Waiting() int {
	if l == nil {
		return 0
	}
	return len(l.waiters)
}
