package topics

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBatchID: the same events make the same id in any order; any other
// set of events another.
func TestBatchID(t *testing.T) {
	a := BatchID([]string{"evt_1", "evt_2", "evt_3"})
	if b := BatchID([]string{"evt_3", "evt_1", "evt_2"}); b != a {
		t.Fatalf("the same events in another order: %s, want %s", b, a)
	}
	for _, other := range [][]string{{"evt_1", "evt_2"}, {"evt_1", "evt_2", "evt_4"}} {
		if b := BatchID(other); b == a {
			t.Fatalf("BatchID(%q) = %s, the id of another set", other, b)
		}
	}
	if len(a) != len("batch_")+32 {
		t.Fatalf("BatchID = %q, want batch_ and 32 hex digits", a)
	}
}

func TestBatchHeader(t *testing.T) {
	id := BatchID([]string{"evt_1", "evt_2"})
	got, n, ok := BatchOf([]kgo.RecordHeader{{Key: "other", Value: []byte("x")}, BatchHeader(id, 2)})
	if !ok || got != id || n != 2 {
		t.Fatalf("BatchOf(BatchHeader(%s, 2)) = %q, %d, %v", id, got, n, ok)
	}
	for _, v := range []string{"", "batch_x", "batch_x two", " 2", "batch_x 0", "batch_x -1"} {
		if _, _, ok := BatchOf([]kgo.RecordHeader{{Key: HeaderBatch, Value: []byte(v)}}); ok {
			t.Errorf("BatchOf(%q) ok, want malformed", v)
		}
	}
	if _, _, ok := BatchOf(nil); ok {
		t.Error("BatchOf(none) ok")
	}
}
