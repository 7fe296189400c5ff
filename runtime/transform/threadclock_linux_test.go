package transform

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTimeLimitCountsCPUTime: a call's time limit counts the time its
// script ran on a CPU, not the time it waited for one. On one P shared
// with two goroutines that never block, a script gets about a third of
// the CPU: one that loops for 300 ms of wall time, about 100 ms on a CPU,
// ends under a 200 ms limit (with wall time it went over), and one that
// loops for ever is stopped at the CPU limit (its wall limit far away, as
// a loaded machine may stretch 200 ms of a third of a CPU to seconds).
func TestTimeLimitCountsCPUTime(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	var spinners sync.WaitGroup
	for range 2 {
		spinners.Go(func() {
			for !stop.Load() {
			}
		})
	}
	defer func() {
		stop.Store(true)
		spinners.Wait()
	}()

	for _, tc := range []struct {
		name, body string
		detail     string // what the LimitError says, "" for none
	}{
		{"300 ms of wall time", `var end = Date.now() + 300; while (Date.now() < end) {} return webhook`, ""},
		{"for ever", `while (true) {}`, "on a CPU, over 200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := CompileWith("function handler(webhook) {\n"+tc.body+"\n}", Limits{Time: 200 * time.Millisecond, Wall: bound, Memory: 1 << 40})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Run(context.Background(), event)
			var le *LimitError
			switch {
			case tc.detail == "" && err != nil:
				t.Fatalf("err = %v, want none: the time waiting for a CPU counted", err)
			case tc.detail != "" && (!errors.As(err, &le) || le.Limit != LimitTime || !strings.Contains(le.Detail, tc.detail)):
				t.Fatalf("err = %v, want the time limit, %q", err, tc.detail)
			}
		})
	}
}

// TestWallLimit: a call is stopped at its wall time limit however little
// CPU time it used.
func TestWallLimit(t *testing.T) {
	s, err := CompileWith("function handler(webhook) { while (true) {} }", Limits{Time: bound, Wall: 100 * time.Millisecond, Memory: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(context.Background(), event)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitTime || !strings.HasPrefix(le.Detail, "still running after 100ms") {
		t.Fatalf("err = %v, want the wall time limit", err)
	}
}
