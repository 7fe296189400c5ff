package recorder

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
)

// Environment variables of the ClickHouse connection, shared with
// webhookctl (docs/configuration.md).
const (
	EnvClickHouseAddr     = "WEBHOOKS_CLICKHOUSE_ADDR"
	EnvClickHouseDatabase = "WEBHOOKS_CLICKHOUSE_DATABASE"
	EnvClickHouseUser     = "WEBHOOKS_CLICKHOUSE_USER"
	EnvClickHousePassword = "WEBHOOKS_CLICKHOUSE_PASSWORD"
	// EnvRetentionDays is the default retention of attempts, in days: the
	// TTL where the server has TTL, and what webhookctl clickhouse expire
	// applies to tenants without an override of their own.
	EnvRetentionDays = "WEBHOOKS_CLICKHOUSE_RETENTION_DAYS"
)

// Defaults of the ClickHouse connection (the Config tags say the same).
const (
	DefaultClickHouseAddr = "127.0.0.1:9000"
	DefaultDatabase       = "webhooks"
)

// Conn locates ClickHouse: the recorder writes there, the API and
// webhookctl read.
type Conn struct {
	// ClickHouse is the native-protocol address (host:port, comma-separated
	// for several replicas).
	ClickHouse []string `env:"WEBHOOKS_CLICKHOUSE_ADDR" envDefault:"127.0.0.1:9000" desc:"ClickHouse native-protocol addresses, host:port, comma-separated for replicas."`
	// Database holds the tables: letters, digits and underscores.
	Database string `env:"WEBHOOKS_CLICKHOUSE_DATABASE" envDefault:"webhooks" desc:"ClickHouse database of the tables (letters, digits, underscores)."`
	// User and Password authenticate; the password is never logged.
	User     string `env:"WEBHOOKS_CLICKHOUSE_USER" envDefault:"default" desc:"ClickHouse user."`
	Password string `env:"WEBHOOKS_CLICKHOUSE_PASSWORD" desc:"ClickHouse password (never logged)."`
}

// Parsers read the fields of Conn that runtime/config does not know (the
// address list), for config.Parse.
var Parsers = []config.Parser{config.ParserFor(func(v string) ([]string, error) { return config.SplitList(v), nil })}

// Open connects to ClickHouse over the native protocol; readTimeout bounds
// every query.
func (c Conn) Open(readTimeout time.Duration) (driver.Conn, error) {
	ch, err := clickhouse.Open(&clickhouse.Options{
		Addr:        c.ClickHouse,
		Protocol:    clickhouse.Native,
		Auth:        clickhouse.Auth{Username: c.User, Password: c.Password},
		DialTimeout: 5 * time.Second,
		ReadTimeout: readTimeout,
		// LZ4 on the native protocol: fewer bytes on the wire, and no
		// more CPU on either side (BenchmarkClickHouseRows).
		Compression:     &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
		MaxOpenConns:    4,
		MaxIdleConns:    2,
		ConnMaxLifetime: 10 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	return ch, nil
}

// Config is the recorder's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka locates the brokers and topics (package runtime/kafka).
	Kafka kafka.Config `env:"-"`
	// Group is the consumer group.
	Group string `env:"WEBHOOKS_RECORDER_GROUP" envDefault:"webhooks-recorder" desc:"Consumer group of the recorders."`
	// Conn locates ClickHouse.
	Conn
	// BatchRows is the most records one insert carries; one batch is
	// inserted while the next fills, and fetching pauses while a full batch
	// waits for ClickHouse. A row costs the server a third as much in
	// inserts of 20,000 as of 5,000 (BenchmarkClickHouseRows).
	BatchRows int `env:"WEBHOOKS_RECORDER_BATCH_ROWS" envDefault:"20000" desc:"Most records one insert carries (1..1000000)."`
	// BatchWait is the longest a record waits for its batch to fill before
	// the batch is inserted anyway.
	BatchWait time.Duration `env:"WEBHOOKS_RECORDER_BATCH_WAIT" envDefault:"1s" desc:"Longest a record waits for its batch to fill."`
	// InsertTimeout bounds one insert; a slower one counts as failed and is
	// retried.
	InsertTimeout time.Duration `env:"WEBHOOKS_RECORDER_INSERT_TIMEOUT" envDefault:"30s" desc:"Bounds one insert; a slower one is retried."`
	// RetryMax caps the backoff between retries while ClickHouse is down
	// (the first retry is after 100ms).
	RetryMax time.Duration `env:"WEBHOOKS_RECORDER_RETRY_MAX" envDefault:"5s" desc:"Caps the backoff between inserts while ClickHouse is down (at least 100ms)."`
	// ShutdownTimeout bounds the last insert and commit on shutdown.
	ShutdownTimeout time.Duration `env:"WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT" envDefault:"10s" desc:"Bounds the last insert and commit after SIGTERM."`
	// RetentionDays is how long rows are kept, as a TTL, on servers that
	// have TTL (20.1 and later); `webhookctl clickhouse expire` applies it
	// too, on every server, to the tenants without a retention of their
	// own. 0 leaves existing TTLs as they are.
	RetentionDays int `env:"WEBHOOKS_CLICKHOUSE_RETENTION_DAYS" envDefault:"90" desc:"Days rows are kept: the TTL on servers that have one (20.1+), and what webhookctl clickhouse expire applies to the tenants without retention_days of their own; 0 leaves TTLs as they are (and expire keeps those tenants' rows)."`
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops).
	HTTPAddr string `env:"WEBHOOKS_HTTP_ADDR" desc:"Address of /metrics, /healthz and /readyz; empty: not served."`
	// Pprof serves Go's profiles on HTTPAddr.
	Pprof bool `env:"WEBHOOKS_PPROF" desc:"Serve Go's profiles under /debug/pprof/ on WEBHOOKS_HTTP_ADDR (off by default; keep that port private)."`

	// observe, when set, is called after each poll is handled with the
	// records in hand and whether ClickHouse is down (tests).
	observe func(records int, down bool)
}

func (c *Config) validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, fmt.Errorf("%s must not be empty", config.Name(c, &c.Group)))
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
		errs = append(errs, fmt.Errorf("%s must be between 1 and 1000000", config.Name(c, &c.BatchRows)))
	}
	if c.BatchWait <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", config.Name(c, &c.BatchWait)))
	}
	if c.InsertTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", config.Name(c, &c.InsertTimeout)))
	}
	if c.RetryMax < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("%s must be at least 100ms", config.Name(c, &c.RetryMax)))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", config.Name(c, &c.ShutdownTimeout)))
	}
	if c.RetentionDays < 0 {
		errs = append(errs, fmt.Errorf("%s must not be negative", config.Name(c, &c.RetentionDays)))
	}
	return errors.Join(errs...)
}

// LoadConfig reads the configuration through getenv, reporting every bad
// variable at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	errs := []error{config.Parse(getenv, &c, Parsers...)}
	var err error
	c.Kafka, err = kafka.Load(getenv)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.validate()
}
