package topics

import (
	"time"
)

// DefaultSchedule is the retry schedule after the first attempt when a
// subscription sets none: 5s, 5m, 30m, 2h, 5h, 10h, 10h (about 27.6 h).
var DefaultSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// MaxScheduleSteps bounds a subscription's retry schedule.
const MaxScheduleSteps = 20

// RetryJitter is the relative spread of retry delays: ±20%. A record goes
// to the tier of its schedule step (Names.TierFor), so one written to tier
// T at time w is due no sooner than w + (1-RetryJitter)·T; only a wait
// shorter than the first tier (a rate limit's) is due sooner in it.
const RetryJitter = 0.2

// ParseSchedule parses a subscription's retry_schedule; empty means
// DefaultSchedule. Each step is between 1s and 48h.
func ParseSchedule(steps []string) ([]time.Duration, error) {
	if len(steps) == 0 {
		return DefaultSchedule, nil
	}
	if len(steps) > MaxScheduleSteps {
		return nil, invalid("subscription", "retry_schedule", "more than %d steps", MaxScheduleSteps)
	}
	out := make([]time.Duration, len(steps))
	for i, s := range steps {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, invalid("subscription", "retry_schedule", "%q is not a duration", s)
		}
		if d < time.Second || d > 48*time.Hour {
			return nil, invalid("subscription", "retry_schedule", "%q is not within 1s..48h", s)
		}
		out[i] = d
	}
	return out, nil
}
