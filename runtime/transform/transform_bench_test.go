package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
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

// BenchmarkRunSmall is the same transformation of a small event: a
// hundred bytes of data.
func BenchmarkRunSmall(b *testing.B) {
	benchOn(b, event, `function handler(webhook) {
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

// typical are the transformations BenchmarkTypical runs: the kinds issue
// 27 names, each reading as little of the event as it needs.
var typical = []struct{ name, src string }{
	{"header", `function handler(webhook) { webhook.headers["x-tenant"] = webhook.tenant; return webhook }`},
	{"rename", `function handler(webhook) {
		webhook.data.customer = webhook.data.name;
		delete webhook.data.name;
		return webhook;
	}`},
	{"path", `function handler(webhook) { webhook.path = "/v2/" + webhook.type; return webhook }`},
	{"cancel", `function handler(webhook) {
		if (webhook.data.paid === false) webhook.cancel = true;
		return webhook;
	}`},
	{"identity", `function handler(webhook) { return webhook }`},
}

// BenchmarkTypical runs each typical transformation on a 100-byte event
// and on a 1 KiB one.
func BenchmarkTypical(b *testing.B) {
	for _, tc := range typical {
		b.Run(tc.name+"/100B", func(b *testing.B) { benchOn(b, event, tc.src) })
		b.Run(tc.name+"/1KiB", func(b *testing.B) { bench(b, tc.src) })
	}
}

// bench runs src with a time limit of a second, not the default 50 ms: the
// limit is wall-clock time, and a benchmark on a saturated machine must
// not fail for waiting on a CPU. Besides wall time it reports cpu-ns/op,
// the process's user and system time per call (garbage collection
// included), which a loaded machine does not inflate as much.
func bench(b *testing.B, src string) { benchOn(b, kibEvent(b), src) }

func benchOn(b *testing.B, in Input, src string) {
	s, err := CompileWith(src, Limits{Time: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := s.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkNewRealm is the cost of preparing a runtime, which a call pays
// when the pool is empty, and the heap a prepared one holds.
func BenchmarkNewRealm(b *testing.B) {
	b.ReportAllocs()
	realms := make([]*realm, 0, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	for b.Loop() {
		rm, err := newRealm()
		if err != nil {
			b.Fatal(err)
		}
		rm.close()
		realms = append(realms, rm)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(realms)), "live-B/realm")
	runtime.KeepAlive(realms)
}
