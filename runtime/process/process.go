// Package process is the main of every component binary: configuration from
// the WEBHOOKS_* environment, a zap logger at WEBHOOKS_LOG_LEVEL, and
// shutdown on SIGINT or SIGTERM (a second signal exits at once).
package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// Main runs a component and exits: 2 for bad configuration, 1 when it
// failed, 0 after a clean shutdown.
func Main[C any](name string, load func(func(string) string) (C, error), run func(context.Context, C, *zap.Logger) error) {
	os.Exit(Run(name, os.Getenv, os.Stderr, load, run))
}

// Run is Main without the exit, for tests.
func Run[C any](name string, getenv func(string) string, stderr io.Writer,
	load func(func(string) string) (C, error), run func(context.Context, C, *zap.Logger) error) int {
	cfg, err := load(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: configuration: %v\n", name, err)
		return 2
	}
	level, err := zapcore.ParseLevel(getenv(config.EnvLogLevel))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", name, config.EnvLogLevel, err)
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
