// Package redisstate is the state the pipeline's replicas share through
// Redis (docs/design.md, "Endpoint protection"): the key layout every component
// and webhookctl agree on, and Guard, the fail-open access to Redis that
// every component uses (invariant 7): each call has a short deadline, and
// once Redis failed it is skipped for a retry interval, so a dead Redis
// costs at most one timeout per interval, never one per delivery.
package redisstate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// Environment variables of the Redis connection.
const (
	// EnvURL locates Redis (Disabled: none).
	EnvURL = "WEBHOOKS_REDIS_URL"
	// EnvKeyPrefix starts every key: two pipelines (or two tests) can share
	// one Redis server under different prefixes.
	EnvKeyPrefix = "WEBHOOKS_REDIS_KEY_PREFIX"
	// EnvTimeout bounds every Redis call.
	EnvTimeout = "WEBHOOKS_REDIS_TIMEOUT"
	// EnvRetryInterval is how long Redis is skipped after it failed.
	EnvRetryInterval = "WEBHOOKS_REDIS_RETRY_INTERVAL"
)

// Defaults.
const (
	DefaultURL           = "redis://127.0.0.1:6379/0"
	DefaultKeyPrefix     = "webhooks:"
	DefaultTimeout       = 100 * time.Millisecond
	DefaultRetryInterval = 2 * time.Second
)

// Disabled is the WEBHOOKS_REDIS_URL value that runs without Redis, as if
// it were unreachable but without the warning: no breaker, no rate limit,
// no dedup.
const Disabled = "-"

// Config locates Redis. The zero value is "no Redis".
type Config struct {
	// URL locates Redis; "-" (or an empty URL in a Config built in code)
	// runs without Redis.
	URL string `env:"WEBHOOKS_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0" desc:"Redis shared by the replicas (breakers, rate limits, dedup, recovery marks); - for none. Every feature fails open when Redis is down."`
	// KeyPrefix starts every key.
	KeyPrefix string `env:"WEBHOOKS_REDIS_KEY_PREFIX" envDefault:"webhooks:" desc:"Starts every Redis key, so two pipelines can share a server."`
	// Timeout bounds every call.
	Timeout time.Duration `env:"WEBHOOKS_REDIS_TIMEOUT" envDefault:"100ms" desc:"Bounds every Redis call (at least 1ms)."`
	// RetryInterval is how long Redis is skipped (failing open at once)
	// after a call failed; then one call probes it.
	RetryInterval time.Duration `env:"WEBHOOKS_REDIS_RETRY_INTERVAL" envDefault:"2s" desc:"How long Redis is skipped after a failed call before one call probes it (at least the timeout)."`
}

// Enabled reports whether a Redis URL is configured.
func (c Config) Enabled() bool { return c.URL != "" }

// Defaults fills the zero fields other than URL.
func (c *Config) Defaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
}

// Validate checks the fields (after Defaults); without a URL there is
// nothing to check.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if _, err := redis.ParseURL(c.URL); err != nil {
		// The reason without the URL, which may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		errs = append(errs, fmt.Errorf("%s: not a valid Redis URL: %w", EnvURL, err))
	}
	if c.Timeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("%s must be at least 1ms", EnvTimeout))
	}
	if c.RetryInterval < c.Timeout {
		errs = append(errs, fmt.Errorf("%s must be at least %s", EnvRetryInterval, EnvTimeout))
	}
	return errors.Join(errs...)
}

// Load reads the Redis settings through getenv, applies the defaults and
// validates them, reporting every bad variable at once.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	if err := config.Parse(getenv, &c); err != nil {
		return c, err
	}
	if c.URL = strings.TrimSpace(c.URL); c.URL == Disabled {
		c.URL = ""
	}
	var errs []error
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("%s: %v is not positive", EnvTimeout, c.Timeout))
	}
	if c.RetryInterval <= 0 {
		errs = append(errs, fmt.Errorf("%s: %v is not positive", EnvRetryInterval, c.RetryInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	c.Defaults()
	return c, c.Validate()
}
