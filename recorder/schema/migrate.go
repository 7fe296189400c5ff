package schema

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Result says what Migrate found and did.
type Result struct {
	Server   Version
	Features Features
	// Applied lists the migration versions this call applied (none when
	// the schema was already current).
	Applied []uint32
	// TTLChanged lists the tables whose TTL this call set or changed.
	TTLChanged []string
}

// Migrate brings database db to the latest schema for the server behind
// conn: it asks the server its version, creates the database and the
// migrations table, applies the migrations not recorded there, in order,
// recording each after its statements succeeded, and on servers with TTL
// sets each table's TTL to retentionDays (0 leaves TTLs alone). Running it
// again is a no-op.
func Migrate(ctx context.Context, conn driver.Conn, db string, retentionDays int) (Result, error) {
	var res Result
	if err := ValidDatabase(db); err != nil {
		return res, err
	}
	v, err := ServerVersion(ctx, conn)
	if err != nil {
		return res, err
	}
	res.Server, res.Features = v, FeaturesOf(v)
	for _, q := range []string{CreateDatabase(db), CreateMigrations(db)} {
		if err := conn.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	applied, err := AppliedVersions(ctx, conn, db)
	if err != nil {
		return res, err
	}
	for _, m := range Migrations(db, res.Features, retentionDays) {
		if slices.Contains(applied, m.Version) {
			continue
		}
		for _, q := range m.Statements {
			if err := conn.Exec(ctx, q); err != nil {
				return res, fmt.Errorf("migration %d (%s): %s: %w", m.Version, m.Name, firstLine(q), err)
			}
		}
		for _, c := range m.AddColumns {
			var n uint64
			if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = ?",
				db, c.Table, c.Name).Scan(&n); err != nil {
				return res, fmt.Errorf("migration %d (%s): looking for column %s: %w", m.Version, m.Name, c.Name, err)
			}
			if n > 0 {
				continue
			}
			if err := conn.Exec(ctx, c.AddColumn(db)); err != nil {
				return res, fmt.Errorf("migration %d (%s): %s: %w", m.Version, m.Name, c.AddColumn(db), err)
			}
		}
		if err := record(ctx, conn, db, m, res); err != nil {
			return res, fmt.Errorf("recording migration %d: %w", m.Version, err)
		}
		res.Applied = append(res.Applied, m.Version)
	}
	if res.Features.TTL && retentionDays > 0 {
		if res.TTLChanged, err = syncTTL(ctx, conn, db, retentionDays); err != nil {
			return res, err
		}
	}
	return res, nil
}

// ServerVersion asks the server its version.
func ServerVersion(ctx context.Context, conn driver.Conn) (Version, error) {
	var s string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&s); err != nil {
		return Version{}, fmt.Errorf("SELECT version(): %w", err)
	}
	return ParseVersion(s)
}

// AppliedVersions lists the recorded migration versions, ascending.
func AppliedVersions(ctx context.Context, conn driver.Conn, db string) ([]uint32, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT version FROM "+db+"."+TableMigrations+" ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("reading applied migrations: %w", err)
	}
	defer rows.Close()
	var out []uint32
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("reading applied migrations: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func record(ctx context.Context, conn driver.Conn, db string, m Migration, res Result) error {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+"."+TableMigrations+" (version, name, applied_at, server_version, features)")
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	if err := b.Append(m.Version, m.Name, time.Now().UTC(), res.Server.String(), res.Features.String()); err != nil {
		return err
	}
	return b.Send()
}

// syncTTL sets the TTL of every table that has one to retentionDays,
// altering only the tables whose TTL says otherwise: MODIFY TTL rewrites
// the table's parts on current servers, so it is not done on every start.
func syncTTL(ctx context.Context, conn driver.Conn, db string, retentionDays int) ([]string, error) {
	var changed []string
	for _, table := range slices.Sorted(maps.Keys(TTLs)) {
		var engine string
		err := conn.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine)
		if err != nil {
			return changed, fmt.Errorf("reading the TTL of %s.%s: %w", db, table, err)
		}
		// The server normalises INTERVAL n DAY to toIntervalDay(n).
		if strings.Contains(engine, fmt.Sprintf("TTL %s + toIntervalDay(%d)", TTLs[table], retentionDays)) {
			continue
		}
		if err := conn.Exec(ctx, ModifyTTL(db, table, retentionDays)); err != nil {
			return changed, fmt.Errorf("setting the TTL of %s.%s: %w", db, table, err)
		}
		changed = append(changed, table)
	}
	return changed, nil
}

// ModifyTTL is the statement that sets a table's retention.
func ModifyTTL(db, table string, retentionDays int) string {
	return "ALTER TABLE " + db + "." + table + " MODIFY " + TTLClause(TTLs[table], retentionDays)
}

func firstLine(q string) string {
	q, _, _ = strings.Cut(q, "\n")
	return strings.TrimSuffix(strings.TrimSpace(q), " (")
}
