// Command retrier releases due retries from the retry tiers to the deliveries topic.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookpipe/hookpipe/retrier"
)

func main() {
	cfg, err := retrier.LoadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "retrier: configuration:", err)
		os.Exit(2)
	}
	level, err := zapcore.ParseLevel(os.Getenv("WEBHOOKS_LOG_LEVEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "retrier: WEBHOOKS_LOG_LEVEL:", err)
		os.Exit(2)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(level)
	log, err := zc.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "retrier: logger:", err)
		os.Exit(2)
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now kills the process at once
	}()
	if err := retrier.Run(ctx, cfg, log); err != nil {
		log.Error("retrier failed", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
}
