package dispatcher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// Environment variables read by the dispatcher only; the shared ones are in
// package runtime/kafka and runtime/config.
const (
	EnvTxnID         = "WEBHOOKS_DISPATCHER_TXN_ID"
	EnvMaxEventBytes = "WEBHOOKS_MAX_EVENT_BYTES"
	// EnvDedupWindow is how long an idempotency key is remembered.
	EnvDedupWindow = "WEBHOOKS_DEDUP_WINDOW"
	// EnvUnknownEventTypes says what to do with events of types not in
	// the catalog.
	EnvUnknownEventTypes = "WEBHOOKS_UNKNOWN_EVENT_TYPES"
	// EnvShutdownTimeout is the shutdown budget shared by every component.
	EnvShutdownTimeout = "WEBHOOKS_SHUTDOWN_TIMEOUT"
)

// maxRecordData bounds the bytes one produced record copies from an event:
// a delivery's data and a dead letter's raw event. Both travel base64
// encoded, so 512 KiB grows to about 683 KiB, under Kafka's default
// max.message.bytes of 1,000,012.
const maxRecordData = 512 << 10

// Config is the dispatcher's configuration: LoadConfig reads it from the
// environment (the tags name each variable, its default and what it does;
// docs/configuration.md lists them). In a Config built in code, the zero
// value of a field means its default.
type Config struct {
	// Kafka locates the brokers and topics (package runtime/kafka).
	Kafka kafka.Config `env:"-"`
	// Group is the consumer group on the events topic.
	Group string `env:"WEBHOOKS_DISPATCHER_GROUP" envDefault:"webhooks-dispatcher" desc:"Consumer group of the dispatchers."`
	// TransactionalID identifies this process's transactional producer.
	// Two dispatchers running at once must not share one: the newer fences
	// the older, which then stops with an error.
	TransactionalID string `env:"WEBHOOKS_DISPATCHER_TXN_ID" desc:"Transactional id of this process; unique per process (default webhooks-dispatcher-<hostname>-<random>)."`
	// MaxEventBytes is the largest event value dispatched; larger ones are
	// dead-lettered. At most maxRecordData.
	MaxEventBytes int `env:"WEBHOOKS_MAX_EVENT_BYTES" envDefault:"262144" validate:"min=1,max=524288" desc:"Largest event value dispatched; larger ones are dead-lettered."`
	// Secrets opens the sealed secrets of subscription records
	// (config.LoadKeyring); nil means plaintext secrets.
	Secrets *topics.Keyring `env:"-"`
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops).
	HTTPAddr string `env:"WEBHOOKS_HTTP_ADDR" desc:"Address of /metrics, /healthz and /readyz; empty: not served."`
	// Pprof serves Go's profiles on HTTPAddr.
	Pprof bool `env:"WEBHOOKS_PPROF" desc:"Serve Go's profiles under /debug/pprof/ on WEBHOOKS_HTTP_ADDR (off by default; keep that port private)."`
	// UnknownEventTypes is what happens to an event whose type is not in
	// the event catalog (package runtime/catalog).
	UnknownEventTypes string `env:"WEBHOOKS_UNKNOWN_EVENT_TYPES" envDefault:"accept" validate:"oneof=accept warn reject" desc:"An event whose type is not in the event catalog: accept (deliver it), warn (deliver it and count it as unknown) or reject (dead-letter it with category schema)."`
	// Redis holds the idempotency keys of event dedup (package
	// redisstate); an empty URL means no dedup.
	Redis redisstate.Config `env:"-"`
	// DedupWindow is how long an idempotency key is remembered.
	DedupWindow time.Duration `env:"WEBHOOKS_DEDUP_WINDOW" envDefault:"24h" validate:"min=1ms" desc:"How long an event's idempotency key is remembered."`
	// FetchMinBytes and FetchMaxWait are the events consumer's
	// fetch.min.bytes and fetch.max.wait.ms: a fetch is answered once
	// FetchMinBytes of events wait, or after FetchMaxWait. Each batch of
	// events fetched is dispatched in one transaction, whose requests cost
	// the same whatever its size: a broker that holds fetches until a few
	// milliseconds of events gathered makes fewer, larger transactions at a
	// steady rate, for that much latency at a low one and a fetch every
	// FetchMaxWait when idle (docs/operations.md, "Batching at the
	// dispatcher").
	FetchMinBytes int32         `env:"WEBHOOKS_DISPATCHER_FETCH_MIN_BYTES" envDefault:"1" validate:"min=1" desc:"The broker answers the dispatcher's fetch once this many bytes of events wait (fetch.min.bytes), or after WEBHOOKS_DISPATCHER_FETCH_MAX_WAIT."`
	FetchMaxWait  time.Duration `env:"WEBHOOKS_DISPATCHER_FETCH_MAX_WAIT" envDefault:"1s" validate:"min=10ms" desc:"The longest the broker holds the dispatcher's fetch (fetch.max.wait.ms): with fewer than WEBHOOKS_DISPATCHER_FETCH_MIN_BYTES waiting, the latency added; when idle, the time between two fetches."`
	// TransactionTimeout is how long the broker lets a transaction stay
	// open before aborting it, which bounds how long a crashed dispatcher
	// holds back read-committed consumers of its partitions. Not read from
	// the environment; default 10s.
	TransactionTimeout time.Duration
	// ShutdownTimeout is how long Run, once its context is done, keeps
	// finishing the transaction in progress before abandoning it to the
	// broker's transaction timeout.
	ShutdownTimeout time.Duration `env:"WEBHOOKS_SHUTDOWN_TIMEOUT" envDefault:"10s" validate:"gt=0" desc:"How long the transaction in progress may finish after SIGTERM."`
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
	if c.Kafka.StartupTimeout == 0 {
		c.Kafka.StartupTimeout = kafka.DefaultStartupTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.FetchMinBytes == 0 {
		c.FetchMinBytes = 1
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = time.Second
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 24 * time.Hour
	}
	if c.UnknownEventTypes == "" {
		c.UnknownEventTypes = catalog.UnknownAccept
	}
	c.Redis.Defaults()
}

// validate checks the Config Run is given (after defaults), which tests
// build in code: its validate tags (config.Check), and what LoadConfig
// leaves to kafka.Load and redisstate.Load (brokers, Redis).
func (c *Config) validate() error {
	errs := []error{config.Check(c)}
	if len(c.Kafka.Brokers) == 0 {
		errs = append(errs, fmt.Errorf("%s: no broker address", kafka.EnvBrokers))
	}
	if c.TransactionTimeout < 0 {
		errs = append(errs, fmt.Errorf("transaction timeout %v: must not be negative", c.TransactionTimeout))
	}
	return errors.Join(append(errs, c.Redis.Validate())...)
}

// LoadConfig reads the configuration through getenv, applies the defaults
// and validates it (config.Parse checks the validate tags). Every bad
// variable is reported at once, each error naming its variable.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	errs := []error{config.Parse(getenv, &c)}
	var err error
	c.Kafka, err = kafka.Load(getenv)
	errs = append(errs, err)
	c.Redis, err = redisstate.Load(getenv)
	errs = append(errs, err)
	c.Secrets, err = config.LoadKeyring(getenv)
	errs = append(errs, err)
	// Checked before the defaults fill zero fields: a variable set to 0
	// is an error, not a request for the default.
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	c.defaults()
	return c, nil
}

// txnIDPrefix begins every default transactional id: the dispatcher ends
// transactions of producers with such ids left open by a broker (ADR 0045).
const txnIDPrefix = "webhooks-dispatcher-"

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
	return txnIDPrefix + host + "-" + hex.EncodeToString(b)
}
