package process

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/testkit/otlptest"
	"github.com/hookpipe/hookpipe/runtime/tracing"
)

type settings struct{ v string }

func load(getenv func(string) string) (settings, error) {
	if getenv("X") == "bad" {
		return settings{}, errors.New("X is bad")
	}
	return settings{v: getenv("X")}, nil
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		runErr error
		code   int
		stderr string
	}{
		{"clean", map[string]string{"X": "ok"}, nil, 0, ""},
		{"bad settings", map[string]string{"X": "bad"}, nil, 2, "comp: configuration: X is bad"},
		{"bad log level", map[string]string{"WEBHOOKS_LOG_LEVEL": "loud"}, nil, 2, "WEBHOOKS_LOG_LEVEL"},
		{"every bad setting at once", map[string]string{"X": "bad", "WEBHOOKS_LOG_LEVEL": "loud"}, nil, 2,
			"comp: configuration: X is bad\nWEBHOOKS_LOG_LEVEL"},
		{"run fails", nil, errors.New("boom"), 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			var got settings
			code := Run("comp", func(k string) string { return tt.env[k] }, &stderr, load,
				func(_ context.Context, c settings, _ *zap.Logger) error { got = c; return tt.runErr })
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("code %d stderr %q, want %d containing %q", code, stderr.String(), tt.code, tt.stderr)
			}
			if tt.code != 2 && got.v != tt.env["X"] {
				t.Errorf("run got settings %+v", got)
			}
		})
	}
}

// TestCPUProfile: WEBHOOKS_CPU_PROFILE writes a profile of the run once the
// component has returned; a path that cannot be created is a configuration
// error before the component starts.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	ran := false
	code := Run("comp", func(k string) string { return map[string]string{"WEBHOOKS_CPU_PROFILE": path}[k] }, io.Discard, load,
		func(context.Context, settings, *zap.Logger) error {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the profile file is not there while the component runs: %v", err)
			}
			ran = true
			return nil
		})
	b, err := os.ReadFile(path)
	if code != 0 || !ran || err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("code %d, ran %v, profile %d bytes (%v): want 0, true and a gzipped profile", code, ran, len(b), err)
	}

	var stderr strings.Builder
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	code = Run("comp", func(k string) string { return map[string]string{"WEBHOOKS_CPU_PROFILE": bad}[k] }, &stderr, load,
		func(context.Context, settings, *zap.Logger) error {
			t.Error("ran with an unwritable profile")
			return nil
		})
	if code != 2 || !strings.Contains(stderr.String(), "WEBHOOKS_CPU_PROFILE") {
		t.Errorf("code %d, stderr %q; want 2 naming WEBHOOKS_CPU_PROFILE", code, stderr.String())
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		argv         []string
		code         int
		done         bool
		stdout, errs string
	}{
		{argv: nil},
		{argv: []string{"--version"}, done: true, stdout: "comp dev\n"},
		{argv: []string{"-version"}, done: true, stdout: "comp dev\n"},
		{argv: []string{"--help"}, code: 2, done: true, errs: "the only flag is --version"},
		{argv: []string{"--version", "x"}, code: 2, done: true, errs: "unexpected arguments"},
	} {
		var stdout, stderr strings.Builder
		code, done := args("comp", tc.argv, &stdout, &stderr)
		if code != tc.code || done != tc.done || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.errs) ||
			(tc.errs == "" && stderr.Len() > 0) {
			t.Errorf("args(%q) = %d, %v, stdout %q, stderr %q; want %d, %v, %q, %q",
				tc.argv, code, done, stdout.String(), stderr.String(), tc.code, tc.done, tc.stdout, tc.errs)
		}
	}
}

// TestRunFlushesSpans: with an OTLP endpoint set, the component's context
// carries a tracer provider, and the spans it made are exported when Run
// returns, before the process exits.
func TestRunFlushesSpans(t *testing.T) {
	recv := otlptest.New(t)
	t.Setenv(tracing.EnvEndpoint, recv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // nothing but the shutdown exports
	var stderr strings.Builder
	code := Run("comp", os.Getenv, &stderr, load, func(ctx context.Context, _ settings, _ *zap.Logger) error {
		tr := tracing.For(ctx, "comp")
		if !tr.On() {
			return errors.New("tracing is off")
		}
		_, span := tr.Start(ctx, "work", trace.SpanKindInternal)
		span.End()
		return nil
	})
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, stderr.String())
	}
	if spans := recv.Named("work"); len(spans) != 1 || spans[0].Service != "hookpipe-comp" {
		t.Fatalf("received %+v", recv.Spans())
	}
}

// TestTuneGC: without GOGC in the environment the process collects at
// gcPercent, with GOGC it is left alone, and the memory limit is 90 % of
// the container's.
func TestTuneGC(t *testing.T) {
	// memlimit reads GOMEMLIMIT from the process environment: unset it
	// for the test (t.Setenv restores it afterwards).
	t.Setenv("GOMEMLIMIT", "")
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
		t.Fatal(err)
	}
	orig := debug.SetGCPercent(100)
	origLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(orig); debug.SetMemoryLimit(origLimit) })

	const container = 1 << 30
	percent, limit, err := tuneGC(func(string) string { return "" }, memlimit.Limit(container))
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); percent != gcPercent || got != gcPercent {
		t.Errorf("without GOGC: GC percent %d (reported %d), want %d", got, percent, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); limit != container*9/10 || got != limit {
		t.Errorf("memory limit %d (reported %d), want %d", got, limit, container*9/10)
	}

	percent, _, err = tuneGC(func(k string) string { return map[string]string{"GOGC": "100"}[k] }, memlimit.Limit(container))
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); percent != -1 || got != 100 {
		t.Errorf("with GOGC=100: GC percent %d (reported %d), want 100 left alone", got, percent)
	}
}

// TestGCPercentFor: gcPercent while the live heap is small, then the
// percent that keeps the headroom, never below 100.
func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, gcPercent}, {10 * mib, gcPercent}, {64 * mib, gcPercent}, {128 * mib, 200},
		{256 * mib, 100}, {900 * mib, 100},
	} {
		if got := gcPercentFor(tc.live, heapHeadroom); got != tc.want {
			t.Errorf("live %d MiB: GC percent %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}

// TestAdaptGC: a process whose live heap outgrows the headroom collects at
// 100, and at gcPercent again once the heap is small.
func TestAdaptGC(t *testing.T) {
	orig := debug.SetGCPercent(gcPercent)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); adaptGC(ctx, 5*time.Millisecond, 8<<20) }()
	t.Cleanup(func() { cancel(); <-done })

	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	waitPercent := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gogc() != want {
			if time.Now().After(deadline) {
				t.Fatalf("GC percent %d, want %d", gogc(), want)
			}
			runtime.GC()
			time.Sleep(5 * time.Millisecond)
		}
	}
	func() {
		live := make([]byte, 64<<20)
		for i := range live {
			live[i] = byte(i)
		}
		waitPercent(100)
		runtime.KeepAlive(live)
	}()
	waitPercent(gcPercent)
}
