package testkit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// StopWithin bounds how long Running.Stop waits for a run to return.
const StopWithin = 30 * time.Second

// Running is a component's Run going in a goroutine of a test.
type Running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	seen   atomic.Bool // the test looked at err: Stop or Err
}

// Go runs run with a context that Stop cancels. The test's end stops it
// too, and fails the test if run returned an error the test never looked
// at.
func Go(tb testing.TB, run func(ctx context.Context) error) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	tb.Cleanup(func() {
		seen := r.seen.Load()
		if err := r.Stop(tb); err != nil && !seen {
			tb.Errorf("Run = %v, want nil after cancel", err)
		}
	})
	return r
}

// Cancel cancels the run's context, not waiting for it to return.
func (r *Running) Cancel() { r.cancel() }

// Stop cancels the run and returns what it returned, failing tb when it
// does not return within StopWithin.
func (r *Running) Stop(tb testing.TB) error {
	tb.Helper()
	r.Cancel()
	timer := time.NewTimer(StopWithin)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
		tb.Fatalf("Run did not return within %v of its context being canceled", StopWithin)
	}
	return r.Err()
}

// StopOK is Stop, failing tb unless run returned nil.
func (r *Running) StopOK(tb testing.TB) {
	tb.Helper()
	if err := r.Stop(tb); err != nil {
		tb.Fatalf("Run = %v, want nil after cancel", err)
	}
}

// Done is closed once run returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Exited reports whether run has returned.
func (r *Running) Exited() bool { return Done(r.done)() }

// Err is what run returned, once Done is closed.
func (r *Running) Err() error {
	r.seen.Store(true)
	return r.err
}
