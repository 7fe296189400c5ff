package retrier

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
)

// Config is the retrier's configuration. Every field says its environment
// variable and default.
type Config struct {
	// Kafka locates the brokers and topics (package runtime/kafka).
	Kafka kafka.Config `env:"-"`
	// Group is the consumer group.
	Group string `env:"WEBHOOKS_RETRIER_GROUP" envDefault:"webhooks-retrier" validate:"required" desc:"Consumer group of the retriers."`
	// MaxHeldPerPartition bounds the records held from one tier partition
	// (the look-ahead window past a record not yet due); the partition's
	// fetching pauses at the bound. Memory is bounded by MaxHeld and
	// MaxHeldMB; a large window lets a busy partition hold its whole spread
	// of due times, so nothing behind it comes out late.
	MaxHeldPerPartition int `env:"WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION" envDefault:"20000" validate:"min=1" desc:"Look-ahead window: records held from one tier partition past one not yet due; the partition pauses at it."`
	// MaxHeld bounds the records held by the process across all its tier
	// partitions. At the bound (or MaxHeldMB) a partition holding its share
	// of the bound or more pauses; the others go on fetching, so a partition
	// full of records not yet due does not hold back the due records of the
	// others.
	MaxHeld int `env:"WEBHOOKS_RETRIER_MAX_HELD" envDefault:"100000" validate:"gtefield=MaxHeldPerPartition" desc:"Records held by the process across its tier partitions."`
	// MaxHeldMB bounds the bytes (keys and values) of the records held by
	// the process, in MiB, as MaxHeld bounds their number (a delivery
	// carries its event, up to 256 KiB).
	MaxHeldMB int `env:"WEBHOOKS_RETRIER_MAX_HELD_MB" envDefault:"256" validate:"min=1" desc:"MiB of records held by the process."`
	// CommitInterval is how often offsets are committed while nothing is
	// released; a release is committed as soon as it is acknowledged.
	CommitInterval time.Duration `env:"WEBHOOKS_RETRIER_COMMIT_INTERVAL" envDefault:"1s" validate:"gt=0" desc:"How often consumed offsets are committed while nothing is released; a release is committed as soon as the broker acknowledged it."`
	// ShutdownTimeout is how long a release in progress when SIGTERM comes
	// may still finish, so that what reached the broker is committed
	// rather than released again by the partition's next owner.
	ShutdownTimeout time.Duration `env:"WEBHOOKS_SHUTDOWN_TIMEOUT" envDefault:"10s" validate:"gt=0" desc:"How long a release in progress may finish after SIGTERM."`
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops).
	HTTPAddr string `env:"WEBHOOKS_HTTP_ADDR" desc:"Address of /metrics, /healthz and /readyz; empty: not served."`
	// Pprof serves Go's profiles on HTTPAddr.
	Pprof bool `env:"WEBHOOKS_PPROF" desc:"Serve Go's profiles under /debug/pprof/ on WEBHOOKS_HTTP_ADDR (off by default; keep that port private)."`
	// Redis holds the recovery marks of subscriptions whose breaker closed
	// (package redisstate); an empty URL means no recovery acceleration.
	Redis redisstate.Config `env:"-"`
	// RecoveryRate is how many retries of a recovered subscription are
	// released early per second (recovery.go); 0 turns acceleration off.
	RecoveryRate float64 `env:"WEBHOOKS_RECOVERY_RATE" envDefault:"10" validate:"finite,min=0" desc:"Retries of a recovered subscription released early per second (0: off)."`
	// RecoveryRamp is how long the early releases take to grow from a
	// tenth of RecoveryRate to all of it (recovery.go); 0 starts at all of
	// it.
	RecoveryRamp time.Duration `env:"WEBHOOKS_RECOVERY_RAMP" envDefault:"5m" validate:"min=0" desc:"How long early releases of a recovered subscription take to grow from a tenth of WEBHOOKS_RECOVERY_RATE to all of it; they halve and grow again when the endpoint fails anew (0: the full rate at once, and a minute to grow back after new failures)."`

	// dial, when set, replaces the Kafka client's dialer: tests use it to
	// run the retrier over kfake's virtual network under testing/synctest.
	dial func(ctx context.Context, network, host string) (net.Conn, error)
}

// LoadConfig reads the configuration through getenv, reporting every bad
// variable at once; config.Parse checks the validate tags.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	errs := []error{config.Parse(getenv, &c)}
	var err error
	c.Kafka, err = kafka.Load(getenv)
	errs = append(errs, err)
	c.Redis, err = redisstate.Load(getenv)
	errs = append(errs, err)
	return c, errors.Join(errs...)
}
