package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// BenchmarkClickHouseRows: what a row of the attempts table costs the
// ClickHouse server and its client, by how it is written: the recorder's
// schema and batches of 5,000 (as deployed), batches of 1,000 and 20,000,
// without the two per-minute views, and with LZ4 compression on the native
// protocol. 100,000 attempts each, into a database of its own; rows per
// second, and with WEBHOOKS_BENCH_CLICKHOUSE_PID (make bench sets it) the
// server's CPU per row; the client's (this process) CPU per row.
func BenchmarkClickHouseRows(b *testing.B) {
	const n = 100_000
	addr := testkit.ClickHouseAddr(b)
	chPid, _ := strconv.Atoi(os.Getenv("WEBHOOKS_BENCH_CLICKHOUSE_PID"))
	as := benchAttempts(n)
	lz4, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, ReadTimeout: time.Minute,
		Compression: &clickhouse.Compression{Method: clickhouse.CompressionLZ4}})
	if err != nil {
		b.Fatal(err)
	}
	defer lz4.Close()
	for b.Loop() {
		e := newEnv(b)
		conn, db := e.clickhouseDB()
		variants := []struct {
			name    string
			conn    driver.Conn
			batch   int
			noViews bool
		}{
			{"as deployed: batches of 5,000, views on", conn, 5000, false},
			{"batches of 1,000", conn, 1000, false},
			{"batches of 20,000", conn, 20000, false},
			{"without the per-minute views", conn, 5000, true},
			{"LZ4 compression", lz4, 5000, false},
		}
		fmt.Fprintf(os.Stdout, "\n%-44s %10s %16s %16s\n", "attempt rows into ClickHouse", "rows/s", "server µs/row", "client µs/row")
		for i, v := range variants {
			vdb := db + "_" + strconv.Itoa(i)
			b.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+vdb) })
			createSchema(b, e, vdb)
			if v.noViews {
				for _, view := range []string{schema.TableOutcomes + "_mv", schema.TableLatency + "_mv"} {
					if err := conn.Exec(context.Background(), "DROP TABLE "+vdb+"."+view); err != nil {
						b.Fatal(err)
					}
				}
			}
			procs := []cpuOf{{"clickhouse-server", chPid}, {"client", os.Getpid()}}
			before := cpuTimes(b, procs)
			rate := insertRows(b, v.conn, vdb, as, v.batch)
			after := cpuTimes(b, procs)
			server := "-"
			if chPid != 0 {
				server = fmt.Sprintf("%.1f", float64((after[0]-before[0]).Nanoseconds())/1000/n)
			}
			client := float64((after[1] - before[1]).Nanoseconds()) / 1000 / n
			fmt.Fprintf(os.Stdout, "%-44s %10.0f %16s %16.1f\n", v.name, rate, server, client)
		}
	}
}
