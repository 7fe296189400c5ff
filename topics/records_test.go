package topics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func sampleDelivery() Delivery {
	return Delivery{
		SubscriptionID: "sub_1", EventID: "evt_1", EventType: "order.created", Tenant: "acme",
		Key: "order_42", Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{"any":"json"}`),
		Attempt: 3, PublishedAt: time.Date(2026, 11, 22, 10, 0, 0, 123_000_000, time.UTC),
		FirstAttemptAt: time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC),
		NotBefore:      time.Date(2026, 11, 22, 10, 5, 1, 0, time.UTC),
		DeliverAt:      time.Date(2026, 11, 22, 11, 0, 0, 250_000_000, time.UTC),
	}
}

func TestDeliveryRoundTrip(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"object", `{"any":"json"}`},
		{"html characters json.Marshal would escape", `{"h":"<script>&</script>"}`},
		{"unicode escapes", `{"s":"\u00e9\u0000\ud83d\ude00"}`},
		{"raw U+2028 and U+2029", "{\"s\":\"\u2028\u2029\"}"},
		{"raw multi-byte UTF-8", `{"s":"é😀漢"}`},
		{"whitespace and key order", "{ \"z\" : 1 ,\n\t\"a\" : [ ] }"},
		{"number spelling", `[1.0e+02,-0,0.10]`},
		{"duplicate keys", `{"a":1,"a":2}`},
		{"string scalar", `"x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.data)) {
				t.Fatalf("test data %q is not valid JSON", tc.data)
			}
			d := sampleDelivery()
			d.Data = []byte(tc.data)
			b := d.Encode()
			got, err := DecodeDelivery(b)
			if err != nil {
				t.Fatalf("DecodeDelivery(Encode()): %v\n%s", err, b)
			}
			if !bytes.Equal(got.Data, []byte(tc.data)) {
				t.Fatalf("Data = %q, want %q", got.Data, tc.data)
			}
			if !reflect.DeepEqual(got, d) {
				t.Fatalf("round trip =\n%+v\nwant\n%+v", got, d)
			}
		})
	}
}

func TestDeliveryOptionalFields(t *testing.T) {
	d := Delivery{SubscriptionID: "s", EventID: "e", EventType: "t", Timestamp: "x", Data: []byte(`1`), Attempt: 1}
	b := d.Encode()
	for _, f := range []string{"tenant", "key", "first_attempt_at", "not_before", "priority"} {
		if bytes.Contains(b, []byte(`"`+f+`"`)) {
			t.Errorf("zero %s is encoded: %s", f, b)
		}
	}
	got, err := DecodeDelivery(b)
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, d)
	}
}

func TestDecodeDeliveryRejects(t *testing.T) {
	enc := func(mut func(*Delivery)) string {
		d := sampleDelivery()
		mut(&d)
		return string(d.Encode())
	}
	for _, tc := range []struct {
		name  string
		in    string
		field string
	}{
		{"attempt 0", enc(func(d *Delivery) { d.Attempt = 0 }), "attempt"},
		{"negative attempt", enc(func(d *Delivery) { d.Attempt = -1 }), "attempt"},
		{"data not JSON", enc(func(d *Delivery) { d.Data = []byte(`{"a":`) }), "data"},
		{"data empty", enc(func(d *Delivery) { d.Data = nil }), "data"},
		{"data two values", enc(func(d *Delivery) { d.Data = []byte(`1 2`) }), "data"},
		{"no subscription id", enc(func(d *Delivery) { d.SubscriptionID = "" }), "subscription_id"},
		{"subscription id with slash", enc(func(d *Delivery) { d.SubscriptionID = "a/b" }), "subscription_id"},
		{"no event id", enc(func(d *Delivery) { d.EventID = "" }), "event_id"},
		{"bad event type", enc(func(d *Delivery) { d.EventType = "a b" }), "event_type"},
		{"empty event type", enc(func(d *Delivery) { d.EventType = "" }), "event_type"},
		{"data not base64", strings.Replace(enc(func(*Delivery) {}), `"data":"`, `"data":"!!!`, 1), ""},
		{"unknown field", strings.Replace(enc(func(*Delivery) {}), `{`, `{"url":"https://x/",`, 1), ""},
		{"trailing data", enc(func(*Delivery) {}) + `{}`, ""},
		{"not JSON", `delivery`, ""},
		{"unknown priority", enc(func(d *Delivery) { d.Priority = "urgent" }), "priority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeDelivery([]byte(tc.in))
			if err == nil {
				t.Fatalf("DecodeDelivery(%s) = %+v, want an error", tc.in, d)
			}
			wantInvalid(t, err, "delivery", tc.field)
		})
	}
}

func TestDeadLetterRoundTrip(t *testing.T) {
	dv := sampleDelivery()
	dv.Data = []byte(`{"h":"<&>"}`)
	for _, tc := range []struct {
		name string
		dl   DeadLetter
	}{
		{"delivery", DeadLetter{
			Delivery: &dv, Reason: "HTTP 404", FailureCategory: FailurePermanent4xx, HTTPStatus: 404,
			Attempts: 1, DeadAt: time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC),
			Source: Source{Topic: "webhooks.deliveries", Partition: 7, Offset: 1 << 40},
		}},
		{"raw event", DeadLetter{
			RawEvent: []byte("not json \x00\xff at all"), Reason: "invalid event: not JSON",
			FailureCategory: FailureInvalid, DeadAt: time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC),
			Source: Source{Topic: "webhooks.events", Partition: 0, Offset: 42},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeDeadLetter(tc.dl.Encode())
			if err != nil {
				t.Fatalf("DecodeDeadLetter(Encode()): %v", err)
			}
			if !reflect.DeepEqual(got, tc.dl) {
				t.Fatalf("round trip =\n%+v\nwant\n%+v", got, tc.dl)
			}
		})
	}
}

func TestDecodeDeadLetterRejects(t *testing.T) {
	bad := sampleDelivery()
	bad.Attempt = 0
	for _, tc := range []struct {
		name   string
		in     string
		record string
		field  string
	}{
		{"invalid delivery", string((&DeadLetter{Delivery: &bad, Reason: "x"}).Encode()), "delivery", "attempt"},
		{"unknown field", `{"reason":"x","extra":1}`, "dead letter", ""},
		{"not JSON", `dead`, "dead letter", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeDeadLetter([]byte(tc.in))
			wantInvalid(t, err, tc.record, tc.field)
		})
	}
}

func TestAttemptRoundTrip(t *testing.T) {
	a := Attempt{
		AttemptID: NewAttemptID(), EventID: "evt_1", EventType: "order.created", SubscriptionID: "sub_1",
		Tenant: "acme", Attempt: 2, Outcome: OutcomeRetry, FailureCategory: FailureServerError,
		HTTPStatus: 503, DurationMS: 12.5, TS: time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC),
		Error: "HTTP 503", NextAttemptAt: time.Date(2026, 11, 22, 10, 5, 5, 0, time.UTC),
		PublishedAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), BatchID: BatchID([]string{"evt_1", "evt_2"}),
	}
	got, err := DecodeAttempt(a.Encode())
	if err != nil {
		t.Fatalf("DecodeAttempt(Encode()): %v", err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip =\n%+v\nwant\n%+v", got, a)
	}
}

func TestDecodeAttemptRejects(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"missing attempt_id", `{"subscription_id":"s","outcome":"success"}`},
		{"missing subscription_id", `{"attempt_id":"a","outcome":"success"}`},
		{"missing outcome", `{"attempt_id":"a","subscription_id":"s"}`},
		{"unknown field", `{"attempt_id":"a","subscription_id":"s","outcome":"success","x":1}`},
		{"not JSON", `attempt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeAttempt([]byte(tc.in))
			wantInvalid(t, err, "attempt", "")
		})
	}
}

func TestNewAttemptID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewAttemptID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("NewAttemptID() = %q, want 32 lower-case hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewAttemptID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestNotBeforeHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    time.Time
	}{
		{"now-ish", time.Date(2026, 11, 22, 10, 0, 0, 123_000_000, time.UTC)},
		{"epoch", time.UnixMilli(0)},
		{"far future", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NotBeforeHeader(tc.t)
			if h.Key != "webhooks-not-before" {
				t.Fatalf("header key = %q", h.Key)
			}
			if want := fmt.Sprint(tc.t.UnixMilli()); string(h.Value) != want {
				t.Fatalf("header value = %q, want unix ms %q", h.Value, want)
			}
			r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "other", Value: []byte("x")}, h}}
			got, ok := NotBeforeOf(r)
			if !ok || !got.Equal(tc.t) {
				t.Fatalf("NotBeforeOf = %v, %v; want %v", got, ok, tc.t)
			}
		})
	}
	// Sub-millisecond precision is dropped, not rounded up.
	got, ok := NotBeforeOf(&kgo.Record{Headers: []kgo.RecordHeader{NotBeforeHeader(time.UnixMilli(1000).Add(999 * time.Microsecond))}})
	if !ok || !got.Equal(time.UnixMilli(1000)) {
		t.Fatalf("NotBeforeOf(sub-ms) = %v, %v", got, ok)
	}
}

func TestNotBeforeOfMissingOrMalformed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []kgo.RecordHeader
	}{
		{"no headers", nil},
		{"other headers", []kgo.RecordHeader{{Key: "webhooks-not-before-x", Value: []byte("1")}}},
		{"not a number", []kgo.RecordHeader{{Key: HeaderNotBefore, Value: []byte("soon")}}},
		{"RFC 3339", []kgo.RecordHeader{{Key: HeaderNotBefore, Value: []byte("2026-11-22T10:00:00Z")}}},
		{"empty", []kgo.RecordHeader{{Key: HeaderNotBefore, Value: nil}}},
		{"fraction", []kgo.RecordHeader{{Key: HeaderNotBefore, Value: []byte("1.5")}}},
		{"overflow", []kgo.RecordHeader{{Key: HeaderNotBefore, Value: []byte("99999999999999999999")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := NotBeforeOf(&kgo.Record{Headers: tc.headers}); ok || !got.IsZero() {
				t.Fatalf("NotBeforeOf = %v, %v; want zero, false", got, ok)
			}
		})
	}
}

func TestSubscriptionOfKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"sub_1/evt_1", "sub_1"},
		{"sub_1/a/b", "sub_1"},
		{"sub_1", "sub_1"},
		{"sub_1/", "sub_1"},
		{"/x", ""},
		{"", ""},
	} {
		if got := string(SubscriptionOfKey([]byte(tc.key))); got != tc.want {
			t.Errorf("SubscriptionOfKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// kafkaPartition is where Kafka's default partitioner (murmur2, as Java and
// franz-go use) puts key among n partitions.
func kafkaPartition(key string, n int) int {
	return kgo.StickyKeyPartitioner(nil).ForTopic("t").Partition(&kgo.Record{Key: []byte(key)}, n)
}

func TestPartitionerKeepsSubscriptionTogether(t *testing.T) {
	p := Partitioner().ForTopic("webhooks.deliveries")
	for _, n := range []int{1, 3, 12, 64} {
		for _, sub := range []string{"sub_1", "sub_2", "acme-endpoint-17", "x"} {
			t.Run(fmt.Sprintf("%s/n=%d", sub, n), func(t *testing.T) {
				want := kafkaPartition(sub, n)
				for _, key := range []string{sub, sub + "/a", sub + "/b", sub + "/zzz", sub + "/evt_1/with/slashes"} {
					if got := p.Partition(&kgo.Record{Key: []byte(key)}, n); got != want {
						t.Errorf("Partition(%q, %d) = %d, want %d (that of key %q)", key, n, got, want, sub)
					}
				}
			})
		}
	}
	// Keys are hashed by subscription, not whole: some key must land
	// elsewhere than its whole-key hash would put it, or the test above
	// proves nothing about splitting at '/'.
	differs := false
	for i := range 50 {
		key := fmt.Sprintf("sub_1/evt_%d", i)
		if kafkaPartition(key, 64) != kafkaPartition("sub_1", 64) {
			differs = true
			break
		}
	}
	if !differs {
		t.Fatal("whole-key hashing agrees with subscription hashing for every key; test is vacuous")
	}
}

func TestPartitionerSpreadsSubscriptions(t *testing.T) {
	p := Partitioner().ForTopic("webhooks.deliveries")
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{3, 12, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			used := map[int]int{}
			for range 200 {
				sub := fmt.Sprintf("sub_%016x", r.Uint64())
				got := p.Partition(&kgo.Record{Key: []byte(sub + "/evt")}, n)
				if got < 0 || got >= n {
					t.Fatalf("partition %d out of range [0,%d)", got, n)
				}
				if want := kafkaPartition(sub, n); got != want {
					t.Fatalf("Partition(%q) = %d, want %d", sub+"/evt", got, want)
				}
				used[got]++
			}
			// 200 ids over n partitions: with any sane hash far more than
			// one partition is used; demand at least half of them.
			if len(used) < 2 || len(used) < n/2 {
				t.Fatalf("200 subscriptions used only %d of %d partitions: %v", len(used), n, used)
			}
		})
	}
}

func TestPartitionerRequiresConsistency(t *testing.T) {
	// Keyed records must not be moved by the producer on a retry or a
	// leader change, or per-key order breaks.
	tp := Partitioner().ForTopic("t")
	type consistent interface{ RequiresConsistency(*kgo.Record) bool }
	cc, ok := tp.(consistent)
	if !ok {
		t.Fatal("partitioner does not declare RequiresConsistency")
	}
	if !cc.RequiresConsistency(&kgo.Record{Key: []byte("sub_1/a")}) {
		t.Fatal("keyed records do not require consistency")
	}
}

func TestDueAtRoundsUpToTheHeaderPrecision(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		now  time.Time
		want time.Time
	}{
		{base, base.Add(5 * time.Second)},
		{base.Add(1), base.Add(5*time.Second + time.Millisecond)},
		{base.Add(999_999), base.Add(5*time.Second + time.Millisecond)},
	}
	for _, tt := range tests {
		got := DueAt(tt.now, 5*time.Second)
		if !got.Equal(tt.want) {
			t.Errorf("DueAt(%v) = %v, want %v", tt.now, got, tt.want)
		}
		h := NotBeforeHeader(got)
		back, _ := NotBeforeOf(&kgo.Record{Headers: []kgo.RecordHeader{h}})
		if !back.Equal(got) {
			t.Errorf("header round trip of %v = %v: the header loses precision", got, back)
		}
	}
}

// TestDeliveryDirectScan: what Encode writes is decoded by the direct scan,
// to the delivery encoded (in UTC, as the components write it); a record
// it does not take still decodes.
func TestDeliveryDirectScan(t *testing.T) {
	full := sampleDelivery()
	full.Priority = PriorityHigh
	minimal := Delivery{SubscriptionID: "s", EventID: "e", EventType: "t", Data: []byte(`1`), Attempt: 1,
		PublishedAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	for _, d := range []Delivery{full, minimal} {
		got, ok := decodeDeliveryFast(d.Encode())
		if !ok {
			t.Fatalf("the direct scan did not take %s", d.Encode())
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("direct scan =\n%#v\nwant\n%#v", got, d)
		}
	}
	spaced := []byte(`{ "subscription_id":"s","event_id":"e","event_type":"t","data":"MQ==","attempt":1,"timestamp":"","published_at":"2026-01-01T00:00:00Z"}`)
	if _, ok := decodeDeliveryFast(spaced); ok {
		t.Fatal("the direct scan took whitespace")
	}
	if d, err := DecodeDelivery(spaced); err != nil || d.SubscriptionID != "s" {
		t.Fatalf("DecodeDelivery: %+v, %v", d, err)
	}
}
