package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestVirtualPaceSpacesBatches: at --rate 10, 45 records go in batches of 10, the
// first at once and each next one a second later (virtual time, exact), so
// replay and redrive hold to the rate on average.
func TestVirtualPaceSpacesBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := newPace(10)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var at []time.Duration
		for sent := 0; sent < 45; {
			n := min(p.batch, 45-sent)
			if err := p.wait(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
			sent += n
		}
		want := []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 3500 * time.Millisecond}
		if !slices.Equal(at, want) {
			t.Fatalf("batches went at %v, want %v", at, want)
		}
	})
}

// TestVirtualPaceWaitPastDeadline: a wait that would outlast the command's
// deadline fails at once, saying it is the rate limit.
func TestVirtualPaceWaitPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := newPace(1)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if err := p.wait(ctx, 1); err != nil {
			t.Fatal(err)
		}
		err = p.wait(ctx, 1)
		if err == nil || !strings.Contains(err.Error(), "rate limit") {
			t.Fatalf("second wait: %v, want a rate limit error", err)
		}
	})
}

// TestVirtualProgressLine: in text mode a long command prints its progress line to
// stderr every second until stopped, and nothing after; with -o json,
// nothing (stdout is the JSON, stderr stays quiet).
func TestVirtualProgressLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, output := range []string{outputText, outputJSON} {
			var buf testkit.Buffer
			c := &cli{output: output, stderr: &buf}
			n := 0
			stop := c.progress(func() string { n++; return "replayed " + strings.Repeat("x", n) })
			time.Sleep(3500 * time.Millisecond)
			stop()
			time.Sleep(2 * time.Second)
			want := ""
			if output == outputText {
				want = "replayed x\nreplayed xx\nreplayed xxx\n"
			}
			if got := buf.String(); got != want {
				t.Errorf("-o %s: stderr %q, want %q", output, got, want)
			}
		}
	})
}
