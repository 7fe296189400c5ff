package api

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

// TestDeadLetters: the dead-letter list is webhookctl's, newest first,
// redriven ones hidden unless all, a tenant key limited to its tenant.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	dead := func(id, sub, tenant, category string, at time.Time) *kgo.Record {
		dl := topics.DeadLetter{Delivery: &topics.Delivery{SubscriptionID: sub, EventID: id, EventType: "order.created", Tenant: tenant,
			Timestamp: at.Format(time.RFC3339), Data: []byte(`{"n":1}`), Attempt: 3}, Reason: "endpoint answered 503",
			FailureCategory: category, Attempts: 3, DeadAt: at, Source: topics.Source{Topic: c.names.Deliveries()}}
		return &kgo.Record{Topic: c.names.DLQ(), Key: []byte(sub + "/" + id), Value: dl.Encode(), Partition: 0}
	}
	recs := []*kgo.Record{dead("evt_1", "sub_a", "acme", "exhausted", t0), dead("evt_2", "sub_a", "acme", "permanent_4xx", t0.Add(time.Minute)),
		dead("evt_3", "sub_g", "globex", "exhausted", t0.Add(2*time.Minute))}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	marker := topics.DeadLetter{Redriven: &topics.Source{Topic: c.names.DLQ(), Partition: 0, Offset: recs[0].Offset}, DeadAt: time.Now()}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: c.names.DLQ(), Key: recs[0].Key, Value: marker.Encode(), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	type list struct {
		Data    []service.DeadLetter `json:"data"`
		Matched int                  `json:"matched"`
	}
	ids := func(l list) (out []string) {
		for _, d := range l.Data {
			out = append(out, d.EventID)
		}
		return out
	}
	var l list
	r.must(http.StatusOK, "GET", "/v1/dlq", adminKey, nil, &l)
	if got := ids(l); len(got) != 2 || got[0] != "evt_3" || got[1] != "evt_2" || l.Matched != 2 || string(l.Data[0].Data) != `{"n":1}` {
		t.Fatalf("dlq: %v (%d matched)", got, l.Matched)
	}
	r.must(http.StatusOK, "GET", "/v1/dlq?all=true&limit=1", adminKey, nil, &l)
	if got := ids(l); len(got) != 1 || got[0] != "evt_3" || l.Matched != 3 {
		t.Fatalf("dlq all, limit 1: %v (%d matched)", got, l.Matched)
	}
	r.must(http.StatusOK, "GET", "/v1/dlq?all=true", r.tenantKey("acme"), nil, &l)
	if got := ids(l); len(got) != 2 || got[0] != "evt_2" || !l.Data[1].Redriven {
		t.Fatalf("acme's dlq: %+v", l.Data)
	}
	r.must(http.StatusOK, "GET", "/v1/dlq?category=exhausted", adminKey, nil, &l)
	if got := ids(l); len(got) != 1 || got[0] != "evt_3" {
		t.Fatalf("exhausted: %v", got)
	}
	r.must(http.StatusUnprocessableEntity, "GET", "/v1/dlq?event_type=a.*.b", adminKey, nil, nil)

	// An event its schema refused: its tenant sees it, with its type and
	// data, and no subscription.
	refused := topics.DeadLetter{RawEvent: []byte(`{"id":"evt_4","type":"order.created","tenant":"acme","data":{"n":-1}}`),
		Reason: "data does not match the schema at /n: minimum", FailureCategory: topics.FailureSchema, DeadAt: time.Now().UTC(),
		Source: topics.Source{Topic: c.names.Events()}}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: c.names.DLQ(), Value: refused.Encode(), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l = list{}
	r.must(http.StatusOK, "GET", "/v1/dlq?category=schema", r.tenantKey("acme"), nil, &l)
	if len(l.Data) != 1 || l.Data[0].EventID != "evt_4" || l.Data[0].EventType != "order.created" || l.Data[0].SubscriptionID != "" ||
		string(l.Data[0].Data) != `{"n":-1}` {
		t.Fatalf("acme's refused events: %+v", l.Data)
	}
	r.must(http.StatusOK, "GET", "/v1/dlq?category=schema", r.tenantKey("globex"), nil, &l)
	if len(l.Data) != 0 {
		t.Fatalf("globex sees acme's refused event: %+v", l.Data)
	}

	// ClickHouse, where the expunged events are, unreachable: the list is
	// answered, every event's data withheld.
	env := maps.Clone(c.env)
	env["WEBHOOKS_CLICKHOUSE_ADDR"] = "127.0.0.1:1"
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cfg.Open(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	c.ch = ch
	down := c.replica()
	var withheld struct {
		Data []service.DeadLetter `json:"data"`
	}
	down.must(http.StatusOK, "GET", "/v1/dlq", adminKey, nil, &withheld)
	if len(withheld.Data) != 3 || withheld.Data[0].Data != nil || !withheld.Data[0].DataWithheld {
		t.Fatalf("dead letters with ClickHouse down: %+v", withheld.Data)
	}
}
