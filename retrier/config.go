package retrier

import (
	"context"
	"errors"
	"math"
	"net"
	"time"

	"github.com/hookpipe/hookpipe/topics"
	"github.com/hookpipe/hookpipe/topics/redisstate"
)

// Config is the retrier's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka: WEBHOOKS_KAFKA_BROKERS, WEBHOOKS_TOPIC_PREFIX, WEBHOOKS_RETRY_TIERS,
	// WEBHOOKS_KAFKA_SESSION_TIMEOUT.
	Kafka topics.Kafka
	// Group is the consumer group: WEBHOOKS_RETRIER_GROUP, default webhooks-retrier.
	Group string
	// MaxHeldPerPartition bounds the records held from one tier partition
	// (the look-ahead window past a record not yet due); the partition's
	// fetching pauses at the bound: WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION,
	// default 2000.
	MaxHeldPerPartition int
	// MaxHeld bounds the records held by the process across all its tier
	// partitions; fetching pauses on every tier at the bound and resumes
	// below it: WEBHOOKS_RETRIER_MAX_HELD, default 100000.
	MaxHeld int
	// CommitInterval is how often released offsets are committed:
	// WEBHOOKS_RETRIER_COMMIT_INTERVAL, default 1s.
	CommitInterval time.Duration
	// HTTPAddr serves /metrics, /healthz and /readyz (package topics/ops):
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
	c.MaxHeldPerPartition = 2000
	c.MaxHeld = 100_000
	c.CommitInterval = time.Second
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
	if c.CommitInterval <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_RETRIER_COMMIT_INTERVAL must be positive"))
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
	k, err := topics.LoadKafka(getenv)
	if err != nil {
		return c, err
	}
	c.Kafka = k
	c.HTTPAddr = getenv(topics.EnvHTTPAddr)
	r := topics.NewEnvReader(getenv)
	r.String("WEBHOOKS_RETRIER_GROUP", &c.Group)
	r.Int("WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION", &c.MaxHeldPerPartition)
	r.Int("WEBHOOKS_RETRIER_MAX_HELD", &c.MaxHeld)
	r.Duration("WEBHOOKS_RETRIER_COMMIT_INTERVAL", &c.CommitInterval)
	r.Float("WEBHOOKS_RECOVERY_RATE", &c.RecoveryRate)
	c.Redis, err = redisstate.Load(getenv)
	if err = errors.Join(r.Err(), err); err != nil {
		return c, err
	}
	return c, c.validate()
}
