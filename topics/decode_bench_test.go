package topics

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkEncodeDelivery is the dispatcher's per-delivery encode of the
// same delivery: Encode, and json.Marshal, which it replaced.
func BenchmarkEncodeDelivery(b *testing.B) {
	d := benchDelivery()
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = d.Encode()
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeRecord(&d)
		}
	})
}

func benchDelivery() Delivery {
	return Delivery{SubscriptionID: "sub_1", EventID: "evt_1732491234567890123_12345", EventType: "order.created", Key: "k123",
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Data: []byte(`{"pad":"` + strings.Repeat("x", 190) + `"}`),
		Attempt: 1, PublishedAt: time.Now().UTC()}
}

// BenchmarkDecodeDelivery is the deliverer's per-record decode of a delivery
// with a 200-byte payload (decodeStrict and Validate).
func BenchmarkDecodeDelivery(b *testing.B) {
	d := benchDelivery()
	v := d.Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeDelivery(v); err != nil {
			b.Fatal(err)
		}
	}
}
