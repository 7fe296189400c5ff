// Package store writes attempt rows to the ClickHouse attempts table over
// the native protocol, one INSERT with an explicit column list per batch,
// skipping the rows a previous insert already wrote.
package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/recorder/internal/batch"
	"github.com/hookpipe/hookpipe/recorder/schema"
)

// Writer inserts batches into db.attempts.
type Writer struct {
	conn   driver.Conn
	db     string
	insert string
	cols   columns
}

// New returns a writer for database db; the schema must exist.
func New(conn driver.Conn, db string) *Writer {
	return &Writer{conn: conn, db: db, insert: schema.InsertAttempts(db)}
}

// Result says what one Write did.
type Result struct {
	Inserted int // rows written
	LookedUp int // suspect rows looked up
	Present  int // suspect rows found already written, skipped
}

// Write inserts rows in one INSERT. Suspect rows are looked up first and
// those already in the table are left out, so an insert retried after an
// error that may have landed, or records read again after a partition
// changed hands, do not write the same attempt twice. (The lookup can miss
// an insert the server is still processing; ReplacingMergeTree and FINAL
// then fold the copy.) An error means nothing is known to be written.
func (w *Writer) Write(ctx context.Context, rows []batch.Row) (Result, error) {
	var res Result
	present, looked, err := w.present(ctx, rows)
	if err != nil {
		return res, fmt.Errorf("looking up rows that may be written: %w", err)
	}
	res.LookedUp, res.Present = looked, len(present)
	w.cols.reset()
	for i := range rows {
		if present[rows[i].AttemptID] {
			continue
		}
		w.cols.add(&rows[i])
	}
	n := len(w.cols.attemptID)
	if n == 0 {
		return res, nil
	}
	b, err := w.conn.PrepareBatch(ctx, w.insert)
	if err != nil {
		return res, err
	}
	defer func() { _ = b.Close() }()
	for i, col := range w.cols.slices() {
		if err := b.Column(i).Append(col); err != nil {
			return res, fmt.Errorf("column %s: %w", schema.AttemptColumns[i], err)
		}
	}
	if err := b.Send(); err != nil {
		return res, err
	}
	res.Inserted = n
	return res, nil
}

// One look-up sends at most lookupIDs attempt ids, as an external table
// (not in the query's text), and names at most about lookupKeys distinct
// tenants and subscriptions in its text (max_query_size is 256 KiB): a
// batch of suspect rows is one query, or a few, each reading the range of
// the sort key its rows span once.
const (
	lookupIDs  = 20000
	lookupKeys = 2000
)

// present returns the attempt ids of suspect rows already in the table.
func (w *Writer) present(ctx context.Context, rows []batch.Row) (found map[string]bool, looked int, err error) {
	found = map[string]bool{}
	var chunk []*batch.Row
	tenants, subs := map[string]bool{}, map[string]bool{}
	for i := range rows {
		r := &rows[i]
		if !r.Suspect {
			continue
		}
		looked++
		chunk = append(chunk, r)
		tenants[r.Tenant], subs[r.SubscriptionID] = true, true
		if len(chunk) == lookupIDs || len(tenants)+len(subs) >= lookupKeys {
			if err := w.lookUp(ctx, chunk, tenants, subs, found); err != nil {
				return nil, 0, err
			}
			chunk, tenants, subs = chunk[:0], map[string]bool{}, map[string]bool{}
		}
	}
	if len(chunk) > 0 {
		if err := w.lookUp(ctx, chunk, tenants, subs, found); err != nil {
			return nil, 0, err
		}
	}
	return found, looked, nil
}

// lookUp adds to found the ids of chunk's rows already in the table; its
// rows have the given tenants and subscriptions.
func (w *Writer) lookUp(ctx context.Context, chunk []*batch.Row, tenants, subs map[string]bool, found map[string]bool) error {
	ids, err := ext.NewTable("suspect_ids", ext.Column("attempt_id", "String"))
	if err != nil {
		return err
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range chunk {
		if err := ids.Append(r.AttemptID); err != nil {
			return err
		}
		ts := clampTime(r.TS).Unix()
		lo, hi = min(lo, ts), max(hi, ts)
	}
	// The sort key is (tenant, subscription_id, ts, attempt_id): the
	// first three bound the range read.
	q := "SELECT attempt_id FROM " + w.db + "." + schema.TableAttempts +
		" WHERE tenant IN ? AND subscription_id IN ? AND ts >= toDateTime(?) AND ts < toDateTime(?) AND attempt_id IN suspect_ids"
	res, err := w.conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(ids)), q, set(tenants), set(subs), lo, hi+1)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return err
		}
		found[id] = true
	}
	return res.Err()
}

func set(m map[string]bool) clickhouse.GroupSet {
	v := make([]any, 0, len(m))
	for k := range m {
		v = append(v, k)
	}
	return clickhouse.GroupSet{Value: v}
}

// columns are the values of one INSERT, column by column, in
// schema.AttemptColumns order; the slices are reused between inserts.
type columns struct {
	attemptID, eventID, eventType, subscriptionID, tenant []string
	attempt                                               []uint32
	outcome, failureCategory                              []string
	httpStatus                                            []uint16
	durationMS                                            []float64
	ts                                                    []time.Time
	errText                                               []string
	nextAttemptAt, publishedAt                            []time.Time
	responseSample, batchID                               []string
}

func (c *columns) reset() {
	c.attemptID, c.eventID, c.eventType = c.attemptID[:0], c.eventID[:0], c.eventType[:0]
	c.subscriptionID, c.tenant, c.attempt = c.subscriptionID[:0], c.tenant[:0], c.attempt[:0]
	c.outcome, c.failureCategory, c.httpStatus = c.outcome[:0], c.failureCategory[:0], c.httpStatus[:0]
	c.durationMS, c.ts, c.errText = c.durationMS[:0], c.ts[:0], c.errText[:0]
	c.nextAttemptAt, c.publishedAt, c.responseSample = c.nextAttemptAt[:0], c.publishedAt[:0], c.responseSample[:0]
	c.batchID = c.batchID[:0]
}

func (c *columns) add(r *batch.Row) {
	c.attemptID = append(c.attemptID, r.AttemptID)
	c.eventID = append(c.eventID, r.EventID)
	c.eventType = append(c.eventType, r.EventType)
	c.subscriptionID = append(c.subscriptionID, r.SubscriptionID)
	c.tenant = append(c.tenant, r.Tenant)
	c.attempt = append(c.attempt, uint32(min(max(r.Attempt.Attempt, 0), math.MaxUint32)))
	c.outcome = append(c.outcome, r.Outcome)
	c.failureCategory = append(c.failureCategory, r.FailureCategory)
	c.httpStatus = append(c.httpStatus, uint16(min(max(r.HTTPStatus, 0), math.MaxUint16)))
	c.durationMS = append(c.durationMS, r.DurationMS)
	c.ts = append(c.ts, clampTime(r.TS))
	c.errText = append(c.errText, r.Error)
	c.nextAttemptAt = append(c.nextAttemptAt, clampTime(r.NextAttemptAt))
	c.publishedAt = append(c.publishedAt, clampTime(r.PublishedAt))
	c.responseSample = append(c.responseSample, r.ResponseSample)
	c.batchID = append(c.batchID, r.BatchID)
}

func (c *columns) slices() []any {
	return []any{c.attemptID, c.eventID, c.eventType, c.subscriptionID, c.tenant, c.attempt, c.outcome,
		c.failureCategory, c.httpStatus, c.durationMS, c.ts, c.errText, c.nextAttemptAt, c.publishedAt, c.responseSample,
		c.batchID}
}

// The range every time column holds on every server version (DateTime's;
// DateTime64's is wider). Zero (absent) times become the epoch, which the
// README documents as "none".
var (
	minTime = time.Unix(0, 0).UTC()
	maxTime = time.Date(2105, 12, 31, 23, 59, 59, 0, time.UTC)
)

// clampTime keeps a time inside what the columns hold: one record with a
// time out of range must not fail every insert of its batch forever.
func clampTime(t time.Time) time.Time {
	switch {
	case t.Before(minTime):
		return minTime
	case t.After(maxTime):
		return maxTime
	}
	return t.UTC()
}
