package redisstate

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Breaker states, as stored in the state hash.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half_open"
)

// BreakerState is what Redis says about a subscription's breaker.
type BreakerState struct {
	State string `json:"state"`
	// Until is when an open breaker lets probes through, or when a
	// half-open one hands out new probes if the current ones never report.
	Until time.Time `json:"until,omitzero"`
	// Since is when the breaker entered its state (zero when never opened).
	Since time.Time `json:"since,omitzero"`
	// Calls and Failures are the attempts counted over the breaker window.
	Calls    int64 `json:"calls"`
	Failures int64 `json:"failures"`
	// Window is the breaker window the counts cover (zero before any call).
	Window time.Duration `json:"window,omitzero"`
}

// BreakersNotClosed lists the subscriptions in the set of breakers not
// closed (Keys.OpenBreakers): one call for a page of subscriptions, whose
// others are closed. The set may still hold one that closed a moment ago;
// ReadBreaker tells.
func (g *Guard) BreakersNotClosed(ctx context.Context) ([]string, error) {
	var ids []string
	err := g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) (err error) {
		ids, err = rdb.ZRange(ctx, g.keys.OpenBreakers(), 0, -1).Result()
		return err
	})
	return ids, err
}

// ReadBreaker reads a subscription's breaker state.
func (g *Guard) ReadBreaker(ctx context.Context, sub string) (BreakerState, error) {
	var st []any
	var calls map[string]string
	err := g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		p := rdb.Pipeline()
		s := p.HMGet(ctx, g.keys.Breaker(sub), "state", "until", "since")
		c := p.HGetAll(ctx, g.keys.BreakerCalls(sub))
		if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
			return err
		}
		st, calls = s.Val(), c.Val()
		return nil
	})
	if err != nil {
		return BreakerState{}, err
	}
	out := BreakerState{State: StateClosed}
	if v, ok := st[0].(string); ok && v != "" {
		out.State = v
	}
	ms := func(v any) time.Time {
		s, _ := v.(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	if out.State != StateClosed {
		out.Until = ms(st[1])
	}
	out.Since = ms(st[2])
	windowMS, _ := strconv.ParseInt(calls["window_ms"], 10, 64)
	bucketMS, _ := strconv.ParseInt(calls["bucket_ms"], 10, 64)
	out.Window = time.Duration(windowMS) * time.Millisecond
	oldest := int64(0)
	if bucketMS > 0 {
		oldest = time.Now().UnixMilli()/bucketMS - (windowMS+bucketMS-1)/bucketMS + 1
	}
	for f, v := range calls {
		kind, b, ok := strings.Cut(f, ":")
		n, err := strconv.ParseInt(b, 10, 64)
		if !ok || err != nil || n < oldest {
			continue
		}
		c, _ := strconv.ParseInt(v, 10, 64)
		switch kind {
		case "t":
			out.Calls += c
		case "f":
			out.Failures += c
		}
	}
	return out, nil
}

// MarkRecovering records that a subscription's breaker closed at t: the
// retrier releases its pending retries early.
func (g *Guard) MarkRecovering(ctx context.Context, sub string, t time.Time) error {
	return g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		return rdb.ZAdd(ctx, g.keys.Recovering(), redis.Z{Score: float64(t.UnixMilli()), Member: sub}).Err()
	})
}

// ClearRecovering removes a subscription's recovery mark (its breaker
// opened again).
func (g *Guard) ClearRecovering(ctx context.Context, sub string) error {
	return g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		return rdb.ZRem(ctx, g.keys.Recovering(), sub).Err()
	})
}

// Recovering returns the recovery marks set after since, and drops the
// older ones.
func (g *Guard) Recovering(ctx context.Context, since time.Time) (map[string]time.Time, error) {
	var zs []redis.Z
	err := g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		from := strconv.FormatInt(since.UnixMilli(), 10)
		p := rdb.Pipeline()
		p.ZRemRangeByScore(ctx, g.keys.Recovering(), "-inf", "("+from)
		r := p.ZRangeByScoreWithScores(ctx, g.keys.Recovering(), &redis.ZRangeBy{Min: from, Max: "+inf"})
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
		zs = r.Val()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(zs))
	for _, z := range zs {
		if s, ok := z.Member.(string); ok {
			out[s] = time.UnixMilli(int64(z.Score))
		}
	}
	return out, nil
}

// forceScript sets a breaker's state as an operator asks, on the Redis
// server's clock (as the deliverers' scripts). It touches only the
// subscription's keys (one Cluster slot); the set of breakers not closed
// is updated after it, as the deliverers' transitions do.
//
//	KEYS[1] state hash, KEYS[2] call counts
//	ARGV[1] open, closed or reset   ARGV[2] for how long (ms)
//
// Returns the server's time (unix ms).
var forceScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[2])
if ARGV[1] == 'open' then
  local gen = tonumber(redis.call('HGET', KEYS[1], 'gen')) or 0
  local outage = tonumber(redis.call('HGET', KEYS[1], 'outage')) or 0
  if outage == 0 then
    outage = now
  end
  redis.call('HSET', KEYS[1], 'state', 'open', 'until', now + tonumber(ARGV[2]), 'since', now, 'gen', gen, 'tokens', 0, 'ok', 0,
    'outage', outage, 'closed_until', 0)
  return now
end
redis.call('DEL', KEYS[1])
if ARGV[1] == 'closed' then
  redis.call('HSET', KEYS[1], 'state', 'closed', 'since', now, 'closed_until', now + tonumber(ARGV[2]))
end
return now
`)

// Breaker controls an operator applies through the API; every deliverer
// honours them (the breaker lives in Redis).
const (
	// ForceOpen opens the breaker for a while: deliveries wait in the
	// retry tiers, then it probes as after any opening.
	ForceOpen = "open"
	// ForceClose closes it and keeps it closed for a while, whatever
	// fails.
	ForceClose = "closed"
	// Reset closes it and forgets the attempts counted.
	Reset = "reset"
)

// ForceBreaker applies a breaker control (ForceOpen, ForceClose, Reset)
// to a subscription's breaker for d (ForceOpen and ForceClose).
func (g *Guard) ForceBreaker(ctx context.Context, sub, control string, d time.Duration) error {
	return g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		now, err := forceScript.Run(ctx, rdb, []string{g.keys.Breaker(sub), g.keys.BreakerCalls(sub)}, control, d.Milliseconds()).Int64()
		if err != nil {
			return err
		}
		if control == ForceOpen {
			return rdb.ZAdd(ctx, g.keys.OpenBreakers(), redis.Z{Score: float64(now), Member: sub}).Err()
		}
		return rdb.ZRem(ctx, g.keys.OpenBreakers(), sub).Err()
	})
}

// SchemaWindow is how far back SchemaCounts sums.
const SchemaWindow = 24 * time.Hour

// CountSchema adds to now's hour the events the event catalog found fault
// with, by [type, outcome] (the type "" for unknown types). Each hour's
// hash is kept a little longer than SchemaWindow.
func (g *Guard) CountSchema(ctx context.Context, now time.Time, counts map[[2]string]int) error {
	if len(counts) == 0 {
		return nil
	}
	key := g.keys.SchemaCounts(now)
	return g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		p := rdb.Pipeline()
		for k, n := range counts {
			p.HIncrBy(ctx, key, k[1]+" "+k[0], int64(n))
		}
		p.Expire(ctx, key, SchemaWindow+time.Hour)
		_, err := p.Exec(ctx)
		return err
	})
}

// SchemaCounts sums the counts of the last SchemaWindow up to now, by
// [type, outcome].
func (g *Guard) SchemaCounts(ctx context.Context, now time.Time) (map[[2]string]int64, error) {
	hours := int(SchemaWindow / time.Hour)
	out := map[[2]string]int64{}
	err := g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		p := rdb.Pipeline()
		res := make([]*redis.MapStringStringCmd, hours)
		for i := range res {
			res[i] = p.HGetAll(ctx, g.keys.SchemaCounts(now.Add(-time.Duration(i)*time.Hour)))
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
		for _, r := range res {
			for field, v := range r.Val() {
				outcome, typ, _ := strings.Cut(field, " ")
				n, _ := strconv.ParseInt(v, 10, 64)
				out[[2]string{typ, outcome}] += n
			}
		}
		return nil
	})
	return out, err
}
