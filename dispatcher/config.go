package dispatcher

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// Environment variables read by the dispatcher only; the shared ones are in
// package topics.
const (
	EnvTxnID         = "WEBHOOKS_DISPATCHER_TXN_ID"
	EnvMaxEventBytes = "WEBHOOKS_MAX_EVENT_BYTES"
	// EnvDedupWindow is how long an idempotency key is remembered.
	EnvDedupWindow = "WEBHOOKS_DEDUP_WINDOW"
	// EnvShutdownTimeout is the shutdown budget shared by every component.
	EnvShutdownTimeout = "WEBHOOKS_SHUTDOWN_TIMEOUT"
)

// maxRecordData bounds the bytes one produced record copies from an event:
// a delivery's data and a dead letter's raw event. Both travel base64
// encoded, so 512 KiB grows to about 683 KiB, under Kafka's default
// max.message.bytes of 1,000,012.
const maxRecordData = 512 << 10

// Config is the dispatcher's configuration. The zero value of a field means
// its default.
type Config struct {
	// Kafka locates the brokers and topics and sets the group session
	// timeout: WEBHOOKS_KAFKA_BROKERS (default 127.0.0.1:9092),
	// WEBHOOKS_TOPIC_PREFIX (default "webhooks.") and
	// WEBHOOKS_KAFKA_SESSION_TIMEOUT (default 45s), read by
	// kafka.Load. Brokers are required.
	Kafka kafka.Config
	// Group is the consumer group on the events topic. Not read from the
	// environment; default topics.GroupDispatcher.
	Group string
	// TransactionalID identifies this process's transactional producer:
	// WEBHOOKS_DISPATCHER_TXN_ID, default "webhooks-dispatcher-<hostname>-<random>".
	// Two dispatchers running at once must not share one: the newer fences
	// the older, which then stops with an error.
	TransactionalID string
	// MaxEventBytes is the largest event value dispatched; larger ones are
	// dead-lettered: WEBHOOKS_MAX_EVENT_BYTES, default
	// topics.DefaultMaxEventBytes (256 KiB), at most 512 KiB.
	MaxEventBytes int
	// Secrets opens the sealed secrets of subscription records:
	// WEBHOOKS_SECRETS_KEY (see config.LoadKeyring), required unless
	// WEBHOOKS_DEV=1, when nil means plaintext secrets.
	Secrets *topics.Keyring
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops):
	// WEBHOOKS_HTTP_ADDR, default empty (not served).
	HTTPAddr string
	// Redis holds the idempotency keys of event dedup: WEBHOOKS_REDIS_URL
	// and the other variables of package redisstate, read by LoadConfig;
	// an empty URL (or "-" in the environment) means no dedup.
	Redis redisstate.Config
	// DedupWindow is how long an idempotency key is remembered:
	// WEBHOOKS_DEDUP_WINDOW, default 24h.
	DedupWindow time.Duration
	// TransactionTimeout is how long the broker lets a transaction stay
	// open before aborting it, which bounds how long a crashed dispatcher
	// holds back read-committed consumers of its partitions. Not read from
	// the environment; default 10s.
	TransactionTimeout time.Duration
	// StartupTimeout is how long Run waits for the brokers and topics
	// before giving up. Not read from the environment; default 30s.
	StartupTimeout time.Duration
	// ShutdownTimeout is how long Run, once its context is done, keeps
	// finishing the transaction in progress before abandoning it to the
	// broker's transaction timeout: WEBHOOKS_SHUTDOWN_TIMEOUT, default 10s.
	ShutdownTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Group == "" {
		c.Group = topics.GroupDispatcher
	}
	if c.TransactionalID == "" {
		c.TransactionalID = defaultTransactionalID()
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = topics.DefaultMaxEventBytes
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 10 * time.Second
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = 30 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 24 * time.Hour
	}
	c.Redis.Defaults()
}

func (c *Config) validate() error {
	if len(c.Kafka.Brokers) == 0 {
		return fmt.Errorf("%s: no broker address", kafka.EnvBrokers)
	}
	if c.MaxEventBytes < 0 || c.MaxEventBytes > maxRecordData {
		return fmt.Errorf("%s: %d is not within 1..%d", EnvMaxEventBytes, c.MaxEventBytes, maxRecordData)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"transaction timeout", c.TransactionTimeout},
		{"startup timeout", c.StartupTimeout},
		{"shutdown timeout", c.ShutdownTimeout},
		{EnvDedupWindow, c.DedupWindow},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s %v: must not be negative", d.name, d.v)
		}
	}
	return c.Redis.Validate()
}

// LoadConfig reads the configuration through getenv, applies the defaults
// and validates it. Errors name the offending variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	k, err := kafka.Load(getenv)
	if err != nil {
		return Config{}, err
	}
	c := Config{Kafka: k, TransactionalID: getenv(EnvTxnID), HTTPAddr: getenv(config.EnvHTTPAddr)}
	if c.Redis, err = redisstate.Load(getenv); err != nil {
		return Config{}, err
	}
	if v := getenv(EnvDedupWindow); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond {
			return Config{}, fmt.Errorf("%s: %q is not a duration of at least 1ms", EnvDedupWindow, v)
		}
		c.DedupWindow = d
	}
	if v := getenv(EnvShutdownTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%s: %q is not a positive duration", EnvShutdownTimeout, v)
		}
		c.ShutdownTimeout = d
	}
	if v := getenv(EnvMaxEventBytes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Config{}, fmt.Errorf("%s: %q is not a positive number of bytes", EnvMaxEventBytes, v)
		}
		c.MaxEventBytes = n
	}
	c.defaults()
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	if c.Secrets, err = config.LoadKeyring(getenv); err != nil {
		return Config{}, err
	}
	return c, nil
}

// defaultTransactionalID is unique per call: the hostname says where a
// transaction came from, the random suffix keeps two processes on one host
// (or one pod restarted quickly) from fencing each other.
func defaultTransactionalID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 4)
	rand.Read(b) // never returns an error since Go 1.24
	return "webhooks-dispatcher-" + host + "-" + hex.EncodeToString(b)
}
