// Package chtest gives tests a real ClickHouse server and a fresh database
// on it. The server is the one WEBHOOKS_TEST_CLICKHOUSE_ADDR names (`make
// test` starts one); without it the tests that need it skip.
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Addr returns the test server's address (testkit.ClickHouseAddr).
func Addr(tb testing.TB) string {
	tb.Helper()
	return testkit.ClickHouseAddr(tb)
}

// Conn opens a connection to addr (native protocol), closed at the end of
// the test.
func Conn(tb testing.TB, addr string) driver.Conn {
	tb.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Protocol:    clickhouse.Native,
		DialTimeout: 5 * time.Second,
		ReadTimeout: time.Minute,
	})
	if err != nil {
		tb.Fatalf("clickhouse: %v", err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Database returns a connection to the test server and the name of a
// database that does not exist yet (webhooks_test_<random>), dropped at
// the end of the test.
func Database(tb testing.TB) (driver.Conn, string, string) {
	tb.Helper()
	addr := Addr(tb)
	conn := Conn(tb, addr)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "webhooks_test_" + hex.EncodeToString(b)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			tb.Errorf("dropping %s: %v", db, err)
		}
	})
	return conn, addr, db
}

// Ctx is a context ending with the test or after d.
func Ctx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Count runs a query returning one UInt64.
func Count(tb testing.TB, conn driver.Conn, query string, args ...any) uint64 {
	tb.Helper()
	var n uint64
	if err := conn.QueryRow(Ctx(tb, 30*time.Second), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}
