package dispatcher

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkValidation is the event catalog's row of `make bench`:
// dispatcher events per second when every event is checked against its
// type's schema (enforced; a 30-property schema, 1 KiB of data, the
// catalog's own test data) against the same events with validation off;
// one subscription taking every event (fan-out 1, where the check weighs
// most); two runs of each, interleaved, on the in-process broker.
func BenchmarkValidation(b *testing.B) {
	const events = 20000
	schema, err := os.ReadFile("../runtime/catalog/testdata/invoice.schema.json")
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile("../runtime/catalog/testdata/invoice.json")
	if err != nil {
		b.Fatal(err)
	}
	run := func(mode string) float64 {
		h := newHarness(b, 6)
		h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
		h.eventType(topics.EventType{Name: "invoice.issued", Schema: json.RawMessage(schema), Validation: mode})
		values := make([][]byte, events)
		for i := range values {
			// Each event's data differs, as real ones do.
			d := strings.Replace(string(data), `"field_00":"value-00`, fmt.Sprintf(`"field_00":"value-%02d`, i%100), 1)
			values[i] = event(b, topics.Event{ID: fmt.Sprintf("e%d", i), Type: "invoice.issued", Key: fmt.Sprintf("k%d", i%500)}, d)
		}
		published := h.publish(values...)
		start := time.Now()
		r := h.start(h.config("bench-" + mode))
		h.waitDispatchedWithin(published, 5*time.Minute)
		took := time.Since(start)
		_ = r.Stop(b)
		if n := len(h.readAll(h.names().Deliveries(), true)); n != events {
			b.Fatalf("%d deliveries, want %d (validation %s)", n, events, mode)
		}
		return events / took.Seconds()
	}
	for b.Loop() {
		var off, on []float64
		for range 2 {
			off = append(off, run(topics.ValidationOff))
			on = append(on, run(topics.ValidationEnforce))
		}
		o, v := (off[0]+off[1])/2, (on[0]+on[1])/2
		b.ReportMetric(o, "events/s-validation-off")
		b.ReportMetric(v, "events/s-enforced")
		b.ReportMetric(v/o, "ratio")
		b.Logf("\n| dispatcher, 1 subscription, %d events of 1 KiB, 30-property schema | events/s |\n|---|---|\n| validation off | %.0f (%.0f, %.0f) |\n"+
			"| enforced | %.0f (%.0f, %.0f) |\n| ratio | %.2f |", events, o, off[0], off[1], v, on[0], on[1], v/o)
	}
}
