package retention_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

// row is one attempt of the test data.
type row struct {
	id, event, tenant, sample string
	age                       time.Duration
}

// setup migrates a fresh database and inserts rows into its attempts
// table (the views fill the per-minute tables).
func setup(t *testing.T, now time.Time, rows []row) (driver.Conn, string) {
	t.Helper()
	conn, _, db := chtest.Database(t)
	ctx := chtest.Ctx(t, time.Minute)
	if _, err := schema.Migrate(ctx, conn, db, 0); err != nil {
		t.Fatal(err)
	}
	b, err := conn.PrepareBatch(ctx, schema.InsertAttempts(db))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		ts := now.Add(-r.age)
		if err := b.Append(r.id, r.event, "order.created", "sub_"+r.tenant, r.tenant, uint32(1), topics.OutcomeSuccess, "",
			uint16(200), 12.5, ts, "", time.Unix(0, 0), ts, r.sample, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	return conn, db
}

// column runs a query of one String column and joins its values with sep.
func column(t *testing.T, conn driver.Conn, sep, query string) string {
	t.Helper()
	rows, err := conn.Query(chtest.Ctx(t, 30*time.Second), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, sep)
}

// ids lists the attempt ids left in the attempts table, sorted.
func ids(t *testing.T, conn driver.Conn, db string) string {
	t.Helper()
	return column(t, conn, " ", "SELECT attempt_id FROM "+db+".attempts ORDER BY attempt_id")
}

func wait(t *testing.T, conn driver.Conn, db string) {
	t.Helper()
	if err := retention.Wait(chtest.Ctx(t, time.Minute), conn, db, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// TestExpire: on ClickHouse 18.16, a run deletes exactly the rows past
// their tenant's retention (acme's override of 10 days, the default of 30
// for globex and for rows without a tenant, never for a tenant kept for
// good), in the attempts table and in the per-minute tables, with one
// mutation per table; a second run finds nothing and queues nothing.
func TestExpire(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	const day = 24 * time.Hour
	conn, db := setup(t, now, []row{
		{id: "acme-05", tenant: "acme", age: 5 * day},
		{id: "acme-20", tenant: "acme", age: 20 * day},
		{id: "acme-40", tenant: "acme", age: 40 * day},
		{id: "globex-05", tenant: "globex", age: 5 * day},
		{id: "globex-20", tenant: "globex", age: 20 * day},
		{id: "globex-40", tenant: "globex", age: 40 * day},
		{id: "keep-40", tenant: "keep", age: 40 * day},
		{id: "none-20", age: 20 * day},
		{id: "none-40", age: 40 * day},
	})
	ten := func(id string, days int) *topics.Tenant { return &topics.Tenant{ID: id, RetentionDays: &days} }
	p := retention.PolicyOf(30, []*topics.Tenant{ten("acme", 10), ten("keep", 0), {ID: "quota-only"}})
	ctx := chtest.Ctx(t, time.Minute)

	dry, err := retention.Expire(ctx, conn, db, p, now, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 3 || dry[0].Table != schema.TableAttempts || dry[0].Rows != 4 || dry[0].Mutation != "" {
		t.Fatalf("dry run: %+v, want 4 attempts due and no mutation", dry)
	}
	if got := ids(t, conn, db); got != "acme-05 acme-20 acme-40 globex-05 globex-20 globex-40 keep-40 none-20 none-40" {
		t.Fatalf("a dry run deleted rows: %s", got)
	}

	res, err := retention.Expire(ctx, conn, db, p, now, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res {
		if e.Rows != 4 || !strings.HasPrefix(e.Mutation, "ALTER TABLE "+db+"."+e.Table+" DELETE WHERE ") {
			t.Errorf("%s: %+v, want 4 rows and a DELETE", e.Table, e)
		}
	}
	wait(t, conn, db)
	if got, want := ids(t, conn, db), "acme-05 globex-05 globex-20 keep-40 none-20"; got != want {
		t.Fatalf("left %q, want %q", got, want)
	}
	for _, table := range []string{schema.TableOutcomes, schema.TableLatency} {
		if got, want := column(t, conn, ",", "SELECT tenant FROM "+db+"."+table+" ORDER BY tenant, minute"), ",acme,globex,globex,keep"; got != want {
			t.Errorf("%s: tenants of the rows left %q, want %q", table, got, want)
		}
	}
	mutations := chtest.Count(t, conn, "SELECT count() FROM system.mutations WHERE database = ?", db)
	if mutations != 3 {
		t.Errorf("%d mutations, want one per table", mutations)
	}

	again, err := retention.Expire(ctx, conn, db, p, now, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range again {
		if e.Rows != 0 || e.Mutation != "" {
			t.Errorf("second run: %+v, want nothing due", e)
		}
	}
	if n := chtest.Count(t, conn, "SELECT count() FROM system.mutations WHERE database = ?", db); n != mutations {
		t.Errorf("the second run queued %d mutations", n-mutations)
	}
}

// TestExpireNothingDue: a default of 0 and no override keeps everything
// without asking the server; negative retentions are refused.
func TestExpireNothingDue(t *testing.T) {
	ctx := context.Background()
	res, err := retention.Expire(ctx, nil, "webhooks", retention.PolicyOf(0, nil), time.Now(), false)
	if err != nil || len(res) != 0 {
		t.Fatalf("Expire with nothing due: %+v, %v", res, err)
	}
	for _, p := range []retention.Policy{{DefaultDays: -1}, {DefaultDays: 30, Tenants: map[string]int{"acme": -5}}} {
		if _, err := retention.Expire(ctx, nil, "webhooks", p, time.Now(), false); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("Expire(%+v): %v, want a negative retention refused", p, err)
		}
	}
	if _, err := retention.Expire(ctx, nil, "web-hooks", retention.PolicyOf(30, nil), time.Now(), false); err == nil {
		t.Error("a bad database name was taken")
	}
}

// TestExpunge: the expunge is recorded at once and the event's samples
// are cleared (one mutation), the other events' kept; an event without
// samples queues no mutation; a database without the table has no
// expunged event.
func TestExpunge(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	conn, db := setup(t, now, []row{
		{id: "a1", event: "evt_gone", tenant: "acme", sample: `{"card":"4111"}`, age: time.Hour},
		{id: "a2", event: "evt_gone", tenant: "acme", sample: `{"card":"4111"}`, age: time.Minute},
		{id: "a3", event: "evt_kept", tenant: "acme", sample: `{"ok":true}`, age: time.Minute},
		{id: "a4", event: "evt_quiet", tenant: "acme", age: time.Minute},
	})
	ctx := chtest.Ctx(t, time.Minute)
	if _, ok, err := retention.Expunged(ctx, conn, db, "evt_gone"); err != nil || ok {
		t.Fatalf("Expunged before: %t, %v", ok, err)
	}
	n, err := retention.Expunge(ctx, conn, db, "evt_gone", "acme", now)
	if err != nil || n != 2 {
		t.Fatalf("Expunge: %d, %v; want 2 samples", n, err)
	}
	at, ok, err := retention.Expunged(ctx, conn, db, "evt_gone")
	if err != nil || !ok || !at.Equal(now) {
		t.Fatalf("Expunged: %v %t %v, want %v", at, ok, err, now)
	}
	wait(t, conn, db)
	if n := chtest.Count(t, conn, "SELECT count() FROM "+db+".attempts WHERE response_sample != ''"); n != 1 {
		t.Errorf("%d samples left, want evt_kept's only", n)
	}
	if n := chtest.Count(t, conn, "SELECT count() FROM "+db+".attempts WHERE event_id = 'evt_gone'"); n != 2 {
		t.Errorf("%d attempts of evt_gone left, want both (their samples cleared)", n)
	}
	if n, err := retention.Expunge(ctx, conn, db, "evt_quiet", "acme", now); err != nil || n != 0 {
		t.Fatalf("Expunge of an event without samples: %d, %v", n, err)
	}
	if n := chtest.Count(t, conn, "SELECT count() FROM system.mutations WHERE database = ?", db); n != 1 {
		t.Errorf("%d mutations, want the one of evt_gone", n)
	}
	set, err := retention.ExpungedSince(ctx, conn, db, now.Add(-time.Hour))
	if err != nil || len(set) != 2 || !set["evt_gone"] || !set["evt_quiet"] {
		t.Fatalf("ExpungedSince: %v, %v", set, err)
	}
	if set, err := retention.ExpungedSince(ctx, conn, db, now.Add(time.Hour)); err != nil || len(set) != 0 {
		t.Fatalf("ExpungedSince later: %v, %v", set, err)
	}
	if set, err := retention.ExpungedAmong(ctx, conn, db, []string{"evt_kept", "evt_gone", "evt_never"}); err != nil || len(set) != 1 || !set["evt_gone"] {
		t.Fatalf("ExpungedAmong: %v, %v", set, err)
	}
	// Before the recorder created the table, nothing was expunged.
	if _, ok, err := retention.Expunged(ctx, conn, "webhooks_test_never_created", "evt_gone"); err != nil || ok {
		t.Errorf("Expunged without the table: %t, %v", ok, err)
	}
	if set, err := retention.ExpungedSince(ctx, conn, "webhooks_test_never_created", now); err != nil || len(set) != 0 {
		t.Errorf("ExpungedSince without the table: %v, %v", set, err)
	}
}
