// Package retention removes what the recorder stored in ClickHouse when it
// is due: the rows past their tenant's retention (Expire, run on a schedule
// by webhookctl clickhouse expire) and one event's response samples on
// request (Expunge, for privacy), recording the expunge so that the API
// neither shows nor resends the event's payload, which the events topic
// keeps until its own retention.
//
// Both are ALTER TABLE mutations, which ClickHouse runs in the background
// (MergeTree has them from 1.1.54388, so 18.16 too): the functions return
// once the mutation is queued; Wait waits for it.
package retention

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

// Conn is what the package needs of a ClickHouse connection (a
// driver.Conn has it).
type Conn interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) driver.Row
	Exec(ctx context.Context, query string, args ...any) error
	PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error)
}

// Policy is how long each tenant's rows stay, in days; 0 keeps them for
// good.
type Policy struct {
	// DefaultDays applies to the tenants without an override, and to the
	// rows without a tenant (WEBHOOKS_CLICKHOUSE_RETENTION_DAYS).
	DefaultDays int
	// Tenants are the overrides of the tenants topic.
	Tenants map[string]int
}

// PolicyOf is the policy of the default and the tenants' overrides (those
// without retention_days keep the default).
func PolicyOf(defaultDays int, tenants []*topics.Tenant) Policy {
	p := Policy{DefaultDays: defaultDays, Tenants: map[string]int{}}
	for _, t := range tenants {
		if t.RetentionDays != nil && *t.RetentionDays != defaultDays {
			p.Tenants[t.ID] = *t.RetentionDays
		}
	}
	return p
}

// Validate refuses negative retentions.
func (p Policy) Validate() error {
	if p.DefaultDays < 0 {
		return fmt.Errorf("default retention %d days: must not be negative (0: kept for good)", p.DefaultDays)
	}
	for id, d := range p.Tenants {
		if d < 0 {
			return fmt.Errorf("retention of tenant %s, %d days: must not be negative (0: kept for good)", id, d)
		}
	}
	return nil
}

// Tables are the tables Expire deletes from, each with the time its rows
// expire by (the TTL expression of servers with TTL): the attempts and
// their per-minute aggregates, which carry the tenant too.
var Tables = []string{schema.TableAttempts, schema.TableOutcomes, schema.TableLatency}

// condition is the WHERE of the rows of table past their retention at now,
// one expression for every tenant: transform maps a row's tenant to its
// cutoff (seconds since the epoch), the default cutoff for the others; a
// cutoff of 0 (kept for good) matches no row. ok is false when nothing can
// expire.
func (p Policy) condition(table string, now time.Time) (cond string, ok bool) {
	cutoff := func(days int) int64 {
		if days == 0 {
			return 0
		}
		return max(0, now.Add(-time.Duration(days)*24*time.Hour).Unix())
	}
	def := cutoff(p.DefaultDays)
	ids := slices.Sorted(maps.Keys(p.Tenants))
	left := "toUInt32(" + schema.TTLs[table] + ")"
	if len(ids) == 0 {
		return left + " < " + strconv.FormatInt(def, 10), def > 0
	}
	names, cutoffs := make([]string, len(ids)), make([]string, len(ids))
	due := def > 0
	for i, id := range ids {
		c := cutoff(p.Tenants[id])
		due = due || c > 0
		names[i], cutoffs[i] = quote(id), "toUInt32("+strconv.FormatInt(c, 10)+")"
	}
	// The cutoffs are typed alike by toUInt32 (a literal 0 would be a
	// UInt8): transform wants the default of the array's type.
	return fmt.Sprintf("%s < transform(tenant, [%s], [%s], toUInt32(%d))", left,
		strings.Join(names, ", "), strings.Join(cutoffs, ", "), def), due
}

// quote is a ClickHouse string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// TableExpiry is what Expire found and did in one table.
type TableExpiry struct {
	Table string `json:"table"`
	// Rows were past their retention when the run started (before the
	// merges of ReplacingMergeTree and SummingMergeTree: parts' rows).
	Rows uint64 `json:"rows"`
	// Mutation is the ALTER queued; empty when no row was due (or a dry
	// run).
	Mutation string `json:"mutation,omitempty"`
}

// Expire deletes the rows of db's tables that are past their tenant's
// retention at now: one DELETE mutation per table, for all tenants, and
// none where no row is due. With dryRun it only counts.
func Expire(ctx context.Context, conn Conn, db string, p Policy, now time.Time, dryRun bool) ([]TableExpiry, error) {
	if err := schema.ValidDatabase(db); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := []TableExpiry{}
	for _, table := range Tables {
		cond, ok := p.condition(table, now)
		if !ok {
			continue
		}
		e := TableExpiry{Table: table}
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+table+" WHERE "+cond).Scan(&e.Rows); err != nil {
			return out, fmt.Errorf("counting the expired rows of %s.%s: %w", db, table, err)
		}
		if e.Rows > 0 && !dryRun {
			e.Mutation = "ALTER TABLE " + db + "." + table + " DELETE WHERE " + cond
			if err := conn.Exec(ctx, e.Mutation); err != nil {
				return out, fmt.Errorf("deleting the expired rows of %s.%s: %w", db, table, err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// noTable reports the server's "no such database or table": before the
// recorder created the expunged_events table (migration 5) nothing can
// have been expunged.
func noTable(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && (ex.Code == 60 || ex.Code == 81) // UNKNOWN_TABLE, UNKNOWN_DATABASE
}

// Expunged says when event id was expunged (the latest time, if several),
// or false.
func Expunged(ctx context.Context, conn Conn, db, eventID string) (time.Time, bool, error) {
	var (
		n  uint64
		at time.Time
	)
	err := conn.QueryRow(ctx, "SELECT count(), max(expunged_at) FROM "+db+"."+schema.TableExpunged+" WHERE event_id = ?", eventID).Scan(&n, &at)
	if noTable(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("looking up expunged event %s: %w", eventID, err)
	}
	return at.UTC(), n > 0, nil
}

// ExpungedSince is the set of events expunged at or after since: the
// events published since then that a replay must not resend (an event is
// expunged after it is published).
func ExpungedSince(ctx context.Context, conn Conn, db string, since time.Time) (map[string]bool, error) {
	return expungedSet(ctx, conn, "SELECT DISTINCT event_id FROM "+db+"."+schema.TableExpunged+" WHERE expunged_at >= ?", since.UTC())
}

// ExpungedAmong is the set of the events of ids that were expunged.
func ExpungedAmong(ctx context.Context, conn Conn, db string, ids []string) (map[string]bool, error) {
	if len(ids) == 0 {
		return map[string]bool{}, nil
	}
	return expungedSet(ctx, conn, "SELECT DISTINCT event_id FROM "+db+"."+schema.TableExpunged+" WHERE has(?, event_id)", ids)
}

func expungedSet(ctx context.Context, conn Conn, query string, arg any) (map[string]bool, error) {
	out := map[string]bool{}
	rows, err := conn.Query(ctx, query, arg)
	if noTable(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the expunged events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading the expunged events: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

// Expunge records that event id (of tenant) was expunged at at, then
// clears the response samples of its attempts with one UPDATE mutation
// (none when no attempt has one). It returns how many attempts had a
// sample. The record comes first: from then on the API hides the event's
// payload and samples even before the mutation has run.
func Expunge(ctx context.Context, conn Conn, db, eventID, tenant string, at time.Time) (uint64, error) {
	if err := schema.ValidDatabase(db); err != nil {
		return 0, err
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+"."+schema.TableExpunged+" (event_id, tenant, expunged_at)")
	if err != nil {
		return 0, fmt.Errorf("recording the expunge of %s: %w", eventID, err)
	}
	defer func() { _ = b.Close() }()
	if err := b.Append(eventID, tenant, at.UTC()); err != nil {
		return 0, fmt.Errorf("recording the expunge of %s: %w", eventID, err)
	}
	if err := b.Send(); err != nil {
		return 0, fmt.Errorf("recording the expunge of %s: %w", eventID, err)
	}
	var samples uint64
	where := " WHERE event_id = " + quote(eventID) + " AND response_sample != ''"
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+schema.TableAttempts+where).Scan(&samples); err != nil {
		return 0, fmt.Errorf("counting the response samples of %s: %w", eventID, err)
	}
	if samples == 0 {
		return 0, nil
	}
	if err := conn.Exec(ctx, "ALTER TABLE "+db+"."+schema.TableAttempts+" UPDATE response_sample = ''"+where); err != nil {
		return 0, fmt.Errorf("clearing the response samples of %s: %w", eventID, err)
	}
	return samples, nil
}

// Pending counts the mutations of db's tables the server has not finished.
func Pending(ctx context.Context, conn Conn, db string) (uint64, error) {
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND is_done = 0", db).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading system.mutations: %w", err)
	}
	return n, nil
}

// Wait polls system.mutations, every interval, until db has no unfinished
// mutation or ctx is done.
func Wait(ctx context.Context, conn Conn, db string, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := Pending(ctx, conn, db)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d mutations of %s still running: %w", n, db, ctx.Err())
		case <-t.C:
		}
	}
}
