package recorder

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/recorder/internal/schema"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// Environment variables of the ClickHouse connection, shared with
// webhookctl (DESIGN.md section 3).
const (
	EnvClickHouseAddr     = "WEBHOOKS_CLICKHOUSE_ADDR"
	EnvClickHouseDatabase = "WEBHOOKS_CLICKHOUSE_DATABASE"
	EnvClickHouseUser     = "WEBHOOKS_CLICKHOUSE_USER"
	EnvClickHousePassword = "WEBHOOKS_CLICKHOUSE_PASSWORD"
)

// Config is the recorder's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka: WEBHOOKS_KAFKA_BROKERS, WEBHOOKS_TOPIC_PREFIX,
	// WEBHOOKS_KAFKA_SESSION_TIMEOUT.
	Kafka kafka.Config
	// Group is the consumer group: WEBHOOKS_RECORDER_GROUP, default
	// webhooks-recorder.
	Group string
	// ClickHouse is the native-protocol address (host:port, comma-separated
	// for several replicas): WEBHOOKS_CLICKHOUSE_ADDR, default 127.0.0.1:9000.
	ClickHouse []string
	// Database: WEBHOOKS_CLICKHOUSE_DATABASE, default webhooks. Letters,
	// digits and underscores.
	Database string
	// User and Password: WEBHOOKS_CLICKHOUSE_USER (default "default") and
	// WEBHOOKS_CLICKHOUSE_PASSWORD (default empty). The password is never
	// logged.
	User, Password string
	// BatchRows is the most records one insert carries; one batch is
	// inserted while the next fills, and fetching pauses while a full batch
	// waits for ClickHouse: WEBHOOKS_RECORDER_BATCH_ROWS, default 5000.
	BatchRows int
	// BatchWait is the longest a record waits for its batch to fill before
	// the batch is inserted anyway: WEBHOOKS_RECORDER_BATCH_WAIT, default 1s.
	BatchWait time.Duration
	// InsertTimeout bounds one insert; a slower one counts as failed and is
	// retried: WEBHOOKS_RECORDER_INSERT_TIMEOUT, default 30s.
	InsertTimeout time.Duration
	// RetryMax caps the backoff between retries while ClickHouse is down:
	// WEBHOOKS_RECORDER_RETRY_MAX, default 5s (the first retry is after 100ms).
	RetryMax time.Duration
	// ShutdownTimeout bounds the last insert and commit on shutdown:
	// WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT, default 10s.
	ShutdownTimeout time.Duration
	// RetentionDays is how long rows are kept, as a TTL, on servers that
	// have TTL (20.1 and later); on older ones run `webhookctl clickhouse
	// drop-partitions`. 0 leaves existing TTLs as they are:
	// WEBHOOKS_CLICKHOUSE_RETENTION_DAYS, default 90.
	RetentionDays int
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops):
	// WEBHOOKS_HTTP_ADDR, default empty (not served).
	HTTPAddr string

	// observe, when set, is called after each poll is handled with the
	// records in hand and whether ClickHouse is down (tests).
	observe func(records int, down bool)
}

func (c *Config) defaults() {
	c.Group = topics.GroupRecorder
	c.ClickHouse = []string{"127.0.0.1:9000"}
	c.Database = "webhooks"
	c.User = "default"
	c.BatchRows = 5000
	c.BatchWait = time.Second
	c.InsertTimeout = 30 * time.Second
	c.RetryMax = 5 * time.Second
	c.ShutdownTimeout = 10 * time.Second
	c.RetentionDays = 90
}

func (c *Config) validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("WEBHOOKS_RECORDER_GROUP must not be empty"))
	}
	if len(c.ClickHouse) == 0 {
		errs = append(errs, errors.New(EnvClickHouseAddr+": no address"))
	}
	for _, a := range c.ClickHouse {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port", EnvClickHouseAddr, a))
		}
	}
	if err := schema.ValidDatabase(c.Database); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvClickHouseDatabase, err))
	}
	if c.BatchRows < 1 || c.BatchRows > 1_000_000 {
		errs = append(errs, errors.New("WEBHOOKS_RECORDER_BATCH_ROWS must be between 1 and 1000000"))
	}
	if c.BatchWait <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_RECORDER_BATCH_WAIT must be positive"))
	}
	if c.InsertTimeout <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_RECORDER_INSERT_TIMEOUT must be positive"))
	}
	if c.RetryMax < 100*time.Millisecond {
		errs = append(errs, errors.New("WEBHOOKS_RECORDER_RETRY_MAX must be at least 100ms"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT must be positive"))
	}
	if c.RetentionDays < 0 {
		errs = append(errs, errors.New("WEBHOOKS_CLICKHOUSE_RETENTION_DAYS must not be negative"))
	}
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
	r.String("WEBHOOKS_RECORDER_GROUP", &c.Group)
	if v := getenv(EnvClickHouseAddr); v != "" {
		c.ClickHouse = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.ClickHouse = append(c.ClickHouse, a)
			}
		}
	}
	r.String(EnvClickHouseDatabase, &c.Database)
	r.String(EnvClickHouseUser, &c.User)
	r.String(EnvClickHousePassword, &c.Password)
	r.Int("WEBHOOKS_RECORDER_BATCH_ROWS", &c.BatchRows)
	r.Duration("WEBHOOKS_RECORDER_BATCH_WAIT", &c.BatchWait)
	r.Duration("WEBHOOKS_RECORDER_INSERT_TIMEOUT", &c.InsertTimeout)
	r.Duration("WEBHOOKS_RECORDER_RETRY_MAX", &c.RetryMax)
	r.Duration("WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout)
	r.Int("WEBHOOKS_CLICKHOUSE_RETENTION_DAYS", &c.RetentionDays)
	if err := r.Err(); err != nil {
		return c, err
	}
	return c, c.validate()
}
