package decode

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

func samples() []topics.Attempt {
	ts := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	return []topics.Attempt{
		{AttemptID: "a1", EventID: "evt_1", EventType: "order.created", SubscriptionID: "sub_1", Tenant: "acme", Attempt: 1,
			Outcome: topics.OutcomeSuccess, HTTPStatus: 204, DurationMS: 12.345, TS: ts, PublishedAt: ts.Add(-time.Second)},
		{AttemptID: "a2", EventID: "évt_ünïcode", EventType: "t", SubscriptionID: "sub_2", Attempt: 7, Outcome: topics.OutcomeRetry,
			FailureCategory: topics.FailureTimeout, DurationMS: 15000, TS: ts.In(time.FixedZone("x", 3600)),
			Error: "context deadline exceeded (Client.Timeout exceeded while awaiting headers)", NextAttemptAt: ts.Add(time.Hour)},
		{AttemptID: "a3", SubscriptionID: "s", Outcome: topics.OutcomeBlocked, DurationMS: 0},
		{AttemptID: "a4", SubscriptionID: "s", Outcome: "dead", Attempt: -3, HTTPStatus: 99999, DurationMS: 1e-7, TS: ts},
		{AttemptID: "a5", SubscriptionID: "s", Outcome: "dead", DurationMS: 1.5e300, Error: `quote " and \ backslash`},
		{AttemptID: "a6", SubscriptionID: "s", Outcome: "dead", Error: "<html> & \u2028"},
	}
}

// TestFastPath: what Encode writes is read by the fast path, exactly as
// topics.DecodeAttempt reads it, escapes aside (those take the fallback).
func TestFastPath(t *testing.T) {
	for _, a := range samples() {
		b := a.Encode()
		want, err := topics.DecodeAttempt(b)
		if err != nil {
			t.Fatalf("DecodeAttempt(%s): %v", b, err)
		}
		got, ok := fast(b)
		escaped := strings.Contains(string(b), `\`)
		if ok == escaped {
			t.Errorf("fast(%s) ok = %t, want %t", b, ok, !escaped)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("fast(%s) =\n%+v\nDecodeAttempt =\n%+v", b, got, want)
		}
		if got, err := Attempt(b); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Attempt(%s) = %+v, %v; want %+v", b, got, err, want)
		}
	}
}

// TestFallback: inputs the fast path must not read itself; Attempt gives
// what topics.DecodeAttempt gives.
func TestFallback(t *testing.T) {
	for _, in := range []string{
		``, `{}`, `[]`, `null`, `{"attempt_id":"a"}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","x":1}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","attempt":1.0}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","attempt":01}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","attempt":99999999999999999999}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","duration_ms":1e999}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","duration_ms":.5}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","tenant":null}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","tenant":"a\u0062"}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","tenant":"` + "\xff" + `"}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","ts":"2026-11-22"}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","ts":"2026-11-22T25:00:00Z"}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success","outcome":"dead"}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success"} {}`,
		`{"attempt_id":"a","subscription_id":"s","outcome":"success",}`,
		`{"Attempt_ID":"a","subscription_id":"s","outcome":"success"}`,
		` { "attempt_id" : "a" , "subscription_id":"s","outcome":"success" } `,
	} {
		want, wantErr := topics.DecodeAttempt([]byte(in))
		got, err := Attempt([]byte(in))
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("Attempt(%q) = %+v, %v; DecodeAttempt gives %+v, %v", in, got, err, want, wantErr)
		}
	}
}

// FuzzEquivalent: whenever the fast path reads an input, the contract's
// decoder reads it too, to the same attempt.
func FuzzEquivalent(f *testing.F) {
	for _, a := range samples() {
		f.Add(a.Encode())
	}
	f.Add([]byte(` {"attempt_id":"a","subscription_id":"s","outcome":"x","attempt":-0,"duration_ms":-0.5E+2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := fast(b)
		if !ok {
			return
		}
		want, err := topics.DecodeAttempt(b)
		if err != nil {
			t.Fatalf("fast read %q, DecodeAttempt refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast %+v, DecodeAttempt %+v", b, got, want)
		}
	})
}

func BenchmarkAttempt(b *testing.B) {
	v := samples()[0].Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Attempt(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAttempt(b *testing.B) {
	v := samples()[0].Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := topics.DecodeAttempt(v); err != nil {
			b.Fatal(err)
		}
	}
}
