package batch

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

func rec(p int32, off int64) *kgo.Record {
	return &kgo.Record{Topic: "t", Partition: p, Offset: off, LeaderEpoch: 3}
}

type span struct{ start, next kgo.EpochOffset }

// spans are b's partitions: the offset of the first record and the one
// after the last.
func spans(b *Batch) map[int32]span {
	out := map[int32]span{}
	b.Partitions(func(_ string, p int32, start, next kgo.EpochOffset) { out[p] = span{start, next} })
	return out
}

func eo(o int64) kgo.EpochOffset { return kgo.EpochOffset{Epoch: 3, Offset: o} }

func TestBatch(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(4)
	if !b.Empty() || b.Records() != 0 || len(spans(b)) != 0 {
		t.Fatalf("new batch not empty: %+v", b)
	}
	b.Add(rec(0, 10), &topics.Attempt{AttemptID: "a"}, false, now)
	b.Skip(rec(0, 11), now.Add(time.Second))
	b.Add(rec(1, 5), &topics.Attempt{AttemptID: "b"}, true, now.Add(2*time.Second))
	b.Add(rec(2, 7), &topics.Attempt{AttemptID: "c"}, false, now.Add(3*time.Second))
	if b.Records() != 4 || len(b.Rows()) != 3 || !b.First().Equal(now) {
		t.Fatalf("records %d rows %d first %v", b.Records(), len(b.Rows()), b.First())
	}
	want := map[int32]span{0: {eo(10), eo(12)}, 1: {eo(5), eo(6)}, 2: {eo(7), eo(8)}}
	if got := spans(b); !reflect.DeepEqual(got, want) {
		t.Errorf("offsets %v, want %v (a skipped record's offset counts)", got, want)
	}
	if !b.Has(map[string][]int32{"t": {1}}) || b.Has(map[string][]int32{"t": {9}, "u": {0}}) {
		t.Error("Has")
	}

	b.Drop(map[string][]int32{"t": {0, 2}})
	if b.Records() != 1 || len(b.Rows()) != 1 || b.Rows()[0].AttemptID != "b" || !b.Rows()[0].Suspect {
		t.Errorf("after dropping partitions 0 and 2: %d records, rows %+v", b.Records(), b.Rows())
	}
	if got := spans(b); !reflect.DeepEqual(got, map[int32]span{1: {eo(5), eo(6)}}) {
		t.Errorf("offsets after drop %v", got)
	}

	b.Add(rec(0, 12), &topics.Attempt{AttemptID: "d"}, false, now)
	if got := spans(b)[0]; got != (span{eo(12), eo(13)}) {
		t.Errorf("a dropped partition read again starts at %v, want offset 12", got)
	}
	b.MarkSuspect()
	for _, r := range b.Rows() {
		if !r.Suspect {
			t.Errorf("row %s not suspect after MarkSuspect", r.AttemptID)
		}
	}
	b.Reset()
	if !b.Empty() || b.Records() != 0 || len(b.Rows()) != 0 || !b.First().IsZero() || len(spans(b)) != 0 {
		t.Errorf("not empty after Reset: %+v", b)
	}

	// Only skipped records: not empty, committable.
	b.Skip(rec(4, 1), now)
	if b.Empty() || b.Records() != 1 || len(b.Rows()) != 0 {
		t.Errorf("a batch of one skipped record: empty %t, records %d", b.Empty(), b.Records())
	}
	b.Drop(map[string][]int32{"t": {4}})
	if !b.Empty() || b.Records() != 0 {
		t.Errorf("after dropping the skipped record's partition: empty %t, records %d", b.Empty(), b.Records())
	}
}
