package deliverer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/topics"
)

// TestRetryPacer: the retries' budget of starts per tick starts small,
// doubles while no fresh record starts, grows by a quarter while fresh
// records start on time, halves when they start late against the least
// lateness seen, and starts small again once no retry is held.
func TestRetryPacer(t *testing.T) {
	p := newRetryPacer(256)
	steps := []struct {
		name    string
		late    time.Duration
		n, held int
		want    int
	}{
		{"retries come, nothing else", 0, 0, 100, 20},
		{"still alone", 0, 0, 100, 40},
		{"fresh on time", 2 * time.Millisecond, 50, 100, 50},
		{"fresh on time again", 3 * time.Millisecond, 50, 100, 62},
		{"fresh late", 20 * time.Millisecond, 50, 100, 31},
		{"still late", 12 * time.Millisecond, 50, 100, 15},
		{"within twice the least and the slack", 5 * time.Millisecond, 50, 100, 18},
		{"no retry held", 8 * time.Millisecond, 50, 0, paceStart},
	}
	for _, s := range steps {
		if got := p.next(s.late, s.n, s.held); got != s.want {
			t.Fatalf("%s: budget %d, want %d", s.name, got, s.want)
		}
	}
	for range 20 {
		p.next(0, 0, 100)
	}
	if p.budget != 256*100 {
		t.Fatalf("retries alone for two seconds: budget %d, want a start per worker per millisecond (25600)", p.budget)
	}
	for range 20 {
		p.next(time.Second, 1, 100)
	}
	if p.budget != 1 {
		t.Fatalf("fresh records always late: budget %d, want 1", p.budget)
	}
}

// TestNewLanesPacesRedeliveries: the deliverer's lanes put the records of
// redeliveries in the paced Retry class: with a budget of one, two due
// retries and a fresh delivery start as one retry and the fresh one.
func TestNewLanesPacesRedeliveries(t *testing.T) {
	names, err := topics.NewNames("", "5s,5m,30m,2h")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MaxPerSubscription: 8, MaxQueuedPerSubscription: 8, MaxBuffered: 64}
	cfg.Kafka.Names = names
	l := newLanes(cfg)
	defer l.Close()
	l.SetRetryBudget(1)
	for i, r := range []*kgo.Record{
		{Topic: names.Redeliveries(), Key: []byte("sub_a/e1")},
		{Topic: names.Redeliveries(), Key: []byte("sub_b/e2")},
		{Topic: names.Deliveries(), Key: []byte("sub_c/e3")},
	} {
		r.Offset = int64(i)
		l.Add(r, string(topics.LaneOfKey(r.Key)), lanes.Shape{})
	}
	topicsStarted := map[string]int{}
	for range 2 {
		it, ok := l.Next()
		if !ok {
			t.Fatal("lanes closed")
		}
		topicsStarted[it.Rec.Topic]++
	}
	if topicsStarted[names.Redeliveries()] != 1 || topicsStarted[names.Deliveries()] != 1 {
		t.Fatalf("started %v, want one due retry and the fresh delivery", topicsStarted)
	}
}
