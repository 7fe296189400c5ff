package topics

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The decoders face arbitrary bytes from Kafka: they must never panic, must
// report bad input as ErrInvalid, and what they accept must survive a
// re-encode. `go test -fuzz FuzzDecodeEvent` explores further (`make fuzz`
// runs each target for a few seconds); the seeds, here and in
// testdata/fuzz/<target>, run in every `go test`.

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
		again, err := DecodeSubscription(s.Encode())
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
	f.Add([]byte(`{"subscription_id":"s","event_id":"e","event_type":"t","data":"","attempt":7,"timestamp":"x","published_at":"2026-01-01T00:00:00.5Z","first_attempt_at":"2026-01-01T00:00:01Z","not_before":"2026-01-01T00:00:02.123456789Z","priority":"high","tenant":"a","key":"k"}`))
	f.Add([]byte(`{"subscription_id":"s","event_id":"e","event_type":"t","data":"MQ==","attempt":1,"timestamp":"","published_at":"2026-01-01T00:00:00Z","not_before":"2026-01-01T00:00:05Z","deliver_at":"2026-01-03T00:00:00.001Z"}`))
	f.Add([]byte(`{"subscription_id":"s","event_id":"e","event_type":"t","data":"MQ","attempt":1,"timestamp":"","published_at":"2026-01-01T00:00:00+01:00"}`))
	f.Add([]byte(`{"subscription_id":"s","Event_ID":"e","event_type":"t","data":"MQ==","attempt":01,"timestamp":"","published_at":"2026-01-01T0:00:00,5Z","event_id":"f"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if fast, ok := decodeDeliveryFast(b); ok {
			var strict Delivery
			if err := decodeStrict("delivery", b, &strict); err != nil {
				t.Fatalf("the direct scan took what decodeStrict refuses (%v)", err)
			}
			if !reflect.DeepEqual(fast, strict) {
				t.Fatalf("the direct scan decoded\n%#v\ndecodeStrict\n%#v", fast, strict)
			}
		}
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

// FuzzDecodeSealedSubscription decodes with a keyring, as the table does:
// sealed secrets (enc:v1:...) must open or be refused as ErrInvalid, never
// panic, and what is accepted survives a re-seal (with a fresh nonce)
// unchanged, its sealed form holding no plaintext secret.
func FuzzDecodeSealedSubscription(f *testing.F) {
	ring := mustKeyring(f, "new:"+keyB+","+keyA)
	old := mustKeyring(f, keyA)
	full := Subscription{
		ID: "sub_1", Tenant: "acme", URL: "https://example.com/hooks", EventTypes: []string{"order.*"}, Enabled: true,
		Secret: secretOf(32), PreviousSecret: secretOf(24), PreviousSecretUntil: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC),
	}
	f.Add(full.EncodeWith(ring))
	f.Add(full.EncodeWith(old))
	f.Add(full.Encode())
	minimal := Subscription{ID: "s", URL: "https://e.com/", EventTypes: []string{"*"}, Enabled: true, Secret: secretOf(64)}
	f.Add(minimal.EncodeWith(ring))
	f.Add([]byte(`{"id":"s","url":"https://e.com/","event_types":["*"],"secret":"enc:v1:new:AAAA"}`))
	f.Add([]byte(`{"id":"s","url":"https://e.com/","event_types":["*"],"secret":"enc:v2:new:AAAA"}`))
	f.Add([]byte(`{"id":"s","url":"https://e.com/","event_types":["*"],"secret":"enc:v1:nokey:AAAA"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSubscriptionWith(b, ring)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted subscription fails Validate: %v", err)
		}
		sealed := s.EncodeWith(ring)
		for _, secret := range []string{s.Secret, s.PreviousSecret} {
			if secret != "" && bytes.Contains(sealed, []byte(strings.TrimPrefix(secret, SecretPrefix))) {
				t.Fatalf("sealed value %s holds a plaintext secret", sealed)
			}
		}
		again, err := DecodeSubscriptionWith(sealed, ring)
		if err != nil {
			t.Fatalf("re-sealed subscription rejected: %v", err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("re-seal changed the subscription:\n%+v\n%+v", s, again)
		}
		if _, err := DecodeSubscriptionWith(sealed, mustKeyring(t, keyC)); err == nil {
			t.Fatal("a keyring without the sealing key opened the value")
		}
	})
}

// FuzzParseKeyring: WEBHOOKS_SECRETS_KEY is operator input. ParseKeyring
// never panics, errors are one line, and an accepted keyring has unique
// valid ids, seals with the first, opens what it sealed, and prints no key.
func FuzzParseKeyring(f *testing.F) {
	for _, s := range []string{
		keyA, "new:" + keyB + "," + keyA, "a:" + keyA + ",a:" + keyB, keyA + ",", ":" + keyA,
		strings.TrimRight(keyA, "="), "k:" + keyA[:20], "", ",", "a b:" + keyA,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := ParseKeyring(in)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q spans lines", err)
			}
			return
		}
		ids := k.IDs()
		if len(ids) == 0 || k.KeyID() != ids[0] {
			t.Fatalf("ids %v, sealing %q", ids, k.KeyID())
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] || !keyIDRE.MatchString(id) {
				t.Fatalf("ids %v: %q repeated or invalid", ids, id)
			}
			seen[id] = true
		}
		v := k.seal("sub_1", "secret", "whsec_x")
		if !strings.HasPrefix(v, encV1+k.KeyID()+":") {
			t.Fatalf("sealed as %q, want key %s", v, k.KeyID())
		}
		if got, err := k.open("sub_1", "secret", v); err != nil || got != "whsec_x" {
			t.Fatalf("open(seal) = %q, %v", got, err)
		}
		if got, want := k.String(), "keyring("+strings.Join(ids, ",")+")"; got != want {
			t.Fatalf("String() = %q, want the ids only: %q", got, want)
		}
	})
}

// FuzzAttemptEncode: Attempt.Encode, written by hand, says what
// json.Marshal says of the same attempt (compared as decoded JSON), for
// any text in any field.
func FuzzAttemptEncode(f *testing.F) {
	f.Add("evt_1", "sub_1", "", "HTTP 503 <b>&</b>", "\u2028\x00\"\\\xff\xfe", 2, 503, 12.5, int64(1795860005123456789), int64(0))
	f.Add("", "", "acme", "", "", 0, 0, 0.0, int64(0), int64(1795860000000000000))
	f.Add("e", "s", "t", "\t\n", "é€😀", -1, 200, 1e-7, int64(-62135596800000000), int64(1))
	f.Add("e", "s", "t", "x", "y", 1<<40, 599, 3e21, int64(253402300799999999999/1000), int64(-1))
	f.Fuzz(func(t *testing.T, id, sub, tenant, errText, sample string, attempt, status int, ms float64, ts, next int64) {
		if math.IsNaN(ms) || math.IsInf(ms, 0) {
			ms = 0 // json.Marshal refuses these; a duration is never one
		}
		a := Attempt{AttemptID: id, EventID: id + "e", EventType: "t", SubscriptionID: sub, Tenant: tenant,
			Attempt: attempt, Outcome: OutcomeRetry, FailureCategory: tenant, HTTPStatus: status, DurationMS: ms,
			TS: time.Unix(0, ts).UTC(), Error: errText, ResponseSample: sample, BatchID: tenant}
		if next != 0 {
			a.NextAttemptAt, a.PublishedAt = time.Unix(0, next).UTC(), time.Unix(0, next/2)
		}
		want, err := json.Marshal(&a)
		if err != nil {
			return // a time json.Marshal cannot write (no year 10000 here)
		}
		sameJSON(t, a.Encode(), want)
	})
}

// sameJSON fails t unless got (an Encode) and want (json.Marshal's) are
// the same JSON once decoded.
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("Encode() = %s: not JSON: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("Encode() =\n%s\njson.Marshal =\n%s", got, want)
	}
}

// FuzzDeliveryEncode: Delivery.Encode, written by hand, says what
// json.Marshal says of the same delivery (compared as decoded JSON), for
// any text in any field, and DecodeDelivery reads back what it wrote.
func FuzzDeliveryEncode(f *testing.F) {
	f.Add("sub_1", "evt_1", "order.created", "acme", "k1", "2026-11-27T10:00:00Z", []byte(`{"a":1}`), 1, int64(1795860005123456789), int64(0), "high")
	f.Add("s", "e", "t", "", "", "", []byte(nil), 3, int64(0), int64(1795860000000000000), "")
	f.Add("s<>&", "e\u2028", "\"t\"", "\xff\xfe", "\u00e9\x00", "\t", []byte{}, -1, int64(-62135596800000000), int64(1), "low")
	f.Fuzz(func(t *testing.T, sub, id, typ, tenant, key, ts string, data []byte, attempt int, published, later int64, priority string) {
		d := Delivery{SubscriptionID: sub, EventID: id, EventType: typ, Tenant: tenant, Key: key, Timestamp: ts, Data: data,
			Attempt: attempt, PublishedAt: time.Unix(0, published).UTC(), Priority: priority}
		if later != 0 {
			d.FirstAttemptAt, d.NotBefore, d.DeliverAt = time.Unix(0, later).UTC(), time.Unix(0, later+1), time.Unix(0, later/3).UTC()
		}
		want, err := json.Marshal(&d)
		if err != nil {
			return // a time json.Marshal cannot write (no year 10000 here)
		}
		got := d.Encode()
		sameJSON(t, got, want)
		back, err := DecodeDelivery(got)
		if err != nil {
			return // not a valid delivery (Validate), which Encode does not judge
		}
		again, _ := DecodeDelivery(want)
		if !reflect.DeepEqual(back, again) {
			t.Fatalf("DecodeDelivery(Encode()) = %+v, of json.Marshal's %+v", back, again)
		}
	})
}

// FuzzValidJSON: validJSON says what json.Valid says.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, " [1, 2.5e-3, -0, true, null] ", "\"\xff\xfe\"", `{"a":"\ud800"}`, `01`, `1.`,
		`{"a":}`, `[1,]`, `"\u00e9\n"`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001), ``, ` `, `{} {}`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}
