package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/topics"
)

// recorded is a fresh ClickHouse database on the test server holding the
// attempts given, recorded from the attempts topic by the recorder.
type recorded struct {
	conn driver.Conn
	db   string
}

// record runs the recorder on h's cluster until every attempt is in a new
// database (dropped at the end of the test), and points h's environment at
// it. Without WEBHOOKS_TEST_CLICKHOUSE_ADDR the test is skipped.
func record(h *harness, as []topics.Attempt) *recorded {
	t := h.t
	t.Helper()
	addr := testkit.ClickHouseAddr(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	r := &recorded{db: "webhooks_test_" + hex.EncodeToString(b)}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	r.conn = conn
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+r.db); err != nil {
			t.Errorf("dropping %s: %v", r.db, err)
		}
		conn.Close()
	})
	h.env[envClickHouseAddr], h.env[envClickHouseDatabase] = addr, r.db
	h.env["WEBHOOKS_RECORDER_BATCH_WAIT"] = "50ms"

	recs := make([]*kgo.Record, len(as))
	for i := range as {
		recs[i] = &kgo.Record{Topic: h.names.Attempts(), Key: []byte(as[i].SubscriptionID), Value: as[i].Encode()}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg, err := recorder.LoadConfig(func(k string) string { return h.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- recorder.Run(runCtx, cfg, zap.NewNop()) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("recorder: %v", err)
		}
	}()
	for {
		// The views are written after the table, in the same insert.
		var n, requests, perMinute, latency uint64
		err := conn.QueryRow(ctx, "SELECT (SELECT count() FROM "+r.db+".attempts FINAL), "+
			"(SELECT countIf(outcome IN ('success', 'retry', 'dead')) FROM "+r.db+".attempts FINAL), "+
			"(SELECT sum(attempts) FROM "+r.db+".attempts_per_minute), "+
			"(SELECT countMerge(requests) FROM "+r.db+".latency_per_minute)").Scan(&n, &requests, &perMinute, &latency)
		if err == nil && n == uint64(len(as)) && perMinute == n && latency == requests {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the recorder did not record %d attempts within a minute (last: %d, %v)", len(as), n, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// statsData: sub_a (acme, order.created) made four requests in the last
// day (a first-try success, a 503 then a success, a 404) and was held back
// once, plus a success three days ago; sub_b (globex, invoice.paid) two
// successes and a timeout, and was throttled once.
func statsData(now time.Time) []topics.Attempt {
	at := func(sub, tenant, typ, ev string, n int, outcome, category string, status int, ms float64, ago time.Duration) topics.Attempt {
		return topics.Attempt{AttemptID: topics.NewAttemptID(), EventID: ev, EventType: typ, SubscriptionID: sub, Tenant: tenant,
			Attempt: n, Outcome: outcome, FailureCategory: category, HTTPStatus: status, DurationMS: ms, TS: now.Add(-ago)}
	}
	a := func(ev string, n int, outcome, category string, status int, ms float64, ago time.Duration) topics.Attempt {
		return at("sub_a", "acme", "order.created", ev, n, outcome, category, status, ms, ago)
	}
	b := func(ev string, n int, outcome, category string, status int, ms float64, ago time.Duration) topics.Attempt {
		return at("sub_b", "globex", "invoice.paid", ev, n, outcome, category, status, ms, ago)
	}
	return []topics.Attempt{
		a("e1", 1, topics.OutcomeSuccess, "", 200, 10, time.Hour),
		a("e2", 1, topics.OutcomeRetry, topics.FailureServerError, 503, 100, time.Hour),
		a("e2", 2, topics.OutcomeSuccess, "", 200, 20, 50*time.Minute),
		a("e3", 1, topics.OutcomeDead, topics.FailurePermanent4xx, 404, 30, 2*time.Hour),
		a("e4", 1, topics.OutcomeBlocked, topics.FailureKeyHeld, 0, 0, 3*time.Hour),
		a("e0", 1, topics.OutcomeSuccess, "", 200, 40, 72*time.Hour),
		b("e5", 1, topics.OutcomeSuccess, "", 204, 50, time.Hour),
		b("e6", 1, topics.OutcomeSuccess, "", 200, 70, time.Hour),
		b("e7", 1, topics.OutcomeRetry, topics.FailureTimeout, 0, 1000, 10*time.Minute),
		b("e8", 1, topics.OutcomeThrottled, "", 0, 0, 5*time.Minute),
	}
}

func TestStats(t *testing.T) {
	h := newHarness(t, true)
	record(h, statsData(time.Now()))

	var rep statsReport
	h.json(&rep, "stats")
	if rep.By != "subscription" || len(rep.Rows) != 2 || rep.Rows[0].Key != "sub_a" || rep.Rows[1].Key != "sub_b" {
		t.Fatalf("stats: %+v", rep)
	}
	if d := rep.Until.Sub(rep.Since); d < 24*time.Hour-time.Minute || d > 24*time.Hour+time.Minute {
		t.Errorf("default window %v to %v, want the last 24h", rep.Since, rep.Until)
	}
	a, b := rep.Rows[0], rep.Rows[1]
	if a.Requests != 4 || a.Succeeded != 2 || *a.SuccessRate != 0.5 || a.FirstRequests != 3 || a.FirstSucceeded != 1 ||
		a.Dead != 1 || a.HeldBack != 1 || len(a.Failures) != 2 || a.Failures["server_error"] != 1 || a.Failures["permanent_4xx"] != 1 {
		t.Errorf("sub_a: %+v", a)
	}
	if a.P50MS == nil || a.P99MS == nil || *a.P50MS < 10 || *a.P50MS > *a.P99MS || *a.P99MS > 100 {
		t.Errorf("sub_a durations p50 %v p99 %v, want 10 <= p50 <= p99 <= 100", a.P50MS, a.P99MS)
	}
	if b.Requests != 3 || b.Succeeded != 2 || b.FirstRequests != 3 || b.Dead != 0 || b.HeldBack != 1 || b.Failures["timeout"] != 1 {
		t.Errorf("sub_b: %+v", b)
	}

	h.json(&rep, "stats", "--since", "4d")
	if rep.Rows[0].Requests != 5 || rep.Rows[0].Succeeded != 3 {
		t.Errorf("--since 4d: sub_a %+v, want the success of 3 days ago counted", rep.Rows[0])
	}
	h.json(&rep, "stats", "--by", "tenant")
	if len(rep.Rows) != 2 || rep.Rows[0].Key != "acme" || rep.Rows[0].Requests != 4 || rep.Rows[1].Key != "globex" {
		t.Errorf("--by tenant: %+v", rep.Rows)
	}
	h.json(&rep, "stats", "--by", "type", "--type", "invoice.*")
	if len(rep.Rows) != 1 || rep.Rows[0].Key != "invoice.paid" || rep.Rows[0].Requests != 3 {
		t.Errorf("--by type --type invoice.*: %+v", rep.Rows)
	}
	h.json(&rep, "stats", "--subscription", "sub_b", "--tenant", "globex")
	if len(rep.Rows) != 1 || rep.Rows[0].Key != "sub_b" {
		t.Errorf("--subscription sub_b: %+v", rep.Rows)
	}
	h.json(&rep, "stats", "--subscription", "sub_none")
	if len(rep.Rows) != 0 {
		t.Errorf("--subscription sub_none: %+v", rep.Rows)
	}
	// A window with only a held-back attempt: no requests, no rates.
	h.json(&rep, "stats", "--subscription", "sub_b", "--since", "6m")
	if len(rep.Rows) != 1 || rep.Rows[0].Requests != 0 || rep.Rows[0].SuccessRate != nil || rep.Rows[0].P50MS != nil || rep.Rows[0].HeldBack != 1 {
		t.Errorf("window with only a throttled attempt: %+v", rep.Rows)
	}

	out := h.ok("stats")
	for _, want := range []string{"SUBSCRIPTION", "REQUESTS", "FIRST TRY", "P99", "sub_a", "50.00%", "33.33%",
		"permanent_4xx:1 server_error:1", "timeout:1", "66.67%"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if out := h.ok("stats", "--subscription", "sub_none"); !strings.Contains(out, "no attempts recorded") {
		t.Errorf("empty stats: %q", out)
	}
}

func TestStatsErrors(t *testing.T) {
	h := newHarness(t, false)
	for _, args := range [][]string{
		{"stats", "--by", "endpoint"},
		{"stats", "--type", "a b"},
		{"stats", "--since", "yesterday"},
		{"stats", "--since", "1h", "--until", "2h"},
		{"stats", "--database", "web-hooks"},
		{"stats", "--clickhouse", "nohostport"},
		{"clickhouse", "drop-partitions"},
		{"clickhouse", "drop-partitions", "--older-than", "soon"},
	} {
		h.fails(2, args...)
	}
	if msg := h.fails(1, "stats", "--clickhouse", "127.0.0.1:1", "--timeout", "3s"); !strings.Contains(msg, "cannot reach ClickHouse at 127.0.0.1:1") {
		t.Errorf("unreachable ClickHouse: %q", msg)
	}
	if addr := os.Getenv("WEBHOOKS_TEST_CLICKHOUSE_ADDR"); addr != "" {
		msg := h.fails(1, "stats", "--clickhouse", addr, "--database", "webhooks_test_never_created")
		if !strings.Contains(msg, "no attempts recorded in database webhooks_test_never_created") {
			t.Errorf("missing database: %q", msg)
		}
	}
}

func TestDropPartitions(t *testing.T) {
	h := newHarness(t, true)
	old := func(ts time.Time) topics.Attempt {
		return topics.Attempt{AttemptID: topics.NewAttemptID(), EventID: "e", EventType: "t", SubscriptionID: "sub_a",
			Attempt: 1, Outcome: topics.OutcomeSuccess, HTTPStatus: 200, DurationMS: 5, TS: ts}
	}
	now := time.Now().UTC()
	r := record(h, []topics.Attempt{
		old(time.Date(2020, 1, 10, 0, 0, 0, 0, time.UTC)), old(time.Date(2020, 1, 31, 23, 0, 0, 0, time.UTC)),
		old(time.Date(2020, 2, 3, 0, 0, 0, 0, time.UTC)), old(now.Add(-time.Hour)),
	})
	count := func(table string) uint64 {
		var n uint64
		if err := r.conn.QueryRow(context.Background(), "SELECT count() FROM "+r.db+"."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	var dry struct {
		DryRun  bool        `json:"dry_run"`
		Dropped []partition `json:"dropped"`
	}
	h.json(&dry, "clickhouse", "drop-partitions", "--older-than", "90d", "--dry-run")
	var got []string
	for _, p := range dry.Dropped {
		got = append(got, p.Table+"/"+p.Partition)
	}
	want := "attempts/202001 attempts_per_minute/202001 latency_per_minute/202001 attempts/202002 attempts_per_minute/202002 latency_per_minute/202002"
	if !dry.DryRun || strings.Join(got, " ") != want {
		t.Errorf("--dry-run listed %v, want %s", got, want)
	}
	if n := count("attempts"); n != 4 {
		t.Fatalf("--dry-run dropped rows: %d left", n)
	}

	out := h.ok("clickhouse", "drop-partitions", "--older-than", "90d")
	if !strings.Contains(out, "dropped 6 partitions (3 attempts)") {
		t.Errorf("output: %s", out)
	}
	if n := count("attempts"); n != 1 {
		t.Errorf("%d attempts left, want the recent one", n)
	}
	if n := count("attempts_per_minute"); n != 1 {
		t.Errorf("%d per-minute rows left, want the recent one", n)
	}
	if out := h.ok("clickhouse", "drop-partitions", "--older-than", "90d"); !strings.Contains(out, "nothing to drop") {
		t.Errorf("second run: %s", out)
	}
	var again json.RawMessage
	h.json(&again, "clickhouse", "drop-partitions", "--older-than", "90d")
}

func TestMonthEnd(t *testing.T) {
	for id, want := range map[string]string{"202001": "2020-02-01", "202012": "2021-01-01", "202613": "", "20201": "", "x": "", "all": ""} {
		got, ok := monthEnd(id)
		if ok != (want != "") || ok && got.Format(time.DateOnly) != want {
			t.Errorf("monthEnd(%q) = %v, %t; want %q", id, got, ok, want)
		}
	}
}
