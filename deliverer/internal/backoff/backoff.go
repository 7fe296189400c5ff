// Package backoff computes when a failed delivery is tried again: the
// subscription's schedule, jitter, and the endpoint's Retry-After.
package backoff

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// Jitter is the relative spread applied to every delay: ±20%.
const Jitter = topics.RetryJitter

// Next returns the delay before attempt n+1 after attempt n (1-based)
// failed, and false when the schedule is exhausted.
func Next(schedule []time.Duration, n int) (time.Duration, bool) {
	if n < 1 || n > len(schedule) {
		return 0, false
	}
	return schedule[n-1], true
}

// Jittered spreads d uniformly over [d-20%, d+20%].
func Jittered(d time.Duration, r *rand.Rand) time.Duration {
	f := 1 + Jitter*(2*r.Float64()-1)
	return time.Duration(float64(d) * f)
}

// MaxRetryAfter caps what RetryAfter returns: beyond a year is nonsense
// (Clamp bounds it further).
const MaxRetryAfter = 365 * 24 * time.Hour

// RetryAfter parses a Retry-After header value (delay-seconds or an HTTP
// date) relative to now, capped at MaxRetryAfter. ok is false when absent or
// malformed, or when the value is in the past.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return min(d, MaxRetryAfter), true
}

// Clamp bounds an endpoint's wish (Retry-After) to [delay, 2*delay] so an
// endpoint can slow its retries down but neither speed them up nor park
// them forever.
func Clamp(wish, delay time.Duration) time.Duration {
	return min(max(wish, delay), 2*delay)
}
