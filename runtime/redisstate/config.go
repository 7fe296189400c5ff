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
	"net"
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
	// EnvClusterAddrs lists seed nodes of a Redis Cluster.
	EnvClusterAddrs = "WEBHOOKS_REDIS_CLUSTER_ADDRS"
	// EnvSentinelAddrs lists the Sentinels watching the master.
	EnvSentinelAddrs = "WEBHOOKS_REDIS_SENTINEL_ADDRS"
	// EnvSentinelMaster names the master the Sentinels watch.
	EnvSentinelMaster = "WEBHOOKS_REDIS_SENTINEL_MASTER"
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
	Timeout time.Duration `env:"WEBHOOKS_REDIS_TIMEOUT" envDefault:"100ms" validate:"min=1ms" desc:"Bounds every Redis call."`
	// RetryInterval is how long Redis is skipped (failing open at once)
	// after a call failed; then one call probes it.
	RetryInterval time.Duration `env:"WEBHOOKS_REDIS_RETRY_INTERVAL" envDefault:"2s" validate:"gtefield=Timeout" desc:"How long Redis is skipped after a failed call before one call probes it."`
	// ClusterAddrs (comma-separated host:port) selects Redis Cluster.
	ClusterAddrs string `env:"WEBHOOKS_REDIS_CLUSTER_ADDRS" desc:"Seed nodes of a Redis Cluster (host:port, comma-separated); set, it replaces the URL's host, which then only gives the username, password and TLS (rediss://) of every node. A dead master fails open only for the keys in its slots."`
	// SentinelAddrs (comma-separated host:port) with SentinelMaster
	// selects Sentinel.
	SentinelAddrs string `env:"WEBHOOKS_REDIS_SENTINEL_ADDRS" desc:"Sentinels (host:port, comma-separated) that locate the master named by WEBHOOKS_REDIS_SENTINEL_MASTER; set, it replaces the URL's host, which then only gives the username, password, TLS and database of the master."`
	// SentinelMaster is the master name the Sentinels watch.
	SentinelMaster string `env:"WEBHOOKS_REDIS_SENTINEL_MASTER" desc:"Master name the Sentinels of WEBHOOKS_REDIS_SENTINEL_ADDRS watch (their sentinel.conf monitor line)."`
}

// Topologies of Redis a Config selects.
const (
	Single   = "single"
	Cluster  = "cluster"
	Sentinel = "sentinel"
)

// Topology is Single, Cluster (ClusterAddrs set) or Sentinel
// (SentinelAddrs set).
func (c Config) Topology() string {
	switch {
	case c.ClusterAddrs != "":
		return Cluster
	case c.SentinelAddrs != "":
		return Sentinel
	}
	return Single
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

// Validate checks the fields (after Defaults): their tags (config.Check:
// Open takes a Config built in code), and what tags cannot say, the URL
// and the topology. Without a URL there is nothing to check.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	errs := []error{config.Check(&c)}
	opts, err := redis.ParseURL(c.URL)
	if err != nil {
		// The reason without the URL, which may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		errs = append(errs, fmt.Errorf("%s: not a valid Redis URL: %w", EnvURL, err))
	}
	errs = append(errs, c.validateTopology(opts)...)
	return errors.Join(errs...)
}

// validateTopology checks the Cluster and Sentinel settings; opts is the
// parsed URL (nil when it is not valid).
func (c Config) validateTopology(opts *redis.Options) []error {
	var errs []error
	if c.ClusterAddrs != "" && c.SentinelAddrs != "" {
		errs = append(errs, fmt.Errorf("%s and %s are both set: Redis is either a Cluster or watched by Sentinels", EnvClusterAddrs, EnvSentinelAddrs))
	}
	for _, v := range []struct{ name, list string }{{EnvClusterAddrs, c.ClusterAddrs}, {EnvSentinelAddrs, c.SentinelAddrs}} {
		if v.list == "" {
			continue
		}
		addrs := config.SplitList(v.list)
		if len(addrs) == 0 {
			errs = append(errs, fmt.Errorf("%s: no address in %q", v.name, v.list))
		}
		for _, a := range addrs {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				errs = append(errs, fmt.Errorf("%s: %q is not host:port", v.name, a))
			}
		}
	}
	switch c.Topology() {
	case Cluster:
		if opts != nil && opts.DB != 0 {
			errs = append(errs, fmt.Errorf("%s: database %d, but a Redis Cluster (%s) has only database 0", EnvURL, opts.DB, EnvClusterAddrs))
		}
		// A brace in the prefix would make it the hash tag of every key:
		// all keys in one slot, on one shard.
		if strings.ContainsAny(c.KeyPrefix, "{}") {
			errs = append(errs, fmt.Errorf("%s: %q has a brace, which would put every key in one Redis Cluster slot", EnvKeyPrefix, c.KeyPrefix))
		}
		if c.SentinelMaster != "" {
			errs = append(errs, fmt.Errorf("%s is set, but %s is not (Redis Cluster has no Sentinels)", EnvSentinelMaster, EnvSentinelAddrs))
		}
	case Sentinel:
		if c.SentinelMaster == "" {
			errs = append(errs, fmt.Errorf("%s is not set: it names the master the Sentinels of %s watch", EnvSentinelMaster, EnvSentinelAddrs))
		}
	default:
		if c.SentinelMaster != "" {
			errs = append(errs, fmt.Errorf("%s is set, but %s is not", EnvSentinelMaster, EnvSentinelAddrs))
		}
	}
	return errs
}

// Load reads the Redis settings through getenv, applies the defaults and
// validates them, reporting every bad variable at once. The tags are
// checked before Defaults, which would take a variable set to 0 for a
// request for the default.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	if err := config.Parse(getenv, &c); err != nil {
		return c, err
	}
	if c.URL = strings.TrimSpace(c.URL); c.URL == Disabled {
		c.URL = ""
		if c.ClusterAddrs != "" || c.SentinelAddrs != "" {
			return c, fmt.Errorf("%s is %s (no Redis), but %s or %s is set", EnvURL, Disabled, EnvClusterAddrs, EnvSentinelAddrs)
		}
	}
	c.Defaults()
	return c, c.Validate()
}
