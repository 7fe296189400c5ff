package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/recorder"
	"github.com/hookpipe/hookpipe/topics"
)

// clickhouseDB points the env's recorder at a fresh database on the test
// server (WEBHOOKS_TEST_CLICKHOUSE_ADDR; the test is skipped without it),
// dropped at the end, and returns a connection to the server.
func (e *env) clickhouseDB() (driver.Conn, string) {
	e.t.Helper()
	addr := testkit.ClickHouseAddr(e.t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "webhooks_e2e_" + hex.EncodeToString(b)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, ReadTimeout: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			e.t.Errorf("dropping %s: %v", db, err)
		}
		conn.Close()
	})
	e.vars["WEBHOOKS_CLICKHOUSE_ADDR"], e.vars["WEBHOOKS_CLICKHOUSE_DATABASE"] = addr, db
	return conn, db
}

// startRecorder runs the recorder in-process with the env's configuration
// (see clickhouseDB).
func (e *env) startRecorder() (stop func()) {
	return e.startRecorderWith(e.getenv)
}

func (e *env) startRecorderWith(getenv func(string) string) (stop func()) {
	cfg, err := recorder.LoadConfig(getenv)
	if err != nil {
		e.t.Fatal(err)
	}
	log := e.logger().Named("rec")
	return e.run("recorder", func(ctx context.Context) error { return recorder.Run(ctx, cfg, log) })
}

// attemptRecords reads the whole attempts topic as it is now.
func (e *env) attemptRecords() []topics.Attempt {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A fresh client: e.cl may have cached metadata from before the topics
	// existed.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, e.names.Attempts())
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	var out []topics.Attempt
	for _, r := range e.consume(e.names.Attempts(), 30*time.Second, func(recs []*kgo.Record) bool { return int64(len(recs)) >= total }) {
		a, err := topics.DecodeAttempt(r.Value)
		if err != nil {
			e.t.Fatalf("attempt record at %d/%d: %v", r.Partition, r.Offset, err)
		}
		out = append(out, a)
	}
	return out
}

// TestRecorderEndToEnd: every attempt of a small end-to-end run (first-try
// successes, two failures then a success, permanent failures) is in
// webhooks.attempts, once, with its outcome and attempt number.
func TestRecorderEndToEnd(t *testing.T) {
	e := newEnv(t)
	conn, db := e.clickhouseDB()
	metricsAddr := testkit.FreeAddr(t)
	r := newReceiver(t)
	var mu sync.Mutex
	calls := map[string]int{} // flaky: event id -> requests
	r.answer(func(q request, _ http.ResponseWriter) int {
		switch q.Sub {
		case "gone":
			return http.StatusNotFound
		case "flaky":
			mu.Lock()
			defer mu.Unlock()
			calls[q.ID]++
			if calls[q.ID] <= 2 {
				return http.StatusInternalServerError
			}
		}
		return http.StatusNoContent
	})
	for _, s := range []topics.Subscription{
		{ID: "ok", Tenant: "acme", URL: r.url("ok"), EventTypes: []string{"order.*"}, Enabled: true},
		{ID: "flaky", Tenant: "acme", URL: r.url("flaky"), EventTypes: []string{"*"}, Enabled: true, RetrySchedule: []string{"1s", "1s", "1s"}},
		{ID: "gone", Tenant: "acme", URL: r.url("gone"), EventTypes: []string{"*"}, Enabled: true},
	} {
		r.trust(e.subscribe(s))
	}
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	e.startRecorderWith(func(k string) string {
		if k == config.EnvHTTPAddr {
			return metricsAddr
		}
		return e.getenv(k)
	})
	const events = 10
	for i := range events {
		e.publish(topics.Event{ID: fmt.Sprintf("evt_%d", i), Type: "order.created", Tenant: "acme", Data: json.RawMessage(`{"n":1}`)})
	}
	// 10 + 10 delivered; 30 flaky attempts, 10 ok, 10 gone: 50 attempts.
	const want = events * 5
	wait(t, 90*time.Second, "every delivery", func() bool { return r.count() == 2*events })
	var atts []topics.Attempt
	wait(t, 30*time.Second, "every attempt record", func() bool { atts = e.attemptRecords(); return len(atts) >= want })
	if len(atts) != want {
		t.Fatalf("%d attempt records, want %d", len(atts), want)
	}

	type row struct {
		outcome string
		attempt uint32
		sub     string
		event   string
		status  uint16
	}
	stored := map[string]row{}
	wait(t, 60*time.Second, "every attempt in ClickHouse", func() bool {
		rows, err := conn.Query(context.Background(), "SELECT attempt_id, outcome, attempt, subscription_id, event_id, http_status FROM "+db+".attempts")
		if err != nil {
			return false // the recorder has not created the table yet
		}
		defer rows.Close()
		clear(stored)
		for rows.Next() {
			var id string
			var x row
			if err := rows.Scan(&id, &x.outcome, &x.attempt, &x.sub, &x.event, &x.status); err != nil {
				t.Fatal(err)
			}
			stored[id] = x
		}
		return len(stored) >= want
	})
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+db+".attempts").Scan(&n); err != nil || n != want {
		t.Errorf("count() = %d (%v), want %d: each attempt once", n, err, want)
	}
	perEvent := map[string][]string{} // sub/event -> "attempt:outcome" in attempt order
	for _, a := range atts {
		got, ok := stored[a.AttemptID]
		if !ok {
			t.Errorf("attempt %s (%s %s #%d %s) not in ClickHouse", a.AttemptID, a.SubscriptionID, a.EventID, a.Attempt, a.Outcome)
			continue
		}
		if got.outcome != a.Outcome || int(got.attempt) != a.Attempt || got.sub != a.SubscriptionID || got.event != a.EventID || int(got.status) != a.HTTPStatus {
			t.Errorf("attempt %s stored as %+v, the record says %+v", a.AttemptID, got, a)
		}
		k := got.sub + "/" + got.event
		for len(perEvent[k]) < int(got.attempt) {
			perEvent[k] = append(perEvent[k], "")
		}
		perEvent[k][got.attempt-1] = fmt.Sprintf("%d:%s", got.attempt, got.outcome)
	}
	for i := range events {
		ev := fmt.Sprintf("evt_%d", i)
		for sub, want := range map[string]string{"ok": "1:success", "flaky": "1:retry 2:retry 3:success", "gone": "1:dead"} {
			if got := strings.Join(perEvent[sub+"/"+ev], " "); got != want {
				t.Errorf("%s %s recorded as %q, want %q", sub, ev, got, want)
			}
		}
	}

	// The recorder's metrics count what it inserted.
	wait(t, 10*time.Second, "the recorder's metrics", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), fmt.Sprintf("webhooks_recorder_rows_inserted_total %d", want)) &&
			strings.Contains(string(body), "webhooks_recorder_clickhouse_up 1")
	})
}
