package kafka

import (
	"slices"
	"strings"
	"testing"
)

// TestFinishedRunsRoundTrip (invariant 3): the runs finished above a
// watermark travel in the commit's metadata and come back for the same
// committed offset only; metadata of any other kind (kgo's member id) or
// of another offset names none, and the runs that do not fit are left out
// (redone, never skipped).
func TestFinishedRunsRoundTrip(t *testing.T) {
	runs := []Run{{From: 1025, To: 1025}, {From: 1030, To: 1100}, {From: 1200, To: 1201}}
	md := finishedMetadata(1022, runs)
	if got := FinishedAbove(md, 1022); !slices.Equal(got, runs) {
		t.Fatalf("FinishedAbove(%q) = %v, want %v", md, got, runs)
	}
	for _, c := range []struct {
		what, md string
		at       int64
	}{
		{"another committed offset", md, 1023},
		{"kgo's member id", "kgo-1a2b3c", 1022},
		{"no metadata", "", 1022},
		{"a malformed run", finishedPrefix + "1022 3-5", 1022},
		{"a run not above the one before", finishedPrefix + "1022 0+5", 1022},
	} {
		if got := FinishedAbove(c.md, c.at); got != nil {
			t.Errorf("%s: FinishedAbove = %v, want none", c.what, got)
		}
	}
	if md := finishedMetadata(1022, nil); md != "" {
		t.Errorf("metadata without runs = %q, want none", md)
	}
	if md := finishedMetadata(1022, []Run{{From: 1022, To: 1030}}); md != "" {
		t.Errorf("metadata of a run from the watermark = %q, want none (the watermark is unfinished)", md)
	}

	var many []Run
	for i := range int64(1000) {
		many = append(many, Run{From: 2000 + 3*i, To: 2001 + 3*i})
	}
	md = finishedMetadata(1999, many)
	got := FinishedAbove(md, 1999)
	if len(md) > maxMetadata || len(got) == 0 || len(got) >= len(many) || !slices.Equal(got, many[:len(got)]) {
		t.Fatalf("%d runs: metadata of %d bytes naming %d runs, want at most %d bytes naming the first ones",
			len(many), len(md), len(got), maxMetadata)
	}
	// The densest runs ("gap 1, length 1") fill the metadata before
	// MaxFinishedRuns of them: a committer gathering no more loses none.
	var dense []Run
	for i := range int64(MaxFinishedRuns + 10) {
		dense = append(dense, Run{From: 2000 + 2*i, To: 2000 + 2*i})
	}
	if n := len(FinishedAbove(finishedMetadata(1999, dense), 1999)); n == 0 || n >= MaxFinishedRuns {
		t.Fatalf("metadata of %d single-record runs names %d, want some and fewer than MaxFinishedRuns (%d)", len(dense), n, MaxFinishedRuns)
	}
	if !strings.HasPrefix(md, finishedPrefix) {
		t.Fatalf("metadata %.40q does not start with %q", md, finishedPrefix)
	}
}

// BenchmarkFinishedMetadata renders a commit's metadata from as many runs
// as it carries (single records, every other offset), as every commit of
// a partition whose records finish out of order does.
func BenchmarkFinishedMetadata(b *testing.B) {
	var runs []Run
	for i := range int64(256) {
		runs = append(runs, Run{From: 1_000_002 + 2*i, To: 1_000_002 + 2*i})
	}
	b.ReportAllocs()
	for b.Loop() {
		if finishedMetadata(1_000_000, runs) == "" {
			b.Fatal("no metadata")
		}
	}
}
