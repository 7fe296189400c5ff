package main

import (
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
)

// timeRange holds the --since and --until flags of the dlq and replay
// commands.
type timeRange struct {
	since, until string
}

func (r *timeRange) define(fs *flag.FlagSet, what string) {
	fs.StringVar(&r.since, "since", "", "only "+what+" at or after TIME: RFC 3339, or a duration ago (90m, 2h, 3d)")
	fs.StringVar(&r.until, "until", "", "only "+what+" before TIME: RFC 3339, or a duration ago")
}

// resolve returns the range with relative times taken back from now; an
// end not given is zero.
func (r *timeRange) resolve(now time.Time) (since, until time.Time, err error) {
	if since, err = parseTime("--since", r.since, now); err != nil {
		return time.Time{}, time.Time{}, err
	}
	if until, err = parseTime("--until", r.until, now); err != nil {
		return time.Time{}, time.Time{}, err
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return time.Time{}, time.Time{}, usagef("--since %s is not before --until %s", r.since, r.until)
	}
	return since, until, nil
}

// parseTime reads an RFC 3339 time, or a duration ago: a Go duration (90m,
// 1h30m) or whole days (3d). The empty string is the zero time.
func parseTime(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		var n int
		if n, err = strconv.Atoi(days); err == nil && n > 100_000 {
			err = strconv.ErrRange
		}
		d = time.Duration(n) * 24 * time.Hour
	}
	if err != nil || d < 0 {
		return time.Time{}, usagef("%s %q: want an RFC 3339 time (2026-11-22T10:00:00Z) or a duration ago (90m, 2h, 3d)", name, s)
	}
	return now.Add(-d), nil
}
