package recorder

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/internal/batch"
	"github.com/hookpipe/hookpipe/recorder/internal/store"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

// readmeQueries returns the ```sql blocks of docs/analytics.md.
func readmeQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "analytics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// analystData is a day of traffic as the deliverer records it: a healthy
// endpoint, a flaky one (503, then success), one that dead-letters (404),
// one that times out to exhaustion, held-back attempts, and one that takes
// batches.
func analystData(now time.Time) []topics.Attempt {
	var out []topics.Attempt
	add := func(sub, tenant, event string, attempt int, outcome, category string, status int, ms float64, ts time.Time) {
		a := topics.Attempt{AttemptID: topics.NewAttemptID(), EventID: event, EventType: "order.created", SubscriptionID: sub,
			Tenant: tenant, Attempt: attempt, Outcome: outcome, FailureCategory: category, HTTPStatus: status,
			DurationMS: ms, TS: ts, PublishedAt: ts.Add(-time.Duration(attempt) * 7 * time.Second)}
		if outcome == topics.OutcomeRetry {
			a.NextAttemptAt, a.Error = ts.Add(5*time.Second), "endpoint answered 503"
		}
		out = append(out, a)
	}
	for i := range 40 {
		ts := now.Add(-time.Duration(40-i) * 3 * time.Minute)
		ev := fmt.Sprintf("evt_%d", i)
		add("sub_ok", "acme", ev, 1, topics.OutcomeSuccess, "", 200, 20+float64(i%7), ts)
		add("sub_flaky", "acme", ev, 1, topics.OutcomeRetry, topics.FailureServerError, 503, 80, ts)
		add("sub_flaky", "acme", ev, 2, topics.OutcomeSuccess, "", 200, 95, ts.Add(6*time.Second))
		add("sub_gone", "globex", ev, 1, topics.OutcomeDead, topics.FailurePermanent4xx, 404, 12, ts)
		if i%4 == 0 {
			add("sub_slow", "", ev, 1, topics.OutcomeRetry, topics.FailureTimeout, 0, 15000, ts)
			add("sub_slow", "", ev, 2, topics.OutcomeDead, topics.FailureTimeout, 0, 15000, ts.Add(time.Minute))
			add("sub_slow", "", ev, 3, topics.OutcomeBlocked, topics.FailureKeyHeld, 0, 0, ts.Add(2*time.Minute))
			add("sub_ok", "acme", ev+"_t", 1, topics.OutcomeThrottled, "", 0, 0, ts)
		}
		// A batching endpoint: events in batches of three, one request each.
		add("sub_batch", "acme", ev, 1, topics.OutcomeSuccess, "", 200, 40, now.Add(-time.Duration(40-i/3*3)*3*time.Minute))
		out[len(out)-1].BatchID = topics.BatchID([]string{strconv.Itoa(i / 3)})
	}
	return out
}

// TestReadmeQueries runs every query of docs/analytics.md, as written but for the
// database name, against the test server with a day of traffic recorded:
// each must run and return rows.
func TestReadmeQueries(t *testing.T) {
	t.Parallel()
	conn, _, db := chtest.Database(t)
	ctx := chtest.Ctx(t, 2*time.Minute)
	if _, err := schema.Migrate(ctx, conn, db, 90); err != nil {
		t.Fatal(err)
	}
	data := analystData(time.Now().Add(-time.Minute))
	b := batch.New(len(data))
	for i := range data {
		b.Add(&kgo.Record{Topic: "attempts", Offset: int64(i)}, &data[i], false, time.Now())
	}
	if _, err := store.New(conn, db).Write(ctx, b.Rows()); err != nil {
		t.Fatal(err)
	}
	qs := readmeQueries(t)
	if len(qs) < 10 {
		t.Fatalf("docs/analytics.md has %d sql blocks, want at least ten", len(qs))
	}
	for i, q := range qs {
		q = strings.ReplaceAll(q, "webhooks.", db+".")
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Errorf("analytics.md query %d failed: %v\n%s", i+1, err, q)
			continue
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Errorf("analytics.md query %d: %v", i+1, err)
		}
		rows.Close()
		if n == 0 {
			t.Errorf("analytics.md query %d returned no rows on a day of traffic:\n%s", i+1, q)
		}
	}
}
