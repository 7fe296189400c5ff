package topics

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// The decoders face arbitrary bytes from Kafka: they must never panic, must
// report bad input as ErrInvalid, and what they accept must survive a
// re-encode. `go test -fuzz FuzzDecodeEvent` explores further; the seeds run
// in every `go test`.

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		designEvent,
		`{"id":"e1","type":"t","data":1}`,
		`{"id":"e1","type":"t","data":null}`,
		`{"id":"e 1","type":"t","data":{}}`,
		`{"id":"e1","type":"t","data":{"a":[1,2,{"b":"\u00e9"}]}} `,
		`{"id":"e1","type":"t","data":1}{}`,
		`[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvent(b, 4096)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("accepted event fails Validate: %v", err)
		}
		if !bytes.Contains(b, e.Data) {
			t.Fatalf("Data %q is not a verbatim part of the input %q", e.Data, b)
		}
	})
}

func FuzzDecodeSubscription(f *testing.F) {
	f.Add([]byte(designSubscription(secretOf(32))))
	f.Add([]byte(`{"id":"s","url":"https://e.com/","event_types":["*"],"secret":"` + secretOf(24) + `","enabled":false}`))
	f.Add([]byte(`{"id":"s","url":"https://u:p@e.com/","event_types":["*"],"secret":"x"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSubscription(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// What the table accepted, webhookctl can write back unchanged.
		again, err := DecodeSubscription(subValue(t, s))
		if err != nil {
			t.Fatalf("re-encoded subscription rejected: %v", err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encode changed the subscription:\n%+v\n%+v", s, again)
		}
	})
}

func FuzzDecodeDelivery(f *testing.F) {
	d := sampleDelivery()
	f.Add(d.Encode())
	d.Data = []byte(`{"h":"<&>"}`)
	f.Add(d.Encode())
	f.Add([]byte(`{"subscription_id":"s","event_id":"e","event_type":"t","data":"MQ==","attempt":1,"timestamp":"","published_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"attempt":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDelivery(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := DecodeDelivery(d.Encode())
		if err != nil {
			t.Fatalf("re-encoded delivery rejected: %v", err)
		}
		if !bytes.Equal(again.Data, d.Data) || again.Attempt != d.Attempt || again.SubscriptionID != d.SubscriptionID {
			t.Fatalf("re-encode changed the delivery:\n%+v\n%+v", d, again)
		}
	})
}
