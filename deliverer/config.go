package deliverer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/hookpipe/hookpipe/deliverer/internal/ssrf"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// EnvAllowCIDRs lists the private ranges the SSRF guard lets deliveries
// reach (comma-separated CIDRs; none by default).
const EnvAllowCIDRs = "WEBHOOKS_ALLOW_CIDRS"

// Config is the deliverer's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka: WEBHOOKS_KAFKA_BROKERS, WEBHOOKS_TOPIC_PREFIX, WEBHOOKS_RETRY_TIERS.
	Kafka kafka.Config
	// Group is the consumer group: WEBHOOKS_DELIVERER_GROUP, default webhooks-deliverer.
	Group string
	// MaxInFlight caps concurrent HTTP requests of the process:
	// WEBHOOKS_DELIVERER_MAX_IN_FLIGHT, default 256.
	MaxInFlight int
	// MaxBuffered caps records held in memory (running, ready or waiting
	// behind their key); fetching pauses at the cap, and due retries from
	// the redeliveries topic take at most half of it:
	// WEBHOOKS_DELIVERER_MAX_BUFFERED, default 8192.
	MaxBuffered int
	// MaxPerSubscription caps concurrent requests to one subscription:
	// WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION, default 64.
	MaxPerSubscription int
	// MaxQueuedPerSubscription caps the records of one subscription held
	// here while it is slow (at the pace its requests run, it needs longer
	// than the shortest retry delay to finish what it holds); beyond it
	// they spill to the retry path unattempted, so a slow endpoint never
	// fills the buffer that other subscriptions share. A busy but
	// fast subscription keeps its records up to half of MaxBuffered:
	// WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION, default 1024.
	MaxQueuedPerSubscription int
	// RetryFloor is the shortest delay before retrying a 429 or a timeout:
	// WEBHOOKS_RETRY_FLOOR, default 60s.
	RetryFloor time.Duration
	// AllowCIDRs opens blocked address ranges (SSRF guard):
	// WEBHOOKS_ALLOW_CIDRS, default none.
	AllowCIDRs []netip.Prefix
	// Secrets seals and opens subscription secrets: WEBHOOKS_SECRETS_KEY
	// (see config.LoadKeyring), required unless WEBHOOKS_DEV=1, when nil
	// means plaintext secrets.
	Secrets *topics.Keyring
	// RequireHTTPS refuses http:// endpoints: WEBHOOKS_REQUIRE_HTTPS, default false.
	RequireHTTPS bool
	// CommitInterval is how often watermarks are committed:
	// WEBHOOKS_DELIVERER_COMMIT_INTERVAL, default 1s.
	CommitInterval time.Duration
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// SIGTERM: WEBHOOKS_SHUTDOWN_TIMEOUT, default 30s.
	ShutdownTimeout time.Duration
	// MaxResponseBytes is how much of a response body is read (then the
	// connection is dropped if more is left): default 64 KiB.
	MaxResponseBytes int64
	// ConnectTimeout bounds TCP connect plus TLS handshake:
	// WEBHOOKS_CONNECT_TIMEOUT, default 10s (never more than the
	// subscription's timeout, which bounds the whole attempt).
	ConnectTimeout time.Duration
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops):
	// WEBHOOKS_HTTP_ADDR, default empty (not served).
	HTTPAddr string
	// Protection: circuit breakers, rate limits and auto-disable through
	// Redis (see Protection for its variables).
	Protection Protection

	// dial, when set, replaces the Kafka clients' dialer, and transport,
	// when set, replaces the pooled HTTP transport (and with it the SSRF
	// guard): in-package tests use them to run over in-memory networks in a
	// testing/synctest bubble. No environment variable.
	dial      func(ctx context.Context, network, host string) (net.Conn, error)
	transport http.RoundTripper
}

func (c *Config) defaults() {
	c.Protection.defaults()
	c.Group = topics.GroupDeliverer
	c.MaxInFlight = 256
	c.MaxBuffered = 8192
	c.MaxPerSubscription = 64
	c.MaxQueuedPerSubscription = 1024
	c.RetryFloor = 60 * time.Second
	c.CommitInterval = time.Second
	c.ShutdownTimeout = 30 * time.Second
	c.MaxResponseBytes = 64 << 10
	c.ConnectTimeout = 10 * time.Second
}

func (c *Config) validate() error {
	var errs []error
	if c.MaxInFlight < 1 {
		errs = append(errs, errors.New("WEBHOOKS_DELIVERER_MAX_IN_FLIGHT must be at least 1"))
	}
	if c.MaxBuffered < c.MaxInFlight {
		errs = append(errs, errors.New("WEBHOOKS_DELIVERER_MAX_BUFFERED must be at least WEBHOOKS_DELIVERER_MAX_IN_FLIGHT"))
	}
	if c.MaxPerSubscription < 1 {
		errs = append(errs, errors.New("WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION must be at least 1"))
	}
	if c.MaxQueuedPerSubscription < c.MaxPerSubscription {
		errs = append(errs, errors.New("WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION must be at least WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION"))
	}
	if c.RetryFloor < 0 {
		errs = append(errs, errors.New("WEBHOOKS_RETRY_FLOOR must not be negative"))
	}
	if c.CommitInterval <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_DELIVERER_COMMIT_INTERVAL must be positive"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_SHUTDOWN_TIMEOUT must be positive"))
	}
	if c.ConnectTimeout <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_CONNECT_TIMEOUT must be positive"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("WEBHOOKS_DELIVERER_GROUP must not be empty"))
	}
	errs = append(errs, c.Protection.validate())
	return errors.Join(errs...)
}

// LoadConfig reads the configuration through getenv.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	c.defaults()
	k, err := kafka.Load(getenv)
	if err != nil {
		return c, err
	}
	c.Kafka = k
	r := config.NewEnvReader(getenv)
	r.String("WEBHOOKS_DELIVERER_GROUP", &c.Group)
	r.String(config.EnvHTTPAddr, &c.HTTPAddr)
	r.Int("WEBHOOKS_DELIVERER_MAX_IN_FLIGHT", &c.MaxInFlight)
	r.Int("WEBHOOKS_DELIVERER_MAX_BUFFERED", &c.MaxBuffered)
	r.Int("WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION", &c.MaxPerSubscription)
	r.Int("WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION", &c.MaxQueuedPerSubscription)
	r.Duration("WEBHOOKS_RETRY_FLOOR", &c.RetryFloor)
	r.Duration("WEBHOOKS_DELIVERER_COMMIT_INTERVAL", &c.CommitInterval)
	r.Duration("WEBHOOKS_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout)
	r.Duration("WEBHOOKS_CONNECT_TIMEOUT", &c.ConnectTimeout)
	r.Bool("WEBHOOKS_REQUIRE_HTTPS", &c.RequireHTTPS)
	errs := []error{r.Err()}
	if v := getenv(EnvAllowCIDRs); v != "" {
		p, err := ssrf.ParseCIDRs(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvAllowCIDRs, err))
		}
		c.AllowCIDRs = p
	}
	keys, err := config.LoadKeyring(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.Secrets = keys
	if err := c.Protection.load(getenv); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.validate()
}
