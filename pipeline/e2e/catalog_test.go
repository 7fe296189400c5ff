package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestSchemaEnforcedFromKcat: an event type enforced with webhookctl, two
// events produced with kcat (librdkafka): the valid one is delivered, the
// invalid one lands in the dlq with category schema and the failing
// pointer; once webhookctl relaxed the schema, it redrives the event, which
// is delivered, its idempotency key not taken by its first, refused,
// passage.
func TestSchemaEnforcedFromKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: run `make deps` (Debian package kcat)")
	}
	ctl := filepath.Join(binaries(t), "webhookctl")
	e := newEnv(t)
	url, prefix := redistest.Shared(t)
	e.withRedis(url, prefix, nil)
	r := newReceiver(t)
	r.trust(e.subscribe(topics.Subscription{ID: "orders", URL: r.url("orders"), EventTypes: []string{"order.*"}, Enabled: true}))
	webhookctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(ctl, args...)
		cmd.Env = e.environ()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("webhookctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	putType := func(schema string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "schema.json")
		if err := os.WriteFile(file, []byte(schema), 0o600); err != nil {
			t.Fatal(err)
		}
		webhookctl("event-types", "put", "order.created", "--schema", file, "--validation", topics.ValidationEnforce)
	}
	putType(`{"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer", "minimum": 0}}}`)
	e.startDispatcher()
	e.startDeliverer()

	cmd := exec.Command(kcat, "-P", "-b", e.brokers[0], "-t", e.names.Events(), "-K", "|", "-X", "partitioner=murmur2_random")
	cmd.Stdin = strings.NewReader(
		`order_1|{"id":"evt_valid","type":"order.created","key":"order_1","data":{"amount":5}}` + "\n" +
			`order_2|{"id":"evt_refund","type":"order.created","key":"order_2","idempotency_key":"refund-2","data":{"amount":-5}}` + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	wait(t, 60*time.Second, "the valid event", func() bool { return r.count() >= 1 })
	var dead topics.DeadLetter
	e.consume(e.names.DLQ(), 60*time.Second, func(recs []*kgo.Record) bool {
		for _, rec := range recs {
			if dl, err := topics.DecodeDeadLetter(rec.Value); err == nil && dl.FailureCategory == topics.FailureSchema {
				dead = dl
				return true
			}
		}
		return false
	})
	if ev, ok := dead.Event(); !ok || ev.ID != "evt_refund" || !strings.Contains(dead.Reason, "at /amount: minimum") {
		t.Fatalf("dead letter %q for %s, want evt_refund's, naming /amount and minimum", dead.Reason, dead.RawEvent)
	}
	if got := r.got(); len(got) != 1 || got[0].ID != "evt_valid" {
		t.Fatalf("delivered %v, want evt_valid only", got)
	}

	putType(`{"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}`)
	if out := webhookctl("dlq", "redrive", "--category", topics.FailureSchema); !strings.Contains(out, "redriven 1,") {
		t.Fatalf("webhookctl dlq redrive: %s", out)
	}
	wait(t, 60*time.Second, "the redriven event", func() bool { return r.count() >= 2 })
	if got := r.got(); got[1].ID != "evt_refund" || string(got[1].Data) != `{"amount":-5}` {
		t.Fatalf("second delivery %s %s, want evt_refund with its data", got[1].ID, got[1].Data)
	}
	r.checkSignatures(t)
}
