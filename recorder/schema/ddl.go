package schema

import (
	"fmt"
	"regexp"
	"strings"
)

// Table names inside the database.
const (
	TableMigrations = "schema_migrations"
	TableAttempts   = "attempts"
	// TableOutcomes holds per-minute attempt counts by subscription,
	// outcome and failure category (SummingMergeTree).
	TableOutcomes = "attempts_per_minute"
	// TableLatency holds per-minute request duration states by
	// subscription (AggregatingMergeTree).
	TableLatency = "latency_per_minute"
	// TableExpunged records the events expunged on request (privacy): the
	// API hides and refuses to resend their payloads, which the events
	// topic keeps until its retention.
	TableExpunged = "expunged_events"
)

// AttemptColumns is the explicit column list of every INSERT into the
// attempts table, in the order the recorder sends them; recorded_at is
// left to its DEFAULT.
var AttemptColumns = []string{
	"attempt_id", "event_id", "event_type", "subscription_id", "tenant", "attempt", "outcome",
	"failure_category", "http_status", "duration_ms", "ts", "error", "next_attempt_at", "published_at",
	"response_sample", "batch_id",
}

// Migration is one schema version: statements that are each idempotent on
// their own (IF NOT EXISTS), so a migration cut half way is simply run again.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
	// AddColumns are added where missing (ClickHouse 18.16 has no ADD
	// COLUMN IF NOT EXISTS), after Statements.
	AddColumns []Column
}

// Column is a column a migration adds to a table.
type Column struct {
	Table, Name, Type string
}

// AddColumn is the ALTER that adds c to a table of db.
func (c Column) AddColumn(db string) string {
	return "ALTER TABLE " + db + "." + c.Table + " ADD COLUMN " + c.Name + " " + c.Type
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidDatabase checks that a database name needs no quoting.
func ValidDatabase(db string) error {
	if !identRe.MatchString(db) {
		return fmt.Errorf("database name %q: want letters, digits and underscores, not starting with a digit", db)
	}
	return nil
}

// ddl renders the statements for one database and feature set.
type ddl struct {
	db            string
	f             Features
	retentionDays int
}

func (d ddl) lowCard() string {
	if d.f.LowCardinality {
		return "LowCardinality(String)"
	}
	return "String"
}

func (d ddl) time() string {
	if d.f.DateTime64 {
		return "DateTime64(3, 'UTC')"
	}
	return "DateTime('UTC')"
}

// minute is the per-minute bucket of ts, a DateTime on every version.
func (d ddl) minute() string {
	if d.f.DateTime64 {
		return "toStartOfMinute(toDateTime(ts))"
	}
	return "toStartOfMinute(ts)"
}

// ttl is the TTL clause for a table whose rows expire by expr, or "".
func (d ddl) ttl(expr string) string {
	if !d.f.TTL || d.retentionDays <= 0 {
		return ""
	}
	return "\n" + TTLClause(expr, d.retentionDays)
}

// TTLClause is the TTL of a table whose rows expire retentionDays after expr.
func TTLClause(expr string, retentionDays int) string {
	return fmt.Sprintf("TTL %s + INTERVAL %d DAY", expr, retentionDays)
}

// TTLs maps each table with a TTL to the expression its rows expire by.
var TTLs = map[string]string{
	TableAttempts: "toDateTime(ts)",
	TableOutcomes: "minute",
	TableLatency:  "minute",
}

// Migrations returns the schema history for database db on a server with
// features f; retentionDays (0: none) becomes the tables' TTL where the
// server has TTL. Versions only grow; a released migration never changes
// meaning, so later changes are new versions.
func Migrations(db string, f Features, retentionDays int) []Migration {
	d := ddl{db: db, f: f, retentionDays: retentionDays}
	return []Migration{
		{Version: 1, Name: "attempts table", Statements: []string{d.attempts()}},
		{Version: 2, Name: "per-minute outcome counts", Statements: []string{d.outcomes(), d.outcomesView()}},
		{Version: 3, Name: "per-minute latency", Statements: []string{d.latency(), d.latencyView()}},
		{Version: 4, Name: "response samples", AddColumns: []Column{{Table: TableAttempts, Name: "response_sample", Type: "String DEFAULT ''"}}},
		{Version: 5, Name: "expunged events", Statements: []string{d.expunged()}},
		{Version: 6, Name: "batch ids", AddColumns: []Column{{Table: TableAttempts, Name: "batch_id", Type: "String DEFAULT ''"}}},
	}
}

// CreateDatabase and CreateMigrations run before the migrations: the table
// recording them must exist to know which are applied.
func CreateDatabase(db string) string { return "CREATE DATABASE IF NOT EXISTS " + db }

// CreateMigrations is the DDL of the migrations table. Two recorders
// starting at once may both apply (idempotent) statements and both record
// the version; ReplacingMergeTree folds the duplicate rows.
func CreateMigrations(db string) string {
	return `CREATE TABLE IF NOT EXISTS ` + db + `.` + TableMigrations + ` (
    version UInt32,
    name String,
    applied_at DateTime('UTC'),
    server_version String,
    features String
)
ENGINE = ReplacingMergeTree()
ORDER BY version`
}

// attempts is the raw table, one row per attempt record. The sort key
// starts with tenant and subscription (a subscription belongs to one
// tenant), so per-subscription and per-tenant queries read a narrow range;
// attempt_id ends it, so a replayed attempt (same id, same ts) has the same
// key and ReplacingMergeTree folds the copies on merge (FINAL folds them at
// query time).
func (d ddl) attempts() string {
	lc, ts := d.lowCard(), d.time()
	return `CREATE TABLE IF NOT EXISTS ` + d.db + `.` + TableAttempts + ` (
    attempt_id String,
    event_id String,
    event_type ` + lc + `,
    subscription_id String,
    tenant String,
    attempt UInt32,
    outcome ` + lc + `,
    failure_category ` + lc + `,
    http_status UInt16,
    duration_ms Float64,
    ts ` + ts + `,
    error String,
    next_attempt_at ` + ts + `,
    published_at ` + ts + `,
    recorded_at DateTime('UTC') DEFAULT now()
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, subscription_id, ts, attempt_id)` + d.ttl(TTLs[TableAttempts])
}

func (d ddl) outcomes() string {
	lc := d.lowCard()
	return `CREATE TABLE IF NOT EXISTS ` + d.db + `.` + TableOutcomes + ` (
    minute DateTime('UTC'),
    tenant String,
    subscription_id String,
    outcome ` + lc + `,
    failure_category ` + lc + `,
    attempts UInt64,
    first_attempts UInt64
)
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (tenant, subscription_id, minute, outcome, failure_category)` + d.ttl(TTLs[TableOutcomes])
}

func (d ddl) outcomesView() string {
	return `CREATE MATERIALIZED VIEW IF NOT EXISTS ` + d.db + `.` + TableOutcomes + `_mv
TO ` + d.db + `.` + TableOutcomes + `
AS SELECT
    ` + d.minute() + ` AS minute,
    tenant,
    subscription_id,
    outcome,
    failure_category,
    count() AS attempts,
    countIf(attempt = 1) AS first_attempts
FROM ` + d.db + `.` + TableAttempts + `
GROUP BY minute, tenant, subscription_id, outcome, failure_category`
}

// Quantiles kept by the latency table; queries must name the same levels
// in quantilesMerge.
const Quantiles = "0.5, 0.9, 0.99"

func (d ddl) latency() string {
	return `CREATE TABLE IF NOT EXISTS ` + d.db + `.` + TableLatency + ` (
    minute DateTime('UTC'),
    tenant String,
    subscription_id String,
    requests AggregateFunction(count),
    duration_ms_sum AggregateFunction(sum, Float64),
    duration_ms_max AggregateFunction(max, Float64),
    duration_ms_quantiles AggregateFunction(quantiles(` + Quantiles + `), Float64)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (tenant, subscription_id, minute)` + d.ttl(TTLs[TableLatency])
}

// latencyView aggregates the attempts that made an HTTP request: blocked,
// throttled and skipped ones made none and have no duration.
func (d ddl) latencyView() string {
	return `CREATE MATERIALIZED VIEW IF NOT EXISTS ` + d.db + `.` + TableLatency + `_mv
TO ` + d.db + `.` + TableLatency + `
AS SELECT
    ` + d.minute() + ` AS minute,
    tenant,
    subscription_id,
    countState() AS requests,
    sumState(duration_ms) AS duration_ms_sum,
    maxState(duration_ms) AS duration_ms_max,
    quantilesState(` + Quantiles + `)(duration_ms) AS duration_ms_quantiles
FROM ` + d.db + `.` + TableAttempts + `
WHERE outcome IN ('success', 'retry', 'dead')
GROUP BY minute, tenant, subscription_id`
}

// expunged lists the expunged events, one row per expunge (a second
// expunge of the same event folds on merge). It has no TTL: a row must
// outlive the event's record on the events topic (7 days by default), and
// one row per privacy request stays small.
func (d ddl) expunged() string {
	return `CREATE TABLE IF NOT EXISTS ` + d.db + `.` + TableExpunged + ` (
    event_id String,
    tenant String,
    expunged_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
ORDER BY event_id`
}

// InsertAttempts is the INSERT the recorder prepares its batches with.
func InsertAttempts(db string) string {
	return "INSERT INTO " + db + "." + TableAttempts + " (" + strings.Join(AttemptColumns, ", ") + ")"
}
