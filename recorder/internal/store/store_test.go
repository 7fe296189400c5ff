package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/internal/batch"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/topics"
)

func TestClampTime(t *testing.T) {
	ts := time.Date(2026, 11, 22, 10, 0, 0, 5e6, time.FixedZone("x", 3600))
	for _, tc := range []struct{ in, want time.Time }{
		{time.Time{}, time.Unix(0, 0).UTC()},
		{time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Unix(0, 0).UTC()},
		{ts, ts.UTC()},
		{time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2105, 12, 31, 23, 59, 59, 0, time.UTC)},
	} {
		if got := clampTime(tc.in); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("clampTime(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// base is the attempts' time. A copy of an attempt record carries the
// record's own ts, so every call stamps the same one: ts is in the sort key,
// at whole seconds, and time.Now() per call would make copies that cross a
// second boundary distinct rows.
var base = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func rows(suspect bool, ids ...string) *batch.Batch {
	b := batch.New(len(ids))
	for i, id := range ids {
		a := topics.Attempt{AttemptID: id, EventID: "evt", SubscriptionID: "sub_" + id, Tenant: "acme", Attempt: 1,
			Outcome: topics.OutcomeSuccess, HTTPStatus: 200, DurationMS: 1.5, TS: base.Add(time.Duration(i) * time.Second)}
		b.Add(&kgo.Record{Topic: "t", Offset: int64(i)}, &a, suspect, time.Now())
	}
	return b
}

// TestWriteSkipsWhatIsThere: suspect rows already in the table are not
// inserted again; rows not suspect are not looked up; values out of the
// columns' range do not fail the insert.
func TestWriteSkipsWhatIsThere(t *testing.T) {
	conn, _, db := chtest.Database(t)
	ctx := chtest.Ctx(t, time.Minute)
	if _, err := schema.Migrate(ctx, conn, db, 0); err != nil {
		t.Fatal(err)
	}
	w := New(conn, db)
	res, err := w.Write(ctx, rows(false, "a", "b").Rows())
	if err != nil || res.Inserted != 2 || res.LookedUp != 0 || res.Present != 0 {
		t.Fatalf("first write: %+v, %v", res, err)
	}
	// The same two plus a new one, all suspect: only the new one goes in.
	b := rows(true, "a", "b", "c")
	res, err = w.Write(ctx, b.Rows())
	if err != nil || res.Inserted != 1 || res.LookedUp != 3 || res.Present != 2 {
		t.Fatalf("suspect write: %+v, %v; want 1 inserted, 3 looked up, 2 present", res, err)
	}
	// Not suspect: written again without a look (the table folds them).
	res, err = w.Write(ctx, rows(false, "a").Rows())
	if err != nil || res.Inserted != 1 {
		t.Fatalf("plain write: %+v, %v", res, err)
	}
	if n := chtest.Count(t, conn, "SELECT count() FROM "+db+".attempts"); n != 4 {
		t.Errorf("count() = %d, want 4 (a, b, c and a copy of a)", n)
	}
	if n := chtest.Count(t, conn, "SELECT count() FROM "+db+".attempts FINAL"); n != 3 {
		t.Errorf("count() FINAL = %d, want 3", n)
	}

	// Out-of-range values.
	odd := batch.New(1)
	odd.Add(&kgo.Record{Topic: "t"}, &topics.Attempt{AttemptID: "odd", SubscriptionID: "s", Outcome: "success", Attempt: -3,
		HTTPStatus: 70000, TS: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), NextAttemptAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, false, time.Now())
	if res, err := w.Write(ctx, odd.Rows()); err != nil || res.Inserted != 1 {
		t.Fatalf("out-of-range values: %+v, %v", res, err)
	}
	var attempt uint32
	var status uint16
	var ts time.Time
	if err := conn.QueryRow(ctx, "SELECT attempt, http_status, ts FROM "+db+".attempts WHERE attempt_id = 'odd'").Scan(&attempt, &status, &ts); err != nil {
		t.Fatal(err)
	}
	if attempt != 0 || status != 65535 || ts.Unix() != 0 {
		t.Errorf("out-of-range values stored as attempt %d, status %d, ts %v", attempt, status, ts)
	}

	// Many suspect rows of many subscriptions: the look-up is split by
	// the subscriptions its text names.
	var ids []string
	for i := range 2500 {
		ids = append(ids, "many_"+string(rune('a'+i%26))+"_"+time.Duration(i).String())
	}
	if res, err := w.Write(ctx, rows(false, ids...).Rows()); err != nil || res.Inserted != len(ids) {
		t.Fatalf("2500 rows: %+v, %v", res, err)
	}
	if res, err := w.Write(ctx, rows(true, ids...).Rows()); err != nil || res.Inserted != 0 || res.Present != len(ids) {
		t.Fatalf("2500 suspect rows again: %+v, %v; want all present", res, err)
	}

	// More suspect rows of one subscription than one look-up sends.
	one := func(suspect bool) *batch.Batch {
		b := batch.New(lookupIDs + 1)
		for i := range lookupIDs + 1 {
			a := topics.Attempt{AttemptID: "one_" + strconv.Itoa(i), EventID: "evt", SubscriptionID: "sub_one", Tenant: "acme",
				Attempt: 1, Outcome: topics.OutcomeSuccess, HTTPStatus: 200, TS: base.Add(time.Duration(i) * time.Millisecond)}
			b.Add(&kgo.Record{Topic: "t", Offset: int64(i)}, &a, suspect, time.Now())
		}
		return b
	}
	if res, err := w.Write(ctx, one(false).Rows()); err != nil || res.Inserted != lookupIDs+1 {
		t.Fatalf("%d rows: %+v, %v", lookupIDs+1, res, err)
	}
	if res, err := w.Write(ctx, one(true).Rows()); err != nil || res.Inserted != 0 || res.Present != lookupIDs+1 {
		t.Fatalf("%d suspect rows again: %+v, %v; want all present", lookupIDs+1, res, err)
	}
}
