package deliverer

import (
	"errors"
	"time"

	"github.com/hookpipe/hookpipe/deliverer/internal/breaker"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// Protection configures endpoint protection (DESIGN.md "Endpoint
// protection"): circuit breakers, rate limits and auto-disable, with their
// state shared through Redis. Every field says its environment variable
// and default.
type Protection struct {
	// Redis: WEBHOOKS_REDIS_URL (default redis://127.0.0.1:6379/0, "-" for
	// none), WEBHOOKS_REDIS_KEY_PREFIX, WEBHOOKS_REDIS_TIMEOUT,
	// WEBHOOKS_REDIS_RETRY_INTERVAL (package redisstate).
	Redis redisstate.Config
	// Breaker: WEBHOOKS_BREAKER_THRESHOLD (percent, default 50),
	// WEBHOOKS_BREAKER_MIN_CALLS (10), WEBHOOKS_BREAKER_WINDOW (60s),
	// WEBHOOKS_BREAKER_SLEEP (30s), WEBHOOKS_BREAKER_PROBES (3).
	Breaker breaker.Config
	// RateLimitMaxWait is the longest a throttled delivery waits
	// in-process for its turn; a longer wait goes through a retry tier:
	// WEBHOOKS_RATE_LIMIT_MAX_WAIT, default 500ms (0: always a tier).
	RateLimitMaxWait time.Duration
	// AutoDisableAfter disables a subscription whose deliveries have been
	// dead-lettered by exhausted retries, with no success, for this long:
	// WEBHOOKS_AUTO_DISABLE_AFTER, default 120h (5 days); 0 never.
	AutoDisableAfter time.Duration
}

func (p *Protection) defaults() {
	p.Redis = redisstate.Config{URL: redisstate.DefaultURL}
	p.Redis.Defaults()
	p.Breaker.Defaults()
	p.RateLimitMaxWait = 500 * time.Millisecond
	p.AutoDisableAfter = 5 * 24 * time.Hour
}

func (p *Protection) validate() error {
	var errs []error
	errs = append(errs, p.Redis.Validate(), p.Breaker.Validate())
	if p.RateLimitMaxWait < 0 {
		errs = append(errs, errors.New("WEBHOOKS_RATE_LIMIT_MAX_WAIT must not be negative"))
	}
	if p.AutoDisableAfter < 0 {
		errs = append(errs, errors.New("WEBHOOKS_AUTO_DISABLE_AFTER must not be negative"))
	}
	return errors.Join(errs...)
}

// load reads the protection settings through getenv over the defaults.
func (p *Protection) load(getenv func(string) string) error {
	rc, err := redisstate.Load(getenv)
	p.Redis = rc
	r := config.NewEnvReader(getenv)
	r.Int("WEBHOOKS_BREAKER_THRESHOLD", &p.Breaker.ThresholdPercent)
	r.Int("WEBHOOKS_BREAKER_MIN_CALLS", &p.Breaker.MinCalls)
	r.Duration("WEBHOOKS_BREAKER_WINDOW", &p.Breaker.Window)
	r.Duration("WEBHOOKS_BREAKER_SLEEP", &p.Breaker.SleepWindow)
	r.Int("WEBHOOKS_BREAKER_PROBES", &p.Breaker.Probes)
	r.Duration("WEBHOOKS_RATE_LIMIT_MAX_WAIT", &p.RateLimitMaxWait)
	r.Duration("WEBHOOKS_AUTO_DISABLE_AFTER", &p.AutoDisableAfter)
	return errors.Join(err, r.Err())
}
