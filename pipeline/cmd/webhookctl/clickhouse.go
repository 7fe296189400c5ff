package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/recorder/schema"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The ClickHouse connection, as the recorder reads it (docs/configuration.md).
const (
	envClickHouseAddr     = schema.EnvClickHouseAddr
	envClickHouseDatabase = schema.EnvClickHouseDatabase
	envClickHouseUser     = schema.EnvClickHouseUser
	envClickHousePassword = schema.EnvClickHousePassword
	defaultClickHouseAddr = schema.DefaultClickHouseAddr
	defaultDatabase       = schema.DefaultDatabase
)

// The tables the recorder creates; each is partitioned by month
// (toYYYYMM of its time column).
var partitionedTables = []string{schema.TableAttempts, schema.TableOutcomes, schema.TableLatency}

// clickhouseFlags are the connection flags of the ClickHouse commands.
type clickhouseFlags struct {
	addr, database string
}

func (f *clickhouseFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "clickhouse", "", "ClickHouse native-protocol host:port (default $"+envClickHouseAddr+" or "+defaultClickHouseAddr+")")
	fs.StringVar(&f.database, "database", "", "ClickHouse database (default $"+envClickHouseDatabase+" or "+defaultDatabase+")")
}

// clickhouseConn is a connection checked to answer, and its database.
type clickhouseConn struct {
	driver.Conn
	addr string
	db   string
}

// connectClickHouse opens a native-protocol connection and checks that the
// server answers before ctx is done.
func (c *cli) connectClickHouse(ctx context.Context, f *clickhouseFlags) (*clickhouseConn, error) {
	addr := cmp.Or(f.addr, c.getenv(envClickHouseAddr), defaultClickHouseAddr)
	db := cmp.Or(f.database, c.getenv(envClickHouseDatabase), defaultDatabase)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, usagef("ClickHouse address %q: want host:port", addr)
	}
	if err := schema.ValidDatabase(db); err != nil {
		return nil, usagef("ClickHouse %v", err)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Protocol:    clickhouse.Native,
		Auth:        clickhouse.Auth{Username: cmp.Or(c.getenv(envClickHouseUser), "default"), Password: c.getenv(envClickHousePassword)},
		DialTimeout: min(c.timeout, 10*time.Second),
		ReadTimeout: c.timeout,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach ClickHouse at %s: %w", addr, err)
	}
	return &clickhouseConn{Conn: conn, addr: addr, db: db}, nil
}

// explain turns the server's "no such database or table" into advice.
func (ch *clickhouseConn) explain(err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && (ex.Code == 81 || ex.Code == 60) { // UNKNOWN_DATABASE, UNKNOWN_TABLE
		return fmt.Errorf("no attempts recorded in database %s at %s (the recorder creates the tables when it starts): %w", ch.db, ch.addr, err)
	}
	return err
}

// partition is one month of one table.
type partition struct {
	Table     string `json:"table"`
	Partition string `json:"partition"` // YYYYMM
	Rows      uint64 `json:"rows"`
	Bytes     uint64 `json:"bytes_on_disk"`
	// End is when the month ends: the partition is dropped when End is at
	// or before the cutoff.
	End time.Time `json:"end"`
}

// monthEnd reads a toYYYYMM partition id and returns the start of the next
// month (UTC).
func monthEnd(id string) (time.Time, bool) {
	n, err := strconv.Atoi(id)
	if err != nil || len(id) != 6 || n%100 < 1 || n%100 > 12 {
		return time.Time{}, false
	}
	return time.Date(n/100, time.Month(n%100), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0), true
}

// partitions lists the months of the recorder's tables, oldest first.
func (ch *clickhouseConn) partitions(ctx context.Context) ([]partition, error) {
	rows, err := ch.Query(ctx, `SELECT table, partition, sum(rows), sum(bytes_on_disk) FROM system.parts
WHERE database = ? AND active AND table IN ? GROUP BY table, partition`, ch.db, groupSet(partitionedTables))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []partition
	for rows.Next() {
		var p partition
		if err := rows.Scan(&p.Table, &p.Partition, &p.Rows, &p.Bytes); err != nil {
			return nil, err
		}
		end, ok := monthEnd(p.Partition)
		if !ok {
			continue // not a month: not ours to drop
		}
		p.End = end
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b partition) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Table, b.Table))
	})
	return out, nil
}

func groupSet(ss []string) clickhouse.GroupSet {
	v := make([]any, len(ss))
	for i, s := range ss {
		v[i] = s
	}
	return clickhouse.GroupSet{Value: v}
}

func dropPartitionsCmd(fs *flag.FlagSet) runFunc {
	var chf clickhouseFlags
	chf.define(fs)
	olderThan := fs.String("older-than", "", "drop the months that ended before TIME: a duration ago (90d) or RFC 3339 (required)")
	dryRun := fs.Bool("dry-run", false, "list what would be dropped, drop nothing")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *olderThan == "" {
			return usagef("--older-than is required (e.g. --older-than 90d)")
		}
		now := time.Now()
		cutoff, err := parseTime("--older-than", *olderThan, now)
		if err != nil {
			return err
		}
		if cutoff.After(now) {
			return usagef("--older-than %s is in the future", *olderThan)
		}
		ch, err := c.connectClickHouse(ctx, &chf)
		if err != nil {
			return err
		}
		defer ch.Close()
		all, err := ch.partitions(ctx)
		if err != nil {
			return fmt.Errorf("listing partitions: %w", err)
		}
		old := []partition{}
		for _, p := range all {
			if !p.End.After(cutoff) {
				old = append(old, p)
			}
		}
		if !*dryRun {
			for _, p := range old {
				// The partition expression of toYYYYMM is the number itself.
				q := fmt.Sprintf("ALTER TABLE %s.%s DROP PARTITION %s", ch.db, p.Table, p.Partition)
				if err := ch.Exec(ctx, q); err != nil {
					return fmt.Errorf("dropping %s %s: %w", p.Table, p.Partition, err)
				}
			}
		}
		if c.output == outputJSON {
			return c.printJSON(struct {
				Cutoff  time.Time   `json:"cutoff"`
				DryRun  bool        `json:"dry_run"`
				Dropped []partition `json:"dropped"`
			}{cutoff.UTC(), *dryRun, old})
		}
		verb := "dropped"
		if *dryRun {
			verb = "would drop"
		}
		if len(old) == 0 {
			fmt.Fprintf(c.stdout, "nothing to drop: no month of %s ended before %s\n", ch.db, formatTime(cutoff))
			return nil
		}
		tw := newTable(c.stdout)
		fmt.Fprintln(tw, "TABLE\tMONTH\tROWS\tBYTES")
		var attempts uint64
		for _, p := range old {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", p.Table, p.Partition, p.Rows, p.Bytes)
			if p.Table == schema.TableAttempts {
				attempts += p.Rows
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "\n%s %d partitions (%d attempts) of months that ended before %s\n", verb, len(old), attempts, formatTime(cutoff))
		return nil
	}
}
