package deliverer

import (
	"testing"
	"time"
)

// TestRetryPacer: the retries' limit starts small, doubles while no fresh
// record starts, grows by one while fresh records start on time, halves
// when they start late against the least lateness seen, and starts small
// again once no retry is held.
func TestRetryPacer(t *testing.T) {
	p := newRetryPacer(256)
	steps := []struct {
		name    string
		mean    time.Duration
		n, held int
		want    int
	}{
		{"retries come, nothing else", 0, 0, 100, 8},
		{"still alone", 0, 0, 100, 16},
		{"fresh on time", 2 * time.Millisecond, 50, 100, 17},
		{"fresh on time again", 3 * time.Millisecond, 50, 100, 18},
		{"fresh late", 20 * time.Millisecond, 50, 100, 9},
		{"still late", 12 * time.Millisecond, 50, 100, 4},
		{"within twice the least and the slack", 5 * time.Millisecond, 50, 100, 5},
		{"no retry held", 8 * time.Millisecond, 50, 0, 4},
	}
	for _, s := range steps {
		if got := p.next(s.mean, s.n, s.held); got != s.want {
			t.Fatalf("%s: limit %d, want %d", s.name, got, s.want)
		}
	}
	for range 10 {
		p.next(0, 0, 100)
	}
	if p.limit != 256 {
		t.Fatalf("retries alone for a second: limit %d, want every worker (256)", p.limit)
	}
	for range 20 {
		p.next(time.Second, 1, 100)
	}
	if p.limit != 1 {
		t.Fatalf("fresh records always late: limit %d, want 1", p.limit)
	}
}
