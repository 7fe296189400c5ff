package retrier

import (
	"context"
	"errors"
	"math"
	"net"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// Config is the retrier's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka: WEBHOOKS_KAFKA_BROKERS, WEBHOOKS_TOPIC_PREFIX, WEBHOOKS_RETRY_TIERS,
	// WEBHOOKS_KAFKA_SESSION_TIMEOUT.
	Kafka kafka.Config
	// Group is the consumer group: WEBHOOKS_RETRIER_GROUP, default webhooks-retrier.
	Group string
	// MaxHeldPerPartition bounds the records held from one tier partition
	// (the look-ahead window past a record not yet due); the partition's
	// fetching pauses at the bound: WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION,
	// default 20000. Memory is bounded by MaxHeld and MaxHeldMB; a large
	// window lets a busy partition hold its whole spread of due times, so
	// nothing behind it comes out late (see the README).
	MaxHeldPerPartition int
	// MaxHeld bounds the records held by the process across all its tier
	// partitions: WEBHOOKS_RETRIER_MAX_HELD, default 100000. At the bound
	// (or MaxHeldMB) a partition holding its share of the bound or more
	// pauses; the others go on fetching, so a partition full of records
	// not yet due does not hold back the due records of the others.
	MaxHeld int
	// MaxHeldMB bounds the bytes (keys and values) of the records held by
	// the process, in MiB, as MaxHeld bounds their number (a delivery
	// carries its event, up to 256 KiB): WEBHOOKS_RETRIER_MAX_HELD_MB,
	// default 256.
	MaxHeldMB int
	// CommitInterval is how often released offsets are committed:
	// WEBHOOKS_RETRIER_COMMIT_INTERVAL, default 1s.
	CommitInterval time.Duration
	// ShutdownTimeout is how long a release in progress when SIGTERM comes
	// may still finish, so that what reached the broker is committed
	// rather than released again by the partition's next owner:
	// WEBHOOKS_SHUTDOWN_TIMEOUT, default 10s.
	ShutdownTimeout time.Duration
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops):
	// WEBHOOKS_HTTP_ADDR, default empty (not served).
	HTTPAddr string
	// Redis holds the recovery marks of subscriptions whose breaker closed:
	// WEBHOOKS_REDIS_URL and the other variables of package redisstate;
	// "-" (or an empty URL) means no recovery acceleration.
	Redis redisstate.Config
	// RecoveryRate is how many retries of a recovered subscription are
	// released early per second (recovery.go): WEBHOOKS_RECOVERY_RATE,
	// default 10; 0 turns acceleration off.
	RecoveryRate float64

	// dial, when set, replaces the Kafka client's dialer: tests use it to
	// run the retrier over kfake's virtual network under testing/synctest.
	dial func(ctx context.Context, network, host string) (net.Conn, error)
}

func (c *Config) defaults() {
	c.Group = topics.GroupRetrier
	c.MaxHeldPerPartition = 20000
	c.MaxHeld = 100_000
	c.MaxHeldMB = 256
	c.CommitInterval = time.Second
	c.ShutdownTimeout = 10 * time.Second
	c.RecoveryRate = 10
}

func (c *Config) validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("WEBHOOKS_RETRIER_GROUP must not be empty"))
	}
	if c.MaxHeldPerPartition < 1 {
		errs = append(errs, errors.New("WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION must be at least 1"))
	}
	if c.MaxHeld < c.MaxHeldPerPartition {
		errs = append(errs, errors.New("WEBHOOKS_RETRIER_MAX_HELD must be at least WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION"))
	}
	if c.MaxHeldMB < 1 {
		errs = append(errs, errors.New("WEBHOOKS_RETRIER_MAX_HELD_MB must be at least 1"))
	}
	if c.CommitInterval <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_RETRIER_COMMIT_INTERVAL must be positive"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_SHUTDOWN_TIMEOUT must be positive"))
	}
	if c.RecoveryRate < 0 || math.IsNaN(c.RecoveryRate) || math.IsInf(c.RecoveryRate, 0) {
		errs = append(errs, errors.New("WEBHOOKS_RECOVERY_RATE must be a finite number, not negative"))
	}
	errs = append(errs, c.Redis.Validate())
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
	c.HTTPAddr = getenv(config.EnvHTTPAddr)
	r := config.NewEnvReader(getenv)
	r.String("WEBHOOKS_RETRIER_GROUP", &c.Group)
	r.Int("WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION", &c.MaxHeldPerPartition)
	r.Int("WEBHOOKS_RETRIER_MAX_HELD", &c.MaxHeld)
	r.Int("WEBHOOKS_RETRIER_MAX_HELD_MB", &c.MaxHeldMB)
	r.Duration("WEBHOOKS_RETRIER_COMMIT_INTERVAL", &c.CommitInterval)
	r.Duration("WEBHOOKS_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout)
	r.Float("WEBHOOKS_RECOVERY_RATE", &c.RecoveryRate)
	c.Redis, err = redisstate.Load(getenv)
	if err = errors.Join(r.Err(), err); err != nil {
		return c, err
	}
	return c, c.validate()
}
