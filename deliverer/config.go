package deliverer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/topics"
)

// EnvAllowCIDRs lists the private ranges the SSRF guard lets deliveries
// reach (comma-separated CIDRs; none by default).
const EnvAllowCIDRs = send.EnvAllowCIDRs

// Config is the deliverer's configuration: LoadConfig reads it from the
// environment (the tags name each variable, its default and what it does;
// docs/configuration.md lists them).
type Config struct {
	// Kafka locates the brokers and topics (package runtime/kafka).
	Kafka kafka.Config `env:"-"`
	// Group is the consumer group.
	Group string `env:"WEBHOOKS_DELIVERER_GROUP" envDefault:"webhooks-deliverer" validate:"required" desc:"Consumer group of the deliverers."`
	// MaxInFlight caps concurrent HTTP requests of the process.
	MaxInFlight int `env:"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT" envDefault:"1024" validate:"min=1" desc:"Concurrent HTTP requests of one process, and the most records whose requests a crash of it repeats: a record holds its slot until a commit covers it."`
	// MaxBuffered caps records held in memory (running, ready or waiting
	// behind their key); fetching pauses at the cap, due retries from the
	// redeliveries topic take at most half of it, low-priority deliveries a
	// quarter.
	MaxBuffered int `env:"WEBHOOKS_DELIVERER_MAX_BUFFERED" envDefault:"8192" validate:"gtefield=MaxInFlight" desc:"Records held in memory; fetching pauses at the cap, due retries take at most half, low-priority deliveries a quarter."`
	// MaxPerSubscription caps concurrent requests to one subscription.
	MaxPerSubscription int `env:"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION" envDefault:"64" validate:"min=1" desc:"Concurrent requests to one subscription; a subscription spread over several partitions gets that share of it per partition, so its replicas together keep to it."`
	// MaxQueuedPerSubscription caps the records of one subscription held
	// here while it is slow (at the pace its requests run, it needs longer
	// than the shortest retry delay to finish what it holds); beyond it
	// they spill to the retry path unattempted, so a slow endpoint never
	// fills the buffer that other subscriptions share. A busy but
	// fast subscription keeps its records up to half of MaxBuffered.
	MaxQueuedPerSubscription int `env:"WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION" envDefault:"1024" validate:"gtefield=MaxPerSubscription" desc:"Records of one slow subscription held before the rest spill to the retry path unattempted."`
	// Notices publishes operational events (topics.Notice) to the events
	// topic: an endpoint failing, recovered or disabled, a delivery
	// dead-lettered.
	Notices bool `env:"WEBHOOKS_OPERATIONAL_EVENTS" envDefault:"true" desc:"Publish operational events to the events topic, in the subscription's tenant: webhook.endpoint.failing, .recovered, .disabled and webhook.message.dead (docs/design.md)."`
	// RetryFloor is the shortest delay before retrying a 429 or a timeout.
	RetryFloor time.Duration `env:"WEBHOOKS_RETRY_FLOOR" envDefault:"1m" validate:"min=0" desc:"Shortest delay before retrying a 429 or a timeout."`
	// Secrets seals and opens subscription secrets (config.LoadKeyring);
	// nil means plaintext secrets.
	Secrets *topics.Keyring `env:"-"`
	// CommitInterval is how often watermarks are committed.
	CommitInterval time.Duration `env:"WEBHOOKS_DELIVERER_COMMIT_INTERVAL" envDefault:"1s" validate:"gt=0" desc:"How often consumed offsets are committed, with the records finished above them, while few requests wait for a commit; when half the in-flight slots do, at once."`
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// SIGTERM.
	ShutdownTimeout time.Duration `env:"WEBHOOKS_SHUTDOWN_TIMEOUT" envDefault:"30s" validate:"gt=0" desc:"How long in-flight requests may finish after SIGTERM."`
	// MaxResponseBytes is how much of a response body is read (then the
	// connection is dropped if more is left); not read from the
	// environment, default 64 KiB.
	MaxResponseBytes int64
	// HTTP is how requests reach endpoints, shared with the API's
	// test-send (package runtime/send).
	send.HTTP
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops).
	HTTPAddr string `env:"WEBHOOKS_HTTP_ADDR" desc:"Address of /metrics, /healthz and /readyz; empty: not served."`
	// Pprof serves Go's profiles on HTTPAddr.
	Pprof bool `env:"WEBHOOKS_PPROF" desc:"Serve Go's profiles under /debug/pprof/ on WEBHOOKS_HTTP_ADDR (off by default; keep that port private)."`
	// Protection: circuit breakers, rate limits and auto-disable through
	// Redis.
	Protection Protection

	// dial, when set, replaces the Kafka clients' dialer, and transport,
	// when set, replaces the pooled HTTP transport (and with it the SSRF
	// guard): in-package tests use them to run over in-memory networks in a
	// testing/synctest bubble. No environment variable.
	dial      func(ctx context.Context, network, host string) (net.Conn, error)
	transport http.RoundTripper
}

// LoadConfig reads the configuration through getenv, reporting every bad
// variable at once: config.Parse checks the validate tags, Validate (of
// send.HTTP) the egress proxy.
func LoadConfig(getenv func(string) string) (Config, error) {
	c := Config{MaxResponseBytes: 64 << 10}
	errs := []error{config.Parse(getenv, &c, send.Parsers...)}
	var err error
	c.Kafka, err = kafka.Load(getenv)
	errs = append(errs, err)
	c.Protection.Redis, err = redisstate.Load(getenv)
	errs = append(errs, err)
	c.Secrets, err = config.LoadKeyring(getenv)
	errs = append(errs, err, c.Validate())
	return c, errors.Join(errs...)
}

// newSender is the sender of the deliveries the configuration c reads.
func newSender(c Config) *send.Sender {
	return send.New(c.HTTP, send.Options{MaxInFlight: c.MaxInFlight, MaxResponseBytes: c.MaxResponseBytes, Transport: c.transport})
}
