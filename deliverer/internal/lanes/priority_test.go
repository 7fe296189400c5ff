package lanes

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClassesShareTheWorkers: with high, normal and low work runnable,
// Next starts six high, three normal and one low record of every ten; a
// class with nothing runnable gives its turns to the others in their
// proportion; low is never passed over for more than ten records; within a
// class the subscriptions take turns.
func TestClassesShareTheWorkers(t *testing.T) {
	topicOf := map[Class]string{High: "deliveries.high", Normal: "deliveries", Low: "deliveries.low"}
	for _, tc := range []struct {
		name  string
		subs  map[Class][]string // the subscriptions with work, per class
		picks int
		want  map[Class]int
	}{
		{"all three", map[Class][]string{High: {"h1", "h2"}, Normal: {"n1"}, Low: {"l1"}}, 100, map[Class]int{High: 60, Normal: 30, Low: 10}},
		{"no high", map[Class][]string{Normal: {"n1", "n2"}, Low: {"l1"}}, 40, map[Class]int{Normal: 30, Low: 10}},
		{"no normal", map[Class][]string{High: {"h1"}, Low: {"l1", "l2"}}, 70, map[Class]int{High: 60, Low: 10}},
		{"no low", map[Class][]string{High: {"h1"}, Normal: {"n1"}}, 90, map[Class]int{High: 60, Normal: 30}},
		{"low alone", map[Class][]string{Low: {"l1"}}, 10, map[Class]int{Low: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(1000, 100_000, 100_000, 0)
			l.SetClass(topicOf[High], High)
			l.SetClass(topicOf[Low], Low)
			for c, subs := range tc.subs {
				for p, sub := range subs {
					for off := range int64(tc.picks) {
						l.Add(&kgo.Record{Topic: topicOf[c], Partition: int32(p), Offset: off, Key: []byte(fmt.Sprintf("%s/%d", sub, off))}, sub, Shape{})
					}
				}
			}
			got := map[Class]int{}
			perSub := map[string]int{}
			sinceLow := 0
			for i := range tc.picks {
				it := next(t, l)
				got[it.class]++
				perSub[it.Sub]++
				if wantClass := classOfTopic(topicOf, it.Rec.Topic); it.class != wantClass {
					t.Fatalf("pick %d: %s from %s has class %d, want %d", i, it.Rec.Key, it.Rec.Topic, it.class, wantClass)
				}
				if sinceLow++; it.class == Low {
					sinceLow = 0
				}
				if len(tc.subs[Low]) > 0 && sinceLow >= len(turns) {
					t.Fatalf("pick %d: low passed over for %d records", i, sinceLow)
				}
			}
			for c := range classes {
				if got[c] != tc.want[c] {
					t.Errorf("%d picks: %v per class, want %v", tc.picks, got, tc.want)
					break
				}
			}
			for c, subs := range tc.subs {
				for _, sub := range subs {
					if want := tc.want[c] / len(subs); perSub[sub] != want {
						t.Errorf("%s ran %d records, want %d (its class's %d shared in turns)", sub, perSub[sub], want, tc.want[c])
					}
				}
			}
		})
	}
}

// TestClassTurnsSkipCappedSubscriptions: a subscription at its cap in one
// class is passed over in the others, and runs again once a record of its
// finishes.
func TestClassTurnsSkipCappedSubscriptions(t *testing.T) {
	l := New(1, 100, 100, 0)
	l.SetClass("deliveries.high", High)
	l.SetClass("deliveries.low", Low)
	l.Add(&kgo.Record{Topic: "deliveries.high", Offset: 0, Key: []byte("a/1")}, "a", Shape{})
	l.Add(&kgo.Record{Topic: "deliveries.low", Offset: 0, Key: []byte("a/2")}, "a", Shape{})
	l.Add(&kgo.Record{Topic: "deliveries.low", Offset: 1, Key: []byte("b/1")}, "b", Shape{})
	first := next(t, l)
	if first.Sub != "a" || first.class != High {
		t.Fatalf("first %s (class %d), want a's high record", first.Rec.Key, first.class)
	}
	second := next(t, l)
	if second.Sub != "b" {
		t.Fatalf("second %s, want b's: a is at its cap", second.Rec.Key)
	}
	if canRun(l) {
		t.Fatal("a's low record is runnable while a is at its cap")
	}
	l.Done(first, true)
	if third := next(t, l); string(third.Rec.Key) != "a/2" {
		t.Fatalf("third %s, want a/2", third.Rec.Key)
	}
}

func classOfTopic(topicOf map[Class]string, topic string) Class {
	for c, t := range topicOf {
		if t == topic {
			return c
		}
	}
	return Normal
}

// TestRetriesShareNormalTurnsWithinTheirBudget: due retries take every
// other one of the normal class's turns, and no more of them start than
// their budget; with the budget spent the normal class has all its turns,
// whether or not the retries finished, until a new budget lets the next
// ones start.
func TestRetriesShareNormalTurnsWithinTheirBudget(t *testing.T) {
	l := New(1000, 100_000, 100_000, 0)
	l.SetClass("redeliveries", Retry)
	for off := range int64(20) {
		l.Add(&kgo.Record{Topic: "deliveries", Partition: 0, Offset: off, Key: fmt.Appendf(nil, "n/%d", off)}, "n", Shape{})
		l.Add(&kgo.Record{Topic: "redeliveries", Partition: 0, Offset: off, Key: fmt.Appendf(nil, "r/%d", off)}, "r", Shape{})
	}
	got := map[Class]int{}
	for range 6 {
		got[next(t, l).class]++
	}
	if got[Normal] != 3 || got[Retry] != 3 {
		t.Fatalf("6 picks: %v, want 3 normal and 3 retries", got)
	}
	l.SetRetryBudget(2)
	got = map[Class]int{}
	for range 6 {
		it := next(t, l)
		got[it.class]++
		l.Done(it, true)
	}
	if got[Normal] != 4 || got[Retry] != 2 {
		t.Fatalf("6 picks with a budget of 2, each finished at once: %v, want 4 normal and 2 retries", got)
	}
	l.SetRetryBudget(5)
	got = map[Class]int{}
	for range 2 {
		got[next(t, l).class]++
	}
	if got[Normal] != 1 || got[Retry] != 1 {
		t.Fatalf("a new budget, 2 picks: %v, want a normal and a retry", got)
	}
}

// TestFreshLatenessIsTheLatest: FreshLateness reports the latest of the
// fresh records started since the last call (start minus the record's
// timestamp), not their mean, ignores due retries, and starts over after
// each call.
func TestFreshLatenessIsTheLatest(t *testing.T) {
	l := New(1000, 100_000, 100_000, 0)
	l.SetClass("redeliveries", Retry)
	now := time.Now()
	for i, age := range []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Second} {
		l.Add(&kgo.Record{Topic: "deliveries", Partition: 0, Offset: int64(i), Key: fmt.Appendf(nil, "n/%d", i),
			Timestamp: now.Add(-age)}, "n", Shape{})
	}
	l.Add(&kgo.Record{Topic: "redeliveries", Partition: 0, Offset: 0, Key: []byte("r/0"), Timestamp: now.Add(-time.Hour)}, "r", Shape{})
	for range 5 {
		next(t, l)
	}
	late, n := l.FreshLateness()
	if n != 4 || late < time.Second || late > time.Hour/2 {
		t.Fatalf("FreshLateness() = %v, %d; want the latest fresh record's (at least 1s, not the retry's hour), 4 of them", late, n)
	}
	if late, n := l.FreshLateness(); late != 0 || n != 0 {
		t.Fatalf("second call = %v, %d; want 0, 0", late, n)
	}
}
