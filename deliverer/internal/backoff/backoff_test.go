package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	s := []time.Duration{time.Second, time.Minute, time.Hour}
	tests := []struct {
		n    int
		want time.Duration
		ok   bool
	}{{1, time.Second, true}, {2, time.Minute, true}, {3, time.Hour, true}, {4, 0, false}, {0, 0, false}}
	for _, tt := range tests {
		got, ok := Next(s, tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Next(%d) = %v, %v; want %v, %v", tt.n, got, ok, tt.want, tt.ok)
		}
	}
}

func TestJitteredStaysWithinTwentyPercent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := 10 * time.Second
	lo, hi := d, d
	for range 10000 {
		j := Jittered(d, r)
		lo, hi = min(lo, j), max(hi, j)
	}
	if lo < 8*time.Second || hi > 12*time.Second {
		t.Fatalf("jitter range [%v, %v] exceeds ±20%%", lo, hi)
	}
	if lo > 8500*time.Millisecond || hi < 11500*time.Millisecond {
		t.Fatalf("jitter range [%v, %v] does not spread", lo, hi)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"-5", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"1.5", 0, false},
		{"99999999999", 365 * 24 * time.Hour, true},
		{"Sun, 22 Nov 2026 10:00:30 GMT", 30 * time.Second, true},
		{"Sun, 22 Nov 2026 09:59:00 GMT", 0, false},
		{"Fri, 31 Dec 9999 23:59:59 GMT", MaxRetryAfter, true},
	}
	for _, tt := range tests {
		got, ok := RetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestClamp(t *testing.T) {
	tests := []struct{ wish, delay, want time.Duration }{
		{time.Second, 5 * time.Second, 5 * time.Second},
		{7 * time.Second, 5 * time.Second, 7 * time.Second},
		{time.Hour, 5 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := Clamp(tt.wish, tt.delay); got != tt.want {
			t.Errorf("Clamp(%v, %v) = %v, want %v", tt.wish, tt.delay, got, tt.want)
		}
	}
}
