package dispatcher

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestDeadLetterRawLimit checks that a dead letter copies the raw event only
// while the record stays within Kafka's default size limit.
func TestDeadLetterRawLimit(t *testing.T) {
	names := topics.Names{Prefix: topics.DefaultPrefix}
	for _, tc := range []struct {
		name string
		size int
		kept bool
	}{
		{"at the limit", maxRecordData, true},
		{"over the limit", maxRecordData + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := bytes.Repeat([]byte("x"), tc.size)
			r := &kgo.Record{Topic: names.Events(), Partition: 2, Offset: 7, Key: []byte("k"), Value: raw}
			out := deadLetter(r, errors.New("too big"), topics.FailureInvalid, names, time.Now())
			if out.Topic != names.DLQ() || string(out.Key) != "k" {
				t.Errorf("record to %s keyed %q", out.Topic, out.Key)
			}
			if len(out.Value) > 1_000_000 {
				t.Errorf("dead letter of %d bytes is over Kafka's default max.message.bytes", len(out.Value))
			}
			dl, err := topics.DecodeDeadLetter(out.Value)
			if err != nil {
				t.Fatal(err)
			}
			if kept := bytes.Equal(dl.RawEvent, raw); kept != tc.kept {
				t.Errorf("raw event kept: %v, want %v", kept, tc.kept)
			}
			if !tc.kept && (dl.RawEvent != nil || !strings.Contains(dl.Reason, "read it at the source")) {
				t.Errorf("reason %q, raw %d bytes", dl.Reason, len(dl.RawEvent))
			}
			if dl.Source != (topics.Source{Topic: names.Events(), Partition: 2, Offset: 7}) {
				t.Errorf("source %+v", dl.Source)
			}
		})
	}
}

// TestNoticeCopy: an operational event is copied to the notices topic
// as it was published; any other event, or one refused, is not.
func TestNoticeCopy(t *testing.T) {
	names := topics.Names{Prefix: topics.DefaultPrefix}
	r := &kgo.Record{Topic: names.Events(), Key: []byte("sub_1"), Value: []byte(`{"id":"ntf_1"}`)}
	p := &polled{r: r, ev: topics.Event{ID: "ntf_1", Type: topics.NoticeFailing, Tenant: "acme"}}
	c := noticeCopy(p, names)
	if c == nil || c.Topic != names.Notices() || string(c.Key) != "sub_1" || !bytes.Equal(c.Value, r.Value) {
		t.Fatalf("copy %+v", c)
	}
	if c := noticeCopy(&polled{r: r, ev: topics.Event{ID: "e", Type: "order.created"}}, names); c != nil {
		t.Errorf("an ordinary event copied: %+v", c)
	}
	if c := noticeCopy(&polled{r: r, ev: p.ev, bad: errors.New("bad")}, names); c != nil {
		t.Errorf("a refused event copied: %+v", c)
	}
}

// TestJudgeAllKeepsOrder: a batch judged on several goroutines comes back
// in the order it was polled, each event with its own record.
func TestJudgeAllKeepsOrder(t *testing.T) {
	var recs []*kgo.Record
	for i := range 1000 {
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Offset: int64(i),
			Value: event(t, topics.Event{ID: fmt.Sprintf("e%d", i), Type: "t"}, `{}`)})
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "events", Partitions: []kgo.FetchPartition{{Records: recs}}}}}}
	batch := judgeAll(fs, nil, 0)
	if len(batch) != len(recs) {
		t.Fatalf("%d judged, want %d", len(batch), len(recs))
	}
	for i, p := range batch {
		if p.r != recs[i] || p.bad != nil || p.ev.ID != fmt.Sprintf("e%d", i) {
			t.Fatalf("event %d: %+v", i, p)
		}
	}
}
