// Package schema generates and applies the recorder's ClickHouse schema:
// the raw attempts table, the per-minute aggregate tables and the
// materialised views that fill them, as versioned, idempotent migrations
// recorded in a schema_migrations table. The DDL depends on the server's
// version: ClickHouse 18.16 (Debian's) gets plain types and no TTL; servers
// from 20.1 on get LowCardinality, DateTime64(3) and TTL retention.
package schema

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a ClickHouse server version as SELECT version() prints it
// (18.16.1, 24.8.4.13).
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion reads the leading numbers of a version string; parts beyond
// the third (build numbers) and suffixes (-testing) are ignored.
func ParseVersion(s string) (Version, error) {
	fields := strings.Split(strings.TrimSpace(s), ".")
	var n [3]int
	for i := 0; i < len(fields) && i < 3; i++ {
		f := fields[i]
		if end := strings.IndexFunc(f, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
			f = f[:end]
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			if i == 0 {
				return Version{}, fmt.Errorf("clickhouse version %q: no major version number", s)
			}
			break
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Features are the server capabilities the DDL uses when present.
type Features struct {
	// LowCardinality(String) for the few-valued columns (outcome,
	// failure_category, event_type). Experimental behind a setting on
	// 18.16, so treated as absent there.
	LowCardinality bool
	// DateTime64 keeps millisecond timestamps (ts, next_attempt_at,
	// published_at); without it they are whole seconds.
	DateTime64 bool
	// TTL lets the server expire old rows itself; without it retention is
	// `webhookctl clickhouse drop-partitions`.
	TTL bool
}

// FeaturesOf returns what a server version supports. 20.1 is the first
// release with all three out of experimental status (TTL arrived in 19.6,
// DateTime64 in 20.1); one threshold keeps the schemas in use to two, and
// 19.x is long out of support.
func FeaturesOf(v Version) Features {
	modern := v.AtLeast(20, 1)
	return Features{LowCardinality: modern, DateTime64: modern, TTL: modern}
}

// String lists the features present, comma-separated ("" when none).
func (f Features) String() string {
	var out []string
	if f.LowCardinality {
		out = append(out, "LowCardinality")
	}
	if f.DateTime64 {
		out = append(out, "DateTime64")
	}
	if f.TTL {
		out = append(out, "TTL")
	}
	return strings.Join(out, ",")
}
