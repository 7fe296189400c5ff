// Package process is the main of every component binary: configuration from
// the WEBHOOKS_* environment, a zap logger at WEBHOOKS_LOG_LEVEL, the
// garbage collector tuned for throughput (tuneGC), tracing
// from the OTEL_* environment (package tracing), and shutdown on SIGINT or
// SIGTERM (a second signal exits at once), after which the spans not yet
// exported are flushed.
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/hookpipe/hookpipe/runtime/version"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/tracing"
)

// flushTimeout bounds the export of the last spans after the component
// stopped: a collector that is down does not hold the exit.
const flushTimeout = 5 * time.Second

// gcPercent is the GOGC of the components unless the environment sets
// GOGC: the heap may grow to five times what is live before a collection,
// not twice. Their live heaps are small (records in flight, the tables) and
// allocation per delivery is steady, so Go's default of 100 collects many
// times a second under load; 400 cut the deliverer's CPU per delivery and
// raised the deployed benchmark's throughput (ADR 0024). Once the live heap
// is large (a million subscriptions), adaptGC lowers it (heapHeadroom).
const gcPercent = 400

// heapHeadroom is the most garbage the collector lets build up once the
// live heap is large: gcPercent of a heap holding a million subscriptions
// (about 900 MB) would let the process grow to 4.5 GB. Below 64 MiB live
// gcPercent applies; above, the percent falls to keep this headroom, but
// never below Go's default of 100.
const heapHeadroom = 256 << 20

// gcPercentFor is the GC percent for a live heap of live bytes.
func gcPercentFor(live, headroom uint64) int {
	if live == 0 {
		return gcPercent
	}
	return int(min(max(headroom*100/live, 100), gcPercent))
}

// adaptGC sets the GC percent for the live heap every interval until ctx
// is done (only when tuneGC set it: a GOGC in the environment is left
// alone).
func adaptGC(ctx context.Context, every time.Duration, headroom uint64) {
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	cur := gcPercent
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(live)
		if p := gcPercentFor(live[0].Value.Uint64(), headroom); p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
	}
}

// tuneGC sets the GOGC of the process to gcPercent unless getenv has GOGC,
// and its memory limit (GOMEMLIMIT, the point where the collector runs
// however little garbage there is) to 90 % of the container's memory limit
// unless the environment has GOMEMLIMIT, so the larger heap target never
// runs a container out of memory. It returns what it set: the GC percent
// (-1 when left to GOGC) and the limit (math.MaxInt64 when there is none).
func tuneGC(getenv func(string) string, limit memlimit.Provider) (int, int64, error) {
	percent := -1
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
		percent = gcPercent
	}
	n, err := memlimit.Set(memlimit.WithProvider(limit))
	return percent, n, err
}

// Settings are the variables of the process itself.
type Settings struct {
	LogLevel string `env:"WEBHOOKS_LOG_LEVEL" envDefault:"info" desc:"Log level: debug, info, warn or error (JSON logs on stderr)."`
	// CPUProfile profiles the process as deployed, where a benchmark's
	// -cpuprofile cannot reach: the profile covers the whole run and is
	// written when the component has stopped.
	CPUProfile string `env:"WEBHOOKS_CPU_PROFILE" desc:"Write a CPU profile (go tool pprof) of the whole run to this file when the process stops; empty: none."`
}

// Main runs a component and exits: 2 for bad configuration, 1 when it
// failed, 0 after a clean shutdown. With the argument --version it prints
// the component's name and version and exits 0; any other argument is an
// error (components take their configuration from the environment).
func Main[C any](name string, load func(func(string) string) (C, error), run func(context.Context, C, *zap.Logger) error) {
	if code, done := args(name, os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	os.Exit(Run(name, os.Getenv, os.Stderr, load, run))
}

// profile starts the CPU profile written to path; done stops and writes it.
func profile(path string) (done func(*zap.Logger), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOKS_CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func(log *zap.Logger) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Warn("CPU profile", zap.Error(err))
		}
	}, nil
}

// args handles the command line: --version, or nothing.
func args(name string, argv []string, stdout, stderr io.Writer) (code int, done bool) {
	switch {
	case len(argv) == 0:
		return 0, false
	case len(argv) == 1 && (argv[0] == "--version" || argv[0] == "-version"):
		fmt.Fprintf(stdout, "%s %s\n", name, version.Version)
		return 0, true
	}
	fmt.Fprintf(stderr, "%s: unexpected arguments %q: the only flag is --version; "+
		"configuration comes from WEBHOOKS_* environment variables (docs/configuration.md)\n", name, argv)
	return 2, true
}

// Run is Main without the exit, for tests.
func Run[C any](name string, getenv func(string) string, stderr io.Writer,
	load func(func(string) string) (C, error), run func(context.Context, C, *zap.Logger) error) int {
	cfg, err := load(getenv)
	var ps Settings
	perr := config.Parse(getenv, &ps)
	level, lerr := zapcore.ParseLevel(ps.LogLevel)
	if lerr != nil {
		lerr = fmt.Errorf("%s: %w", config.EnvLogLevel, lerr)
	}
	if err := errors.Join(err, perr, lerr); err != nil {
		fmt.Fprintf(stderr, "%s: configuration: %v\n", name, err)
		return 2
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(level)
	log, err := zc.Build()
	if err != nil {
		fmt.Fprintf(stderr, "%s: logger: %v\n", name, err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	percent, limit, err := tuneGC(getenv, memlimit.FromCgroup)
	gcTuned := percent > 0
	if err != nil && !errors.Is(err, memlimit.ErrNoCgroup) {
		log.Warn("memory limit: reading the container's limit failed; GOMEMLIMIT is not set", zap.Error(err))
	} else {
		log.Info("garbage collector", zap.Int("gc_percent", percent), zap.Int64("memory_limit_bytes", limit))
	}

	tp, err := tracing.Start(context.Background(), name, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: configuration: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if gcTuned {
		go adaptGC(ctx, time.Second, heapHeadroom)
	}
	if tp != nil {
		// The SDK reports failed exports here (a collector down), at most
		// once per batch.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", zap.Error(err)) }))
		defer func() {
			flush, cancel := context.WithTimeout(context.Background(), flushTimeout)
			defer cancel()
			if err := tp.Shutdown(flush); err != nil {
				log.Warn("tracing: flushing the last spans failed", zap.Error(err))
			}
		}()
		ctx = tracing.NewContext(ctx, tp)
		log.Info("tracing: exporting spans over OTLP/HTTP")
	}
	if ps.CPUProfile != "" {
		done, err := profile(ps.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: configuration: %v\n", name, err)
			return 2
		}
		defer done(log)
	}
	go func() {
		<-ctx.Done()
		// From now on the default action applies: a second signal kills
		// the process at once.
		stop()
	}()
	if err := run(ctx, cfg, log); err != nil {
		log.Error(name+" failed", zap.Error(err))
		return 1
	}
	return 0
}
