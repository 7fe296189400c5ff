package retrier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
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
	var errs []error
	c.HTTPAddr = getenv(topics.EnvHTTPAddr)
	if v := getenv("WEBHOOKS_RETRIER_GROUP"); v != "" {
		c.Group = v
	}
	if v := getenv("WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION: %q is not an integer", v))
		}
		c.MaxHeldPerPartition = n
	}
	if v := getenv("WEBHOOKS_RETRIER_COMMIT_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOKS_RETRIER_COMMIT_INTERVAL: %q is not a duration", v))
		}
		c.CommitInterval = d
	}
	if v := getenv("WEBHOOKS_RECOVERY_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOKS_RECOVERY_RATE: %q is not a number", v))
		}
		c.RecoveryRate = f
	}
	if c.Redis, err = redisstate.Load(getenv); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.validate()
}
