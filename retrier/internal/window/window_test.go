package window

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

var base = time.UnixMilli(1_800_000_000_000)

// at is base plus n seconds.
func at(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

// delivery returns a valid delivery value whose not_before is nb (omitted
// when zero).
func delivery(nb time.Time) []byte {
	d := topics.Delivery{
		SubscriptionID: "sub_1", EventID: "evt_1", EventType: "order.created",
		Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{}`), Attempt: 2,
		PublishedAt: base, NotBefore: nb,
	}
	return d.Encode()
}

// rec is a record at offset off due at the given time through the header.
func rec(off int64, due time.Time) *kgo.Record {
	return &kgo.Record{
		Offset: off, LeaderEpoch: 3, Value: delivery(due),
		Headers: []kgo.RecordHeader{topics.NotBeforeHeader(due)},
	}
}

func TestDueOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *kgo.Record
		want time.Time
	}{
		{"header", &kgo.Record{Headers: []kgo.RecordHeader{topics.NotBeforeHeader(at(5))}, Value: []byte("not json")}, at(5)},
		{"header wins over the value", &kgo.Record{Headers: []kgo.RecordHeader{topics.NotBeforeHeader(at(5))}, Value: delivery(at(9))}, at(5)},
		{"header among others", &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, topics.NotBeforeHeader(at(7))}}, at(7)},
		{"json fallback", &kgo.Record{Value: delivery(at(9))}, at(9)},
		{"malformed header falls back to json", &kgo.Record{Headers: []kgo.RecordHeader{{Key: topics.HeaderNotBefore, Value: []byte("soon")}}, Value: delivery(at(9))}, at(9)},
		{"neither: undecodable value", &kgo.Record{Value: []byte("not json")}, time.Time{}},
		{"neither: valid delivery without not_before", &kgo.Record{Value: delivery(time.Time{})}, time.Time{}},
		{"neither: empty record", &kgo.Record{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DueOf(tc.rec)
			if !got.Equal(tc.want) {
				t.Fatalf("DueOf = %v, want %v", got, tc.want)
			}
			if tc.want.IsZero() && !got.IsZero() {
				t.Fatalf("DueOf = %v, want the zero time (due at once)", got)
			}
		})
	}
}

// offsets lists the offsets of rs.
func offsets(rs []Record) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.Rec.Offset)
	}
	return out
}

// fill returns a partition holding records at offsets 0.. due at dues.
func fill(dues ...time.Time) *Partition {
	var p Partition
	for i, d := range dues {
		p.Add(rec(int64(i), d))
	}
	return &p
}

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name string
		dues []time.Time
		now  time.Time
		want []int64
	}{
		{"empty", nil, at(0), []int64{}},
		{"all due, in offset order", []time.Time{at(1), at(2), at(3)}, at(3), []int64{0, 1, 2}},
		{"due exactly now", []time.Time{at(3)}, at(3), []int64{0}},
		{"a millisecond early is not due", []time.Time{at(3)}, at(3).Add(-time.Millisecond), []int64{}},
		{"none due", []time.Time{at(5), at(6)}, at(4), []int64{}},
		{"prefix due", []time.Time{at(1), at(2), at(9)}, at(2), []int64{0, 1}},
		{"look-ahead past a head not due", []time.Time{at(9), at(1), at(2)}, at(2), []int64{1, 2}},
		{"look-ahead keeps offset order, not due order", []time.Time{at(9), at(2), at(10), at(1)}, at(3), []int64{1, 3}},
		{"zero due time is due at once", []time.Time{at(9), {}}, at(0), []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fill(tc.dues...)
			got := p.Due(tc.now)
			if !slices.Equal(offsets(got), tc.want) {
				t.Fatalf("Due(%v) = offsets %v, want %v", tc.now, offsets(got), tc.want)
			}
			for _, r := range got {
				if !r.Due.Equal(tc.dues[r.Rec.Offset]) {
					t.Fatalf("record %d: Due = %v, want %v", r.Rec.Offset, r.Due, tc.dues[r.Rec.Offset])
				}
			}
			if p.Len() != len(tc.dues) {
				t.Fatalf("Len after Due = %d, want %d: Due must not drop records", p.Len(), len(tc.dues))
			}
		})
	}
}

func TestReleased(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dues     []time.Time
		now      time.Time
		wantLeft []int64
	}{
		{"nothing due", []time.Time{at(5)}, at(0), []int64{0}},
		{"all released", []time.Time{at(1), at(2)}, at(2), []int64{}},
		{"head kept, look-ahead released", []time.Time{at(9), at(1), at(9), at(2)}, at(2), []int64{0, 2}},
		{"tail kept", []time.Time{at(1), at(9)}, at(2), []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fill(tc.dues...)
			p.Released(p.Due(tc.now))
			if got := offsets(p.Due(at(1 << 20))); !slices.Equal(got, tc.wantLeft) {
				t.Fatalf("left after Released = %v, want %v", got, tc.wantLeft)
			}
			if p.Len() != len(tc.wantLeft) {
				t.Fatalf("Len = %d, want %d", p.Len(), len(tc.wantLeft))
			}
			checkBytes(t, p)
			// Releasing again, or releasing nothing, changes nothing.
			p.Released(nil)
			p.Released(p.Due(tc.now))
			if got := offsets(p.Due(at(1 << 20))); !slices.Equal(got, tc.wantLeft) {
				t.Fatalf("left after a second Released = %v, want %v", got, tc.wantLeft)
			}
			checkBytes(t, p)
		})
	}
}

// checkBytes checks that Bytes is the size of the keys and values held.
func checkBytes(t *testing.T, p *Partition) {
	t.Helper()
	want := 0
	for _, r := range p.Due(at(1 << 20)) {
		want += len(r.Rec.Key) + len(r.Rec.Value)
	}
	if p.Bytes() != want {
		t.Fatalf("Bytes = %d, want %d", p.Bytes(), want)
	}
}

func TestEarliest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dues   []time.Time
		want   time.Time
		wantOK bool
	}{
		{"empty", nil, time.Time{}, false},
		{"one", []time.Time{at(4)}, at(4), true},
		{"head earliest", []time.Time{at(1), at(4)}, at(1), true},
		{"later record earliest", []time.Time{at(9), at(4), at(6)}, at(4), true},
		{"zero due time", []time.Time{at(9), {}}, time.Time{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fill(tc.dues...).Earliest()
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Fatalf("Earliest = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	t.Run("after a release", func(t *testing.T) {
		p := fill(at(9), at(2), at(5))
		p.Released(p.Due(at(2)))
		if got, ok := p.Earliest(); !ok || !got.Equal(at(5)) {
			t.Fatalf("Earliest = %v, %v; want %v, true", got, ok, at(5))
		}
		p.Released(p.Due(at(9)))
		if got, ok := p.Earliest(); ok {
			t.Fatalf("Earliest of an emptied partition = %v, true; want false", got)
		}
	})
}

func TestWatermark(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offs   []int64 // offsets added, ascending (gaps as after compaction or transaction markers)
		dues   []time.Time
		now    time.Time // released what is due at now
		want   int64
		wantOK bool
	}{
		{"before any record", nil, nil, at(0), 0, false},
		{"first held", []int64{0, 1}, []time.Time{at(5), at(6)}, at(0), 0, true},
		{"first held after a released prefix", []int64{0, 1, 2}, []time.Time{at(1), at(5), at(1)}, at(1), 1, true},
		{"first held is behind released look-ahead", []int64{0, 1, 2}, []time.Time{at(5), at(1), at(1)}, at(1), 0, true},
		{"everything released: next", []int64{0, 1, 2}, []time.Time{at(1), at(1), at(1)}, at(1), 3, true},
		{"next after a gap", []int64{4, 7}, []time.Time{at(1), at(1)}, at(1), 8, true},
		{"held at a gap", []int64{4, 7}, []time.Time{at(1), at(5)}, at(1), 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Partition
			for i, off := range tc.offs {
				r := rec(off, tc.dues[i])
				r.LeaderEpoch = int32(10 + i)
				p.Add(r)
			}
			p.Released(p.Due(tc.now))
			got, ok := p.Watermark()
			if ok != tc.wantOK || (ok && got.Offset != tc.want) {
				t.Fatalf("Watermark = %+v, %v; want offset %d, %v", got, ok, tc.want, tc.wantOK)
			}
			if !ok {
				return
			}
			// The epoch is the one of the record at (or just before) the watermark.
			i := slices.Index(tc.offs, tc.want)
			if i < 0 {
				i = len(tc.offs) - 1
			}
			if want := int32(10 + i); got.Epoch != want {
				t.Fatalf("Watermark epoch = %d, want %d", got.Epoch, want)
			}
		})
	}
}

// TestHorizon: no record after the last one added can be due before it was
// written plus (1-RetryJitter) of the tier.
func TestHorizon(t *testing.T) {
	var p Partition
	for i, w := range []int{0, 30, 20} { // timestamps need not grow
		r := rec(int64(i), at(500))
		r.Timestamp = at(w)
		p.Add(r)
	}
	if got, want := p.Horizon(10*time.Second), at(20).Add(8*time.Second); !got.Equal(want) {
		t.Errorf("horizon %v, want %v (the last written, at 20 s, plus 80%% of 10 s)", got, want)
	}
}

// TestFinishedRuns: the runs above the watermark are the offsets between
// held records, after the last one up to the last added, and a previous
// owner's runs not fetched yet; records in those are not held again.
func TestFinishedRuns(t *testing.T) {
	var p Partition
	p.Resume([]kafka.Run{{From: 3, To: 4}, {From: 9, To: 12}})
	for _, off := range []int64{1, 2, 3, 4, 5, 6} {
		p.Add(rec(off, at(int(off))))
	}
	if p.Len() != 4 {
		t.Fatalf("held %d records, want 4 (3 and 4 released by the previous owner)", p.Len())
	}
	p.Released(p.Due(at(2))) // 1 and 2
	p.Released([]Record{{Rec: rec(6, at(6))}})
	wm, _ := p.Watermark()
	got := p.Finished()
	want := []kafka.Run{{From: 6, To: 6}, {From: 9, To: 12}}
	if wm.Offset != 5 || !slices.Equal(got, want) {
		t.Fatalf("watermark %d, finished %v; want 5, %v", wm.Offset, got, want)
	}
	p.Released(p.Due(at(5)))
	if wm, _ := p.Watermark(); wm.Offset != 7 {
		t.Fatalf("watermark %d with nothing held, want 7", wm.Offset)
	}
	for _, off := range []int64{7, 8, 9, 10} {
		p.Add(rec(off, at(100)))
	}
	got = p.Finished()
	want = []kafka.Run{{From: 9, To: 12}} // adjacent runs merged
	if wm, _ := p.Watermark(); wm.Offset != 7 || !slices.Equal(got, want) || p.Len() != 2 {
		t.Fatalf("watermark %d, finished %v, held %d; want 7, %v, 2", wm.Offset, got, p.Len(), want)
	}
}

// TestScheduledNeverEarly: a scheduled delivery's wait (header
// webhooks-deliver-at) carries its deliver_at, and is no candidate for an
// early release; a retry is.
func TestScheduledNeverEarly(t *testing.T) {
	n := topics.Names{Prefix: topics.DefaultPrefix, Tiers: []time.Duration{time.Minute}}
	d := topics.Delivery{SubscriptionID: "sub_1", EventID: "evt_s", EventType: "order.created",
		Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{}`), Attempt: 1, PublishedAt: base, DeliverAt: at(30)}
	wait := n.Wait([]byte("sub_1/evt_s"), &d, at(0))
	wait.Offset = 1
	var p Partition
	p.Add(rec(0, at(10)))
	p.Add(wait)
	if got := p.held[1]; !got.DeliverAt.Equal(at(30)) || !got.Due.Equal(at(30)) {
		t.Fatalf("held wait: due %v, deliver_at %v", got.Due, got.DeliverAt)
	}
	if got := offsets(p.NotDue(at(1))); len(got) != 1 || got[0] != 0 {
		t.Fatalf("NotDue = %v, want the retry at offset 0 only", got)
	}
}
