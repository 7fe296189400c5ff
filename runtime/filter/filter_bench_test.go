package filter

import (
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// BenchmarkMatch is one event met by five filters (its data decoded once),
// as in the dispatcher's benchmark.
func BenchmarkMatch(b *testing.B) {
	p, err := Compile(`data.total > 0 && data.currency == "EUR" && !("test" in data.tags)`)
	if err != nil {
		b.Fatal(err)
	}
	ev := &topics.Event{Type: "t.1", Key: "k1", Data: []byte(`{"total": 12, "currency": "EUR", "tags": ["new"], "pad": "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"}`)}
	for b.Loop() {
		in := NewInput(ev)
		for range 5 {
			if ok, err := p.Match(in); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
}
