package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/topics"
)

// TestTenantRetention: set-quota --retention-days sets, lists and resets a
// tenant's retention; a negative or non-numeric one is a usage error.
func TestTenantRetention(t *testing.T) {
	h := newHarness(t, true)
	var set []topics.Tenant
	h.json(&set, "tenants", "set-quota", "acme", "--retention-days", "30")
	if len(set) != 1 || set[0].RetentionDays == nil || *set[0].RetentionDays != 30 || set[0].RatePerS != nil {
		t.Fatalf("set-quota printed %+v", set)
	}
	h.ok("tenants", "set-quota", "archive", "--retention-days", "unlimited")
	if out := h.ok("tenants", "list"); !strings.Contains(out, "RETENTION") || !strings.Contains(out, "30d") || !strings.Contains(out, "unlimited") {
		t.Fatalf("list as text:\n%s", out)
	}
	h.ok("tenants", "set-quota", "archive", "--retention-days", "default")
	var list []topics.Tenant
	h.json(&list, "tenants", "list")
	if len(list) != 1 || list[0].ID != "acme" {
		t.Fatalf("list %+v, want acme only (archive is back to the defaults)", list)
	}
	for _, v := range []string{"-3", "0.5", "month"} {
		if msg := h.fails(2, "tenants", "set-quota", "acme", "--retention-days", v); !strings.Contains(msg, "--retention-days") {
			t.Errorf("--retention-days %s: %q", v, msg)
		}
	}
}

// TestExpire: on ClickHouse 18.16, two tenants' attempts of 5, 20 and 40
// days ago; acme keeps 10 days, globex the default (30): the run deletes
// exactly acme's two old attempts and globex's oldest; a dry run deletes
// nothing; bad defaults are usage errors.
func TestExpire(t *testing.T) {
	h := newHarness(t, true)
	now := time.Now().UTC()
	at := func(tenant string, days int) topics.Attempt {
		return topics.Attempt{AttemptID: topics.NewAttemptID(), EventID: tenant + "-" + strconv.Itoa(days), EventType: "t",
			SubscriptionID: "sub_" + tenant, Tenant: tenant, Attempt: 1, Outcome: topics.OutcomeSuccess, HTTPStatus: 200,
			DurationMS: 5, TS: now.Add(-time.Duration(days) * 24 * time.Hour)}
	}
	r := record(h, []topics.Attempt{at("acme", 5), at("acme", 20), at("acme", 40), at("globex", 5), at("globex", 20), at("globex", 40)})
	h.ok("tenants", "set-quota", "acme", "--retention-days", "10")
	left := func() string {
		rows, err := r.conn.Query(context.Background(), "SELECT event_id FROM "+r.db+".attempts ORDER BY event_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return strings.Join(ids, " ")
	}
	all := left()

	h.env[envRetentionDays] = "30"
	var dry expireSummary
	h.json(&dry, "clickhouse", "expire", "--dry-run")
	if len(dry.Tables) != 3 || dry.Tables[0].Rows != 3 || dry.DefaultDays != 30 || dry.Tenants["acme"] != 10 || left() != all {
		t.Fatalf("dry run: %+v; left %s", dry, left())
	}
	if out := h.ok("clickhouse", "expire", "--wait"); !strings.Contains(out, "attempts") || !strings.Contains(out, "done") {
		t.Fatalf("expire:\n%s", out)
	}
	if got, want := left(), "acme-5 globex-20 globex-5"; got != want {
		t.Fatalf("left %q, want %q", got, want)
	}
	var again expireSummary
	h.json(&again, "clickhouse", "expire", "--default-days", "30")
	for _, e := range again.Tables {
		if e.Rows != 0 {
			t.Errorf("second run: %+v", e)
		}
	}

	h.fails(2, "clickhouse", "expire", "--default-days", "-1")
	h.fails(2, "clickhouse", "expire", "--default-days", "ninety")
	h.env[envRetentionDays] = "-5"
	if msg := h.fails(2, "clickhouse", "expire"); !strings.Contains(msg, envRetentionDays) {
		t.Errorf("bad %s: %q", envRetentionDays, msg)
	}
}

// TestExpungeCommand: messages expunge clears the event's samples and
// records it; an unknown event or a bad id is a clear error.
func TestExpungeCommand(t *testing.T) {
	h := newHarness(t, true)
	now := time.Now().UTC()
	at := func(ev, sample string) topics.Attempt {
		return topics.Attempt{AttemptID: topics.NewAttemptID(), EventID: ev, EventType: "t", SubscriptionID: "sub_a", Tenant: "acme",
			Attempt: 1, Outcome: topics.OutcomeSuccess, HTTPStatus: 200, DurationMS: 5, TS: now, PublishedAt: now.Add(-time.Second),
			ResponseSample: sample}
	}
	r := record(h, []topics.Attempt{at("evt_secret", `{"ssn":"123"}`), at("evt_other", "ok")})
	var sum expungeSummary
	h.json(&sum, "messages", "expunge", "evt_secret", "--wait")
	if sum.SamplesCleared != 1 || sum.Tenant != "acme" || !sum.Waited ||
		sum.EventsTopicUntil.Before(now.Add(6*24*time.Hour)) || sum.EventsTopicUntil.After(now.Add(8*24*time.Hour)) {
		t.Fatalf("expunge: %+v", sum)
	}
	var samples uint64
	if err := r.conn.QueryRow(context.Background(), "SELECT countIf(response_sample != '') FROM "+r.db+".attempts").Scan(&samples); err != nil {
		t.Fatal(err)
	}
	if samples != 1 {
		t.Errorf("%d samples left, want evt_other's", samples)
	}
	if _, ok, err := retention.Expunged(context.Background(), r.conn, r.db, "evt_secret"); err != nil || !ok {
		t.Errorf("not recorded as expunged: %v", err)
	}
	if out := h.ok("messages", "expunge", "evt_secret"); !strings.Contains(out, "events topic keeps the record until") {
		t.Errorf("text output:\n%s", out)
	}
	if msg := h.fails(1, "messages", "expunge", "evt_never"); !strings.Contains(msg, "no attempt of event evt_never recorded") {
		t.Errorf("unknown event: %q", msg)
	}
	h.fails(2, "messages", "expunge", "evt with space")
	h.fails(2, "messages", "expunge")
}

// TestReplayAndRedriveSkipExpunged: with ClickHouse configured, replay
// and dlq redrive skip the events expunged there (evt_a1, dead-lettered,
// also published) and say so; the others go as before.
func TestReplayAndRedriveSkipExpunged(t *testing.T) {
	h := newHarness(t, true)
	s := seedDLQ(h)
	now := time.Now().UTC()
	record(h, []topics.Attempt{{AttemptID: topics.NewAttemptID(), EventID: "evt_a1", EventType: "order.created", SubscriptionID: "sub_a",
		Tenant: "acme", Attempt: 8, Outcome: topics.OutcomeDead, HTTPStatus: 503, DurationMS: 5, TS: now.Add(-3 * time.Hour),
		PublishedAt: now.Add(-4 * time.Hour), ResponseSample: "echo"}})
	h.ok("messages", "expunge", "evt_a1", "--wait")

	var dry redriveSummary
	h.json(&dry, "dlq", "redrive", "--subscription", "sub_a", "--dry-run")
	if got := s.names(dry.DeadLetters); dry.ToRedrive != 1 || dry.Expunged != 1 || len(got) != 1 || got[0] != "a2" {
		t.Fatalf("redrive dry run: %+v (%v), want a2 only, a1 expunged", dry, got)
	}

	h.create("--id", "sub_r", "--url", "https://r.example/", "--events", "order.*", "--tenant", "acme")
	at := []time.Time{now.Add(-time.Hour), now.Add(-time.Hour)}
	h.publishAt([]string{`{"id":"evt_a1","type":"order.created","tenant":"acme","data":{"card":"4242"}}`,
		`{"id":"evt_ok","type":"order.created","tenant":"acme","data":{}}`}, []string{"", ""}, at)
	var sum replaySummary
	h.json(&sum, "replay", "--subscription", "sub_r", "--since", "2h", "--rate", "1000")
	if sum.Scanned != 2 || sum.Replayed != 1 || sum.Expunged != 1 {
		t.Fatalf("replay: %+v, want evt_ok replayed and evt_a1 skipped", sum)
	}
	for _, r := range h.records(h.names.Deliveries()) {
		if d, err := topics.DecodeDelivery(r.Value); err != nil || d.EventID != "evt_ok" {
			t.Errorf("delivery %s (%v), want evt_ok only", r.Value, err)
		}
	}

	h.env[envClickHouseAddr] = "127.0.0.1:1"
	if msg := h.fails(1, "replay", "--subscription", "sub_r", "--since", "2h", "--timeout", "3s"); !strings.Contains(msg, "cannot reach ClickHouse") {
		t.Errorf("replay with ClickHouse unreachable: %q", msg)
	}
}
