package api

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// limiter applies the per-key request rate across replicas: GCRA in Redis
// through redis_rate, failing open (no limit) while Redis is down, as every
// component's use of Redis does.
type limiter struct {
	g     *redisstate.Guard
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
	log   *zap.Logger
}

// newLimiter returns the limiter, nil without Redis or without a rate.
func newLimiter(g *redisstate.Guard, perSecond float64, log *zap.Logger) *limiter {
	if g == nil || perSecond <= 0 {
		return nil
	}
	burst := max(1, int(math.Ceil(perSecond)))
	period := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &limiter{g: g, lim: redis_rate.NewLimiter(g.Client()), log: log,
		limit: redis_rate.Limit{Rate: burst, Burst: burst, Period: period}}
}

// wait is how long the key must wait before its next request; 0 allows it.
func (l *limiter) wait(ctx context.Context, keyID string) time.Duration {
	if l == nil {
		return 0
	}
	var res *redis_rate.Result
	err := l.g.Do(ctx, func(ctx context.Context, _ redis.UniversalClient) (err error) {
		res, err = l.lim.Allow(ctx, l.g.Keys().APIRate(keyID), l.limit)
		return err
	})
	if err != nil || res.Allowed > 0 {
		return 0 // allowed, or Redis is down: fail open
	}
	return max(res.RetryAfter, time.Millisecond)
}

// rateLimit answers 429 with Retry-After to a key over its rate.
func (s *Server) rateLimit(ctx huma.Context, next func(huma.Context)) {
	p, ok := ctx.Context().Value(principalKey{}).(service.Caller)
	if !ok {
		next(ctx)
		return
	}
	id := p.KeyID
	if id == "" {
		id = "bootstrap"
	}
	if d := s.limit.wait(ctx.Context(), id); d > 0 {
		ctx.SetHeader("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		_ = huma.WriteErr(s.api, ctx, http.StatusTooManyRequests, "this API key is over its request rate; retry after the Retry-After seconds")
		return
	}
	next(ctx)
}
