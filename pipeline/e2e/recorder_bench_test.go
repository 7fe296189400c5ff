package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkRecorder is the recorder's part of `make bench`: attempt records
// pre-produced to the attempts topic, and the time until all of them are in
// ClickHouse (recorder start included), next to a raw clickhouse-go batch
// insert of the same rows, in batches of the same size, into the same
// schema (views included) on the same server, in the same run. The raw
// insert runs before and after the recorder and the ratio is to its mean,
// so that a busy moment of a shared machine weighs on both sides.
func BenchmarkRecorder(b *testing.B) {
	const (
		n         = 200_000
		batchRows = 5000
	)
	for b.Loop() {
		e := newEnv(b)
		conn, db := e.clickhouseDB()
		e.vars["WEBHOOKS_RECORDER_BATCH_ROWS"] = strconv.Itoa(batchRows)
		as := benchAttempts(n)

		// The raw limit, each time into a database of its own with the schema.
		raw := func(name string) float64 {
			rawDB := db + "_" + name
			b.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+rawDB) })
			return rawInsert(b, e, conn, rawDB, as, batchRows)
		}
		rawBefore := raw("raw1")

		recs := make([]*kgo.Record, len(as))
		for i := range as {
			recs[i] = &kgo.Record{Topic: e.names.Attempts(), Key: []byte(as[i].SubscriptionID), Value: as[i].Encode()}
		}
		e.produce(recs...)

		start := time.Now()
		e.startRecorder()
		var first time.Duration
		wait(b, 10*time.Minute, "every attempt in ClickHouse", func() bool {
			var got uint64
			if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+db+".attempts").Scan(&got); err != nil {
				return false // not created yet
			}
			if got > 0 && first == 0 {
				first = time.Since(start)
			}
			return got >= n
		})
		took := time.Since(start)
		rec := float64(n) / took.Seconds()
		rawAfter := raw("raw2")
		rawMean := (rawBefore + rawAfter) / 2

		fmt.Fprintf(os.Stdout, "\n%-56s %12s\n", "recorder: attempts into ClickHouse", "value")
		fmt.Fprintf(os.Stdout, "%-56s %12d\n", fmt.Sprintf("rows (batches of %d)", batchRows), n)
		fmt.Fprintf(os.Stdout, "%-56s %12.0f\n", "raw clickhouse-go batch insert, before (rows/s)", rawBefore)
		fmt.Fprintf(os.Stdout, "%-56s %12.0f\n", "raw clickhouse-go batch insert, after (rows/s)", rawAfter)
		fmt.Fprintf(os.Stdout, "%-56s %12.0f\n", "recorder, Kafka to ClickHouse, start included (rows/s)", rec)
		fmt.Fprintf(os.Stdout, "%-56s %12.2f\n", "ratio recorder / raw mean (target >= 0.5)", rec/rawMean)
		fmt.Fprintf(os.Stdout, "%-56s %12s\n", "recorder start to first row", first.Round(time.Millisecond))
		b.ReportMetric(rawMean, "raw-rows/s")
		b.ReportMetric(rec, "recorder-rows/s")
		b.ReportMetric(rec/rawMean, "ratio")
	}
}

// benchAttempts are n attempts as a busy deliverer records them: 200
// subscriptions of 20 tenants, mostly successes, some retries and dead
// letters.
func benchAttempts(n int) []topics.Attempt {
	now := time.Now().UTC().Add(-time.Hour)
	out := make([]topics.Attempt, n)
	for i := range out {
		a := topics.Attempt{
			AttemptID: topics.NewAttemptID(), EventID: fmt.Sprintf("evt_%d", i/2), EventType: "order.created",
			SubscriptionID: fmt.Sprintf("sub_%d", i%200), Tenant: fmt.Sprintf("tenant_%d", i%20), Attempt: 1,
			Outcome: topics.OutcomeSuccess, HTTPStatus: 200, DurationMS: float64(i%500) / 7,
			TS: now.Add(time.Duration(i) * time.Millisecond), PublishedAt: now.Add(time.Duration(i)*time.Millisecond - 40*time.Millisecond),
		}
		switch i % 20 {
		case 1:
			a.Outcome, a.FailureCategory, a.HTTPStatus, a.Error = topics.OutcomeRetry, topics.FailureServerError, 503, "endpoint answered 503"
			a.NextAttemptAt = a.TS.Add(5 * time.Second)
		case 2:
			a.Outcome, a.FailureCategory, a.HTTPStatus, a.Error, a.Attempt = topics.OutcomeDead, topics.FailurePermanent4xx, 404, "endpoint answered 404", 3
		}
		out[i] = a
	}
	return out
}

// rawInsert creates the recorder's schema in db and inserts the rows with
// plain clickhouse-go batches (insertRows); it returns rows per second.
func rawInsert(b *testing.B, e *env, conn driver.Conn, db string, as []topics.Attempt, batchRows int) float64 {
	b.Helper()
	createSchema(b, e, db)
	return insertRows(b, conn, db, as, batchRows)
}

// createSchema creates the recorder's schema in db.
func createSchema(b *testing.B, e *env, db string) {
	b.Helper()
	cfg, err := recorder.LoadConfig(func(k string) string {
		if k == "WEBHOOKS_CLICKHOUSE_DATABASE" {
			return db
		}
		return e.getenv(k)
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := recorder.Migrate(context.Background(), cfg); err != nil {
		b.Fatal(err)
	}
}

// insertRows inserts the rows into db's attempts table with plain
// clickhouse-go batches (PrepareBatch, Append row by row, Send), one after
// another; it returns rows per second.
func insertRows(b *testing.B, conn driver.Conn, db string, as []topics.Attempt, batchRows int) float64 {
	b.Helper()
	ctx := context.Background()
	q := "INSERT INTO " + db + ".attempts (attempt_id, event_id, event_type, subscription_id, tenant, attempt, outcome, " +
		"failure_category, http_status, duration_ms, ts, error, next_attempt_at, published_at)"
	epoch := time.Unix(0, 0).UTC()
	orEpoch := func(t time.Time) time.Time {
		if t.IsZero() {
			return epoch
		}
		return t
	}
	total := len(as)
	start := time.Now()
	for len(as) > 0 {
		chunk := as[:min(batchRows, len(as))]
		as = as[len(chunk):]
		batch, err := conn.PrepareBatch(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range chunk {
			if err := batch.Append(a.AttemptID, a.EventID, a.EventType, a.SubscriptionID, a.Tenant, uint32(a.Attempt), a.Outcome,
				a.FailureCategory, uint16(a.HTTPStatus), a.DurationMS, a.TS, a.Error, orEpoch(a.NextAttemptAt), orEpoch(a.PublishedAt)); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(total) / time.Since(start).Seconds()
}
