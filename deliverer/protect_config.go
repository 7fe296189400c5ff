package deliverer

import (
	"time"

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
	RateLimitMaxWait time.Duration `env:"WEBHOOKS_RATE_LIMIT_MAX_WAIT" envDefault:"500ms" validate:"min=0" desc:"Longest a rate-limited delivery waits in-process for its turn; longer goes through a retry tier (0: always a tier)."`
	// TenantRate is the default delivery quota of a tenant, deliveries
	// per second across all replicas; the tenants topic overrides it per
	// tenant.
	TenantRate float64 `env:"WEBHOOKS_TENANT_RATE" envDefault:"0" validate:"finite,min=0" desc:"Deliveries per second of one tenant's events across all replicas, unless the tenants topic sets its own (webhookctl tenants set-quota); over it deliveries are delayed through a retry tier, never dropped (0: unlimited). Needs Redis."`
	// AutoDisableAfter disables a subscription whose deliveries have been
	// dead-lettered by exhausted retries, with no success, for this long.
	AutoDisableAfter time.Duration `env:"WEBHOOKS_AUTO_DISABLE_AFTER" envDefault:"120h" validate:"min=0" desc:"Disables a subscription whose deliveries were dead-lettered, with no success, for this long (0: never)."`
}
