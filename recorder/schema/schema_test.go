package schema

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden DDL files in testdata/")

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		err  bool
	}{
		{"18.16.1", Version{18, 16, 1}, false},
		{"24.8.4.13", Version{24, 8, 4}, false},
		{"23.3.1.2823-lts", Version{23, 3, 1}, false},
		{"25.1", Version{25, 1, 0}, false},
		{" 20.1.2.4\n", Version{20, 1, 2}, false},
		{"21.8.x", Version{21, 8, 0}, false},
		{"", Version{}, true},
		{"vm", Version{}, true},
	} {
		got, err := ParseVersion(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, error %t", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestFeaturesOf(t *testing.T) {
	for _, tc := range []struct {
		v    Version
		want Features
	}{
		{Version{18, 16, 1}, Features{}},
		{Version{19, 17, 0}, Features{}},
		{Version{20, 1, 0}, Features{true, true, true}},
		{Version{24, 8, 4}, Features{true, true, true}},
	} {
		if got := FeaturesOf(tc.v); got != tc.want {
			t.Errorf("FeaturesOf(%v) = %+v, want %+v", tc.v, got, tc.want)
		}
	}
}

// render is the whole schema as a server of version v gets it: every
// statement Migrate may run, in order.
func render(v string, retentionDays int) string {
	ver, err := ParseVersion(v)
	if err != nil {
		panic(err)
	}
	f := FeaturesOf(ver)
	var b strings.Builder
	for _, q := range []string{CreateDatabase("webhooks"), CreateMigrations("webhooks")} {
		b.WriteString(q + ";\n\n")
	}
	for _, m := range Migrations("webhooks", f, retentionDays) {
		b.WriteString("-- migration " + m.Name + "\n")
		for _, q := range m.Statements {
			b.WriteString(q + ";\n\n")
		}
		for _, c := range m.AddColumns {
			b.WriteString(c.AddColumn("webhooks") + "; -- where missing\n\n")
		}
	}
	if f.TTL && retentionDays > 0 {
		b.WriteString("-- retention, when a table's TTL differs\n")
		for _, table := range []string{TableAttempts, TableLatency, TableOutcomes} {
			b.WriteString(ModifyTTL("webhooks", table, retentionDays) + ";\n")
		}
	}
	b.WriteString("-- insert\n" + InsertAttempts("webhooks") + "\n")
	return b.String()
}

// TestDDLGolden pins the full DDL text for Debian's 18.16 and for a modern
// server (24.8, no server needed): go test -update rewrites the files after
// a deliberate change.
func TestDDLGolden(t *testing.T) {
	for _, tc := range []struct{ version, file string }{
		{"18.16.1", "clickhouse-18.16.sql"},
		{"24.8.4.13", "clickhouse-24.8.sql"},
	} {
		got := render(tc.version, 90)
		path := filepath.Join("testdata", tc.file)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("DDL for %s differs from %s (go test -update after a deliberate change):\n%s", tc.version, path, got)
		}
	}
}

// TestModernDDL: what a current server gets, and the old one does not.
func TestModernDDL(t *testing.T) {
	modern, old := render("24.8.4.13", 90), render("18.16.1", 90)
	for _, want := range []string{
		"event_type LowCardinality(String)",
		"outcome LowCardinality(String)",
		"failure_category LowCardinality(String)",
		"ts DateTime64(3, 'UTC')",
		"next_attempt_at DateTime64(3, 'UTC')",
		"published_at DateTime64(3, 'UTC')",
		"ORDER BY (tenant, subscription_id, ts, attempt_id)\nTTL toDateTime(ts) + INTERVAL 90 DAY",
		"ORDER BY (tenant, subscription_id, minute)\nTTL minute + INTERVAL 90 DAY",
		"toStartOfMinute(toDateTime(ts)) AS minute",
		"ALTER TABLE webhooks.attempts MODIFY TTL toDateTime(ts) + INTERVAL 90 DAY",
	} {
		if !strings.Contains(modern, want) {
			t.Errorf("modern DDL lacks %q", want)
		}
		if strings.Contains(old, want) {
			t.Errorf("18.16 DDL has %q", want)
		}
	}
	for _, banned := range []string{"LowCardinality", "DateTime64", "TTL", "Map(", "SimpleAggregateFunction"} {
		if strings.Contains(old, banned) {
			t.Errorf("18.16 DDL uses %s", banned)
		}
	}
	if strings.Contains(render("24.8.4.13", 0), "TTL") {
		t.Error("retention 0 still sets a TTL")
	}
	if !strings.Contains(render("24.8.4.13", 30), "INTERVAL 30 DAY") {
		t.Error("retention 30 not in the TTL")
	}
}

func TestInsertListsEveryColumn(t *testing.T) {
	q := InsertAttempts("db")
	want := "INSERT INTO db.attempts (attempt_id, event_id, event_type, subscription_id, tenant, attempt, outcome, " +
		"failure_category, http_status, duration_ms, ts, error, next_attempt_at, published_at, response_sample, batch_id)"
	if q != want {
		t.Errorf("InsertAttempts = %q, want %q", q, want)
	}
}

func TestValidDatabase(t *testing.T) {
	for db, ok := range map[string]bool{"webhooks": true, "wh_2": true, "_x": true, "": false, "2wh": false, "a-b": false,
		"a.b": false, "a b": false, "x;DROP": false, "`x`": false} {
		if err := ValidDatabase(db); (err == nil) != ok {
			t.Errorf("ValidDatabase(%q) = %v", db, err)
		}
	}
}
