// Command dispatcher fans events out to deliveries; see package dispatcher.
// Configuration comes from the WEBHOOKS_* environment (DESIGN.md section 3).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hookpipe/hookpipe/dispatcher"
	"go.uber.org/zap"
)

func main() { os.Exit(run()) }

func run() int {
	cfg, err := dispatcher.LoadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatcher:", err)
		return 2
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(cfg.LogLevel)
	log, err := zc.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatcher: logger:", err)
		return 1
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		stop()
		<-again
		fmt.Fprintln(os.Stderr, "dispatcher: second signal, exiting at once")
		os.Exit(1)
	}()

	if err := dispatcher.Run(ctx, cfg, log); err != nil {
		log.Error("dispatcher failed", zap.Error(err))
		return 1
	}
	return 0
}
