package main

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// breakerTimeout bounds reading a breaker's state: `subscriptions get`
// shows it when Redis answers in time and leaves it out otherwise (a
// refused connection costs nothing; only an unresponsive host costs the
// whole bound).
const breakerTimeout = 2 * time.Second

// readBreaker reads a subscription's circuit breaker from Redis
// (WEBHOOKS_REDIS_URL); nil when Redis is not configured or does not
// answer.
func (c *cli) readBreaker(ctx context.Context, id string) *redisstate.BreakerState {
	cfg, err := redisstate.Load(c.getenv)
	if err != nil || !cfg.Enabled() {
		return nil
	}
	cfg.Timeout, cfg.RetryInterval = breakerTimeout, breakerTimeout
	g, err := redisstate.Open(cfg, zap.NewNop())
	if err != nil {
		return nil
	}
	defer g.Close()
	st, err := g.ReadBreaker(ctx, id)
	if err != nil {
		return nil
	}
	return &st
}

// withBreaker is a subscription as `subscriptions get -o json` prints it:
// its fields, plus its breaker when known.
type withBreaker struct {
	topics.Subscription
	Breaker *redisstate.BreakerState `json:"breaker,omitempty"`
}

// describeBreaker is the breaker row of `subscriptions get`.
func describeBreaker(b *redisstate.BreakerState) string {
	counts := ""
	if b.Window > 0 {
		counts = fmt.Sprintf(", %d of %d attempts failed in the last %s", b.Failures, b.Calls, b.Window)
	}
	switch b.State {
	case redisstate.StateOpen:
		return fmt.Sprintf("open since %s, probing from %s%s", formatTime(b.Since), formatTime(b.Until), counts)
	case redisstate.StateHalfOpen:
		return fmt.Sprintf("half-open since %s (probing)%s", formatTime(b.Since), counts)
	}
	return "closed" + counts
}
