package backoff

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FuzzRetryAfter: Retry-After is whatever an endpoint sends. RetryAfter
// never panics, never returns a negative delay or one beyond MaxRetryAfter,
// and an HTTP date says the same as the delay-seconds it stands for: for the
// instant now+secs it returns what "secs" returns (a date not after now is
// refused, "0" means at once). The seed corpus is in
// testdata/fuzz/FuzzRetryAfter.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []struct {
		v          string
		now, delta int64
	}{
		{"120", 1795860000, 120},
		{" 7 ", 1795860000, 1},
		{"0", 1795860000, 0},
		{"-5", 1795860000, -5},
		{"99999999999", 1795860000, 99999999999},
		{"Sun, 22 Nov 2026 10:00:30 GMT", 1795860000, 30},
		{"Sunday, 22-Nov-26 10:00:30 GMT", 1795860000, -30},
		{"Sun Nov 22 10:00:30 2026", 0, 3600},
		{"Fri, 31 Dec 9999 23:59:59 GMT", 253402300799, 1},
		{"1.5", 1, 1},
		{"+3", 1, 1},
		{"", 1, 1},
	} {
		f.Add(s.v, s.now, s.delta)
	}
	f.Fuzz(func(t *testing.T, v string, nowSecs, delta int64) {
		// Any instant a server clock may show (years 1970 to 2200), any
		// delay of up to about 285 years either way (within the range of a
		// time.Duration).
		nowSecs = mod(nowSecs, 7258118400)
		delta %= 9_000_000_000
		now := time.Unix(nowSecs, 0).UTC()

		d, ok := RetryAfter(v, now)
		if ok && (d < 0 || d > MaxRetryAfter) {
			t.Fatalf("RetryAfter(%q) = %v, outside [0, %v]", v, d, MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("RetryAfter(%q) = %v, false; want 0 with false", v, d)
		}

		secs := strconv.FormatInt(delta, 10)
		ds, oks := RetryAfter(secs, now)
		switch {
		case delta < 0 && oks:
			t.Fatalf("RetryAfter(%q) = %v, true for a negative delay", secs, ds)
		case delta >= 0 && (!oks || ds != min(time.Duration(delta)*time.Second, MaxRetryAfter)):
			t.Fatalf("RetryAfter(%q) = %v, %v; want %v capped at %v", secs, ds, oks, delta, MaxRetryAfter)
		}
		for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
			at := now.Add(time.Duration(delta) * time.Second)
			date := at.Format(layout)
			if p, err := http.ParseTime(date); err != nil || !p.Equal(at) {
				// RFC 850 has two-digit years: only the ones ParseTime maps
				// back to the same century say the same instant.
				if layout == time.RFC850 {
					continue
				}
				t.Fatalf("http.ParseTime(%q) = %v, %v; want %v", date, p, err, at)
			}
			dd, okd := RetryAfter(date, now)
			if delta <= 0 {
				if okd {
					t.Fatalf("RetryAfter(%q) at %v = %v, true for a date not after now", date, now, dd)
				}
				continue
			}
			if !okd || dd != ds {
				t.Fatalf("RetryAfter(%q) at %v = %v, %v; RetryAfter(%q) = %v, %v", date, now, dd, okd, secs, ds, oks)
			}
		}
	})
}

// mod is x mod m in [0, m), for any x.
func mod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}
