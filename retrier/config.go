package retrier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hookpipe/hookpipe/topics"
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

	// dial, when set, replaces the Kafka client's dialer: tests use it to
	// run the retrier over kfake's virtual network under testing/synctest.
	dial func(ctx context.Context, network, host string) (net.Conn, error)
}

func (c *Config) defaults() {
	c.Group = topics.GroupRetrier
	c.MaxHeldPerPartition = 2000
	c.CommitInterval = time.Second
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
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.validate()
}
