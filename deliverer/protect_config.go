package deliverer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"

	"github.com/hookpipe/hookpipe/deliverer/internal/breaker"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// Protection configures endpoint protection (docs/design.md, "Endpoint
// protection"): circuit breakers, rate limits and auto-disable, with their
// state shared through Redis. Every field says its environment variable
// and default.
type Protection struct {
	// Redis shares the state (package redisstate; loaded by redisstate.Load).
	Redis redisstate.Config `env:"-"`
	// Breaker: the circuit breaker of each subscription.
	Breaker breaker.Config
	// RateLimitMaxWait is the longest a throttled delivery waits
	// in-process for its turn; a longer wait goes through a retry tier.
	RateLimitMaxWait time.Duration `env:"WEBHOOKS_RATE_LIMIT_MAX_WAIT" envDefault:"500ms" desc:"Longest a rate-limited delivery waits in-process for its turn; longer goes through a retry tier (0: always a tier)."`
	// TenantRate is the default delivery quota of a tenant, deliveries
	// per second across all replicas; the tenants topic overrides it per
	// tenant.
	TenantRate float64 `env:"WEBHOOKS_TENANT_RATE" envDefault:"0" desc:"Deliveries per second of one tenant's events across all replicas, unless the tenants topic sets its own (webhookctl tenants set-quota); over it deliveries are delayed through a retry tier, never dropped (0: unlimited). Needs Redis."`
	// AutoDisableAfter disables a subscription whose deliveries have been
	// dead-lettered by exhausted retries, with no success, for this long.
	AutoDisableAfter time.Duration `env:"WEBHOOKS_AUTO_DISABLE_AFTER" envDefault:"120h" desc:"Disables a subscription whose deliveries were dead-lettered, with no success, for this long (0: never)."`
}

func (p *Protection) validate() error {
	var errs []error
	errs = append(errs, p.Redis.Validate(), p.Breaker.Validate())
	if p.RateLimitMaxWait < 0 {
		errs = append(errs, fmt.Errorf("%s must not be negative", config.Name(p, &p.RateLimitMaxWait)))
	}
	if p.TenantRate < 0 || math.IsNaN(p.TenantRate) || math.IsInf(p.TenantRate, 0) {
		errs = append(errs, fmt.Errorf("%s must be a finite number, not negative", config.Name(p, &p.TenantRate)))
	}
	if p.AutoDisableAfter < 0 {
		errs = append(errs, fmt.Errorf("%s must not be negative", config.Name(p, &p.AutoDisableAfter)))
	}
	return errors.Join(errs...)
}
