package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// kibEvent is an event whose data is about 1 KiB of JSON.
func kibEvent(b *testing.B) Input {
	fields := map[string]any{"name": "Ada Lovelace", "amount": 4200, "currency": "EUR", "paid": true}
	for i := 0; len(mustJSON(b, fields)) < 1024; i++ {
		fields[fmt.Sprintf("line_%02d", i)] = map[string]any{"sku": fmt.Sprintf("SKU-%04d", i), "qty": i, "note": strings.Repeat("n", 20)}
	}
	in := event
	in.Data = mustJSON(b, fields)
	return in
}

func mustJSON(b *testing.B, v any) json.RawMessage {
	j, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// BenchmarkRun is a typical transformation: rename a field, add a header.
func BenchmarkRun(b *testing.B) {
	bench(b, `function handler(webhook) {
		webhook.data.customer = webhook.data.name;
		delete webhook.data.name;
		webhook.headers["x-tenant"] = webhook.tenant;
		return webhook;
	}`)
}

// BenchmarkRunPassThrough is the cost of the engine alone: the script
// returns what it was given. Without a transformation, nothing runs.
func BenchmarkRunPassThrough(b *testing.B) {
	bench(b, `function handler(webhook) { return webhook }`)
}

// bench runs src with a time limit of a second, not the default 50 ms: the
// limit is wall-clock time, and a benchmark on a saturated machine must
// not fail for waiting on a CPU.
func bench(b *testing.B, src string) {
	s, err := CompileWith(src, Limits{Time: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	in := kibEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
