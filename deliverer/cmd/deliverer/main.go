// Command deliverer POSTs delivery records to subscribers' endpoints.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookpipe/hookpipe/deliverer"
)

func main() {
	cfg, err := deliverer.LoadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "deliverer: configuration:", err)
		os.Exit(2)
	}
	level, err := zapcore.ParseLevel(os.Getenv("WEBHOOKS_LOG_LEVEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "deliverer: WEBHOOKS_LOG_LEVEL:", err)
		os.Exit(2)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(level)
	log, err := zc.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "deliverer: logger:", err)
		os.Exit(2)
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now kills the process at once
	}()
	if err := deliverer.Run(ctx, cfg, log); err != nil {
		log.Error("deliverer failed", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
}
