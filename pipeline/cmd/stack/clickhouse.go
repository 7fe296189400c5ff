package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
)

const (
	envClickHouseAddr     = "WEBHOOKS_CLICKHOUSE_ADDR"
	envClickHouseDatabase = "WEBHOOKS_CLICKHOUSE_DATABASE"
)

// startClickHouse starts a local clickhouse-server for the recorder, unless
// WEBHOOKS_CLICKHOUSE_ADDR names one, and returns the demo's count of
// recorded rows and the function that stops the server. The address goes
// into the runner's environment, which every component inherits.
func startClickHouse(ctx context.Context, o options, logDir string, out io.Writer) (*stack.Recorded, func()) {
	stop := func() {}
	addr := os.Getenv(envClickHouseAddr)
	if addr != "" {
		fmt.Fprintf(out, "clickhouse using %s (%s)\n", addr, envClickHouseAddr)
	} else {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(o.clickhousePort))
		_ = os.Setenv(envClickHouseAddr, addr)
		dir := filepath.Join(o.dataDir, "clickhouse")
		p, err := stack.StartClickHouse(ctx, o.clickhousePort, o.clickhouseHTTPPort, dir, logDir)
		switch {
		case err != nil:
			fmt.Fprintf(out, "clickhouse NOT RUNNING: %v\n          the recorder waits for it; attempts stay in Kafka meanwhile\n", err)
		case p == nil:
			fmt.Fprintf(out, "clickhouse using the server already on %s\n", addr)
		default:
			stop = func() { _ = p.Stop(30 * time.Second) }
			fmt.Fprintf(out, "clickhouse clickhouse-server on %s (data in %s)\n", addr, dir)
		}
	}
	rec := stack.NewRecorded()
	go rec.Run(ctx, addr, cmp.Or(os.Getenv(envClickHouseDatabase), "webhooks"), 3*time.Second)
	return rec, stop
}
