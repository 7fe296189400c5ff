package schema_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/schema"
)

// TestMigrateTwice: the first run on an empty server applies every
// migration and creates every table; the second applies nothing, records
// nothing more and leaves the DDL as it was.
func TestMigrateTwice(t *testing.T) {
	conn, _, db := chtest.Database(t)
	ctx := chtest.Ctx(t, time.Minute)

	first, err := schema.Migrate(ctx, conn, db, 90)
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	all := schema.Migrations(db, first.Features, 90)
	var want []uint32
	for _, m := range all {
		want = append(want, m.Version)
	}
	if !slices.Equal(first.Applied, want) {
		t.Fatalf("first run applied %v, want %v", first.Applied, want)
	}
	ddl := showCreate(t, conn, db)
	for _, table := range []string{schema.TableAttempts, schema.TableOutcomes, schema.TableLatency,
		schema.TableOutcomes + "_mv", schema.TableLatency + "_mv", schema.TableMigrations} {
		if ddl[table] == "" {
			t.Errorf("table %s missing after the first run (have %v)", table, ddl)
		}
	}

	second, err := schema.Migrate(ctx, conn, db, 90)
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(second.Applied) != 0 || len(second.TTLChanged) != 0 {
		t.Errorf("second run applied %v and changed TTLs of %v, want nothing", second.Applied, second.TTLChanged)
	}
	if got := chtest.Count(t, conn, "SELECT count() FROM "+db+"."+schema.TableMigrations); got != uint64(len(all)) {
		t.Errorf("%d rows in schema_migrations after two runs, want %d", got, len(all))
	}
	after := showCreate(t, conn, db)
	for table, q := range ddl {
		if after[table] != q {
			t.Errorf("second run changed %s:\n%s\nto\n%s", table, q, after[table])
		}
	}
}

func showCreate(t *testing.T, conn driver.Conn, db string) map[string]string {
	t.Helper()
	rows, err := conn.Query(chtest.Ctx(t, 30*time.Second), "SELECT name, create_table_query FROM system.tables WHERE database = ?", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, q string
		if err := rows.Scan(&name, &q); err != nil {
			t.Fatal(err)
		}
		out[name] = q
	}
	return out
}
