package recorder

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
)

// Config is the recorder's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka locates the brokers and topics (package runtime/kafka).
	Kafka kafka.Config `env:"-"`
	// Group is the consumer group.
	Group string `env:"WEBHOOKS_RECORDER_GROUP" envDefault:"webhooks-recorder" validate:"required" desc:"Consumer group of the recorders."`
	// Conn locates ClickHouse.
	schema.Conn
	// BatchRows is the most records one insert carries; one batch is
	// inserted while the next fills, and fetching pauses while a full batch
	// waits for ClickHouse. A row costs the server a third as much in
	// inserts of 20,000 as of 5,000 (BenchmarkClickHouseRows).
	BatchRows int `env:"WEBHOOKS_RECORDER_BATCH_ROWS" envDefault:"20000" validate:"min=1,max=1000000" desc:"Most records one insert carries."`
	// BatchWait is the longest a record waits for its batch to fill before
	// the batch is inserted anyway.
	BatchWait time.Duration `env:"WEBHOOKS_RECORDER_BATCH_WAIT" envDefault:"1s" validate:"gt=0" desc:"Longest a record waits for its batch to fill."`
	// InsertTimeout bounds one insert; a slower one counts as failed and is
	// retried.
	InsertTimeout time.Duration `env:"WEBHOOKS_RECORDER_INSERT_TIMEOUT" envDefault:"30s" validate:"gt=0" desc:"Bounds one insert; a slower one is retried."`
	// RetryMax caps the backoff between retries while ClickHouse is down
	// (the first retry is after 100ms).
	RetryMax time.Duration `env:"WEBHOOKS_RECORDER_RETRY_MAX" envDefault:"5s" validate:"min=100ms" desc:"Caps the backoff between inserts while ClickHouse is down."`
	// ShutdownTimeout bounds the last insert and commit on shutdown.
	ShutdownTimeout time.Duration `env:"WEBHOOKS_RECORDER_SHUTDOWN_TIMEOUT" envDefault:"10s" validate:"gt=0" desc:"Bounds the last insert and commit after SIGTERM."`
	// RetentionDays is how long rows are kept, as a TTL, on servers that
	// have TTL (20.1 and later); `webhookctl clickhouse expire` applies it
	// too, on every server, to the tenants without a retention of their
	// own. 0 leaves existing TTLs as they are.
	RetentionDays int `env:"WEBHOOKS_CLICKHOUSE_RETENTION_DAYS" envDefault:"90" validate:"min=0" desc:"Days rows are kept: the TTL on servers that have one (20.1+), and what webhookctl clickhouse expire applies to the tenants without retention_days of their own; 0 leaves TTLs as they are (and expire keeps those tenants' rows)."`
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops).
	HTTPAddr string `env:"WEBHOOKS_HTTP_ADDR" desc:"Address of /metrics, /healthz and /readyz; empty: not served."`
	// Pprof serves Go's profiles on HTTPAddr.
	Pprof bool `env:"WEBHOOKS_PPROF" desc:"Serve Go's profiles under /debug/pprof/ on WEBHOOKS_HTTP_ADDR (off by default; keep that port private)."`

	// observe, when set, is called after each poll is handled with the
	// records in hand and whether ClickHouse is down (tests).
	observe func(records int, down bool)
}

// validate checks what the tags cannot say (config.Parse checks them):
// the ClickHouse addresses and database, whose schema.Conn the API and
// webhookctl read too, each as leniently as it needs.
func (c *Config) validate() error {
	var errs []error
	if len(c.ClickHouse) == 0 {
		errs = append(errs, errors.New(schema.EnvClickHouseAddr+": no address"))
	}
	for _, a := range c.ClickHouse {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port", schema.EnvClickHouseAddr, a))
		}
	}
	if err := schema.ValidDatabase(c.Database); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", schema.EnvClickHouseDatabase, err))
	}
	return errors.Join(errs...)
}

// LoadConfig reads the configuration through getenv, reporting every bad
// variable at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	errs := []error{config.Parse(getenv, &c, schema.Parsers...)}
	var err error
	c.Kafka, err = kafka.Load(getenv)
	errs = append(errs, err, c.validate())
	return c, errors.Join(errs...)
}
