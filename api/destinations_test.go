package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestKafkaDestinationThroughTheAPI: a subscription created with a Kafka
// destination takes its address as url, never shows its password (a
// change that leaves it out keeps it), is verified and test-sent by
// publishing to the customer's topic; bad settings answer 422 naming the
// field.
func TestKafkaDestinationThroughTheAPI(t *testing.T) {
	t.Parallel()
	customer, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "hooks", "pw-7f3a9c"),
		kfake.SeedTopics(1, "acme-hooks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(customer.Close)
	c := newCluster(t)
	r := c.loopbackReplica()

	dest := map[string]any{"type": "kafka", "brokers": customer.ListenAddrs(), "topic": "acme-hooks", "sasl": "plain",
		"username": "hooks", "password": "pw-7f3a9c"}
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey,
		map[string]any{"destination": dest, "event_types": []string{"*"}, "verify": true}, &sub)
	if sub.Destination == nil || sub.Destination.Password != "" || sub.URL != "kafka://"+customer.ListenAddrs()[0]+"/acme-hooks" {
		t.Fatalf("created: %+v (destination %+v)", sub, sub.Destination)
	}
	var got service.Subscription
	r.must(http.StatusOK, "PATCH", "/v1/subscriptions/"+sub.ID, adminKey,
		map[string]any{"destination": map[string]any{"type": "kafka", "brokers": customer.ListenAddrs(), "topic": "acme-hooks",
			"sasl": "plain", "username": "hooks"}}, &got)
	if a := r.do("GET", "/v1/subscriptions/"+sub.ID, adminKey, nil); strings.Contains(string(a.body), "pw-7f3a9c") {
		t.Fatalf("the password is shown: %s", a.body)
	}
	var res struct {
		Delivered bool   `json:"delivered"`
		EventID   string `json:"event_id"`
	}
	r.must(http.StatusOK, "POST", "/v1/subscriptions/"+sub.ID+"/test", adminKey, nil, &res)
	if !res.Delivered {
		t.Fatalf("test-send after a change without the password: %+v", res)
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(customer.ListenAddrs()...), kgo.ConsumeTopics("acme-hooks"),
		kgo.SASL(plain.Auth{User: "hooks", Pass: "pw-7f3a9c"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	ctx := testkit.Ctx(t, 30*time.Second)
	seen := map[string]bool{}
	for !seen[res.EventID] {
		fs := reader.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading the customer's topic: %v", err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			for _, h := range rec.Headers {
				if h.Key == "webhook-id" {
					seen[string(h.Value)] = true
				}
			}
		})
	}
	if len(seen) != 2 {
		t.Errorf("messages on the topic: %v, want the verification and the test", seen)
	}

	for field, d := range map[string]map[string]any{
		"body.destination.topic":   {"type": "kafka", "brokers": []string{"127.0.0.1:9092"}},
		"body.destination.brokers": {"type": "kafka", "brokers": []string{"nope"}, "topic": "t"},
		"body.destination.type":    {"type": "carrier-pigeon"},
	} {
		var p problem
		r.must(http.StatusUnprocessableEntity, "POST", "/v1/subscriptions", adminKey, map[string]any{"destination": d, "event_types": []string{"*"}}, &p)
		if len(p.Errors) == 0 || p.Errors[0].Location != field {
			t.Errorf("destination %v answered %+v, want %s", d, p, field)
		}
	}
}
