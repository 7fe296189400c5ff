package transform

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// sampleEvery is how often a running call's allocations are measured: a
// script doubling a string every step reaches the memory limit within a
// few steps of a millisecond or more each, and a call of tens of
// microseconds never pays for a sample.
const sampleEvery = time.Millisecond

// grace is how long Run waits, once it stopped a call, for the script to
// notice: the interrupt lands between two instructions at once, so only a
// builtin running long (a guard missed it) takes longer; its goroutine is
// then left to finish alone.
const grace = 250 * time.Millisecond

// call is one run of a script: its realm and why it was stopped.
type call struct {
	s   *Script
	in  Input
	url *url.URL
	rm  *realm
	rt  *goja.Runtime

	mu      sync.Mutex
	stopped error

	// thread is the clock of the thread the call runs on, set before
	// clocked is: begun once the call began, wallOnly when that clock
	// cannot be read.
	thread  thread
	clocked atomic.Int32
}

// What a call's clocked says.
const (
	notBegun int32 = iota
	begun
	wallOnly
)

type result struct {
	out Output
	err error
}

// run is one call of s on the realm, on the realm's goroutine. reuse is
// false when the call may have left the runtime unfit for another: it
// went over a limit, was stopped, or the engine failed; a script that
// threw or returned a bad webhook leaves nothing behind (realm). A realm
// not to reuse is closed.
func (rm *realm) run(ctx context.Context, s *Script, in Input, u *url.URL) (out Output, reuse bool, err error) {
	c := &call{s: s, in: in, url: u, rm: rm, rt: rm.rt}
	rm.g.begin(c)
	rm.rt.ClearInterrupt()
	rm.calls <- c
	out, err = c.watch(ctx, rm.done)
	reuse = c.cause() == nil && (err == nil || errors.Is(err, ErrThrew) || errors.Is(err, ErrBadOutput))
	if !reuse {
		rm.close()
	}
	return out, reuse, err
}

// stop interrupts the script for err, once: the first reason stands.
func (c *call) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped == nil {
		c.stopped = err
		c.rt.Interrupt(err)
	}
}

func (c *call) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// watch waits for the call, stopping it at its time and memory limits and
// when ctx ends, and returns at most grace after it stopped it. One timer
// serves every limit: it first fires after sampleEvery, so a call shorter
// than that costs one timer and one reading of the allocation counter.
func (c *call) watch(ctx context.Context, done <-chan result) (Output, error) {
	l := c.s.limits
	start, base := time.Now(), allocatedRecently()
	timer := time.NewTimer(min(sampleEvery, l.Time))
	defer timer.Stop()
	ctxDone := ctx.Done()
	var abandon <-chan time.Time
	stop := func(err error) {
		c.stop(err)
		if abandon == nil {
			abandon = time.After(grace)
		}
	}
	for {
		select {
		case r := <-done:
			return r.out, r.err
		case <-timer.C:
			elapsed := time.Since(start)
			ran := c.ran(elapsed)
			if ran >= l.Time {
				stop(&LimitError{Limit: LimitTime, Detail: fmt.Sprintf("ran %v on a CPU, over %v", ran, l.Time)})
			} else if elapsed >= l.Wall {
				stop(&LimitError{Limit: LimitTime, Detail: fmt.Sprintf("still running after %v, %v of it on a CPU", l.Wall, ran)})
			} else if n := allocated() - base; n > uint64(l.Memory) {
				stop(&LimitError{Limit: LimitMemory, Detail: fmt.Sprintf("%d bytes allocated, over %d", n, l.Memory)})
			} else {
				timer.Reset(min(sampleEvery, l.Time-ran, l.Wall-elapsed))
			}
		case <-ctxDone:
			ctxDone = nil
			stop(ctx.Err())
		case <-abandon:
			return Output{}, c.cause()
		}
	}
}

// ran is how long the call has run on a CPU: its thread's CPU time since
// it began, none before it began, elapsed (wall time) when the thread's
// clock cannot be read.
func (c *call) ran(elapsed time.Duration) time.Duration {
	switch c.clocked.Load() {
	case notBegun:
		return 0
	case begun:
		if ran, ok := c.thread.ran(); ok {
			return ran
		}
	}
	return elapsed
}

// allocated is the bytes the process allocated on the heap since it began.
// It costs a couple of microseconds (runtime/metrics sums every P's
// counters).
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// allocSample is a reading of allocated and when it was made.
type allocSample struct {
	at    time.Time
	bytes uint64
}

var lastAlloc atomic.Pointer[allocSample]

// allocatedRecently is allocated as read less than sampleEvery ago, by
// this call or another: the calls of a busy deliverer share one reading
// a millisecond. A call then counts from up to a millisecond before it
// began: what other goroutines allocated then counts too, as what they
// allocate while it runs does.
func allocatedRecently() uint64 {
	now := time.Now()
	if s := lastAlloc.Load(); s != nil && now.Sub(s.at) < sampleEvery {
		return s.bytes
	}
	n := allocated()
	lastAlloc.Store(&allocSample{at: now, bytes: n})
	return n
}

// run executes the call on the realm's goroutine, so that Run can return
// when a builtin does not. A panic of the engine is the script's failure, not
// the process's.
//
// The goroutine stays on its thread for the call, whose CPU clock then
// measures the call alone: locked only while it runs, it costs two system
// calls a call, a microsecond or two; locked for good, a handover between
// threads at every call and every answer cost tens.
func (c *call) run(done chan<- result) {
	t, ok := pinThread()
	c.thread = t
	if ok {
		c.clocked.Store(begun)
	} else {
		c.clocked.Store(wallOnly)
	}
	defer func() {
		unpinThread()
		if x := recover(); x != nil {
			done <- result{err: fmt.Errorf("%w: the engine failed: %v", ErrFailed, x)}
		}
	}()
	out, err := c.execute()
	clear(c.rm.g.lazies) // the event's data, not to be kept by an idle realm
	if err != nil {
		if cause := c.cause(); cause != nil {
			err = cause
		}
	}
	done <- result{out: out, err: err}
}

// execute runs the script's top level, calls its handler and reads what
// it returned.
func (c *call) execute() (Output, error) {
	g := c.rm.g
	script, err := c.rm.script(c.s)
	if err != nil {
		return Output{}, c.scriptError(err)
	}
	h, err := script(c.rm.global)
	if err != nil {
		return Output{}, c.scriptError(err)
	}
	var handler goja.Callable
	var webhook goja.Value
	err = c.try(func() {
		fn, ok := goja.AssertFunction(h)
		if !ok {
			panic(c.rt.NewTypeError("handler is not a function"))
		}
		handler, webhook = fn, c.input(g)
	})
	if err != nil {
		return Output{}, c.scriptError(err)
	}
	res, err := handler(goja.Undefined(), webhook)
	if err != nil {
		return Output{}, c.scriptError(err)
	}
	return c.output(g, res)
}

// try runs f as a builtin of the runtime, so that what the script's code
// throws or the interrupt raises while f reads its values comes back as an
// error.
func (c *call) try(f func()) error {
	prev := c.rm.tried
	c.rm.tried = f
	defer func() { c.rm.tried = prev }()
	_, err := c.rm.tryFn(goja.Undefined())
	return err
}

// scriptError classifies an error of the runtime: the reason the call was
// stopped, the call stack, or the script's exception.
func (c *call) scriptError(err error) error {
	var interrupted *goja.InterruptedError
	var overflow *goja.StackOverflowError
	var ex *goja.Exception
	switch {
	case errors.As(err, &interrupted):
		if cause := c.cause(); cause != nil {
			return cause
		}
		return fmt.Errorf("%w: interrupted: %v", ErrLimit, interrupted.Value())
	case errors.As(err, &overflow):
		return &LimitError{Limit: LimitCallStack, Detail: fmt.Sprintf("more than %d nested calls", c.s.limits.CallDepth)}
	case errors.As(err, &ex):
		te := &ThrowError{Message: c.message(ex.Value())}
		for _, f := range ex.Stack() {
			if p := f.Position(); p.Line > 0 {
				te.Line, te.Column = p.Line, p.Column
				if p.Line == 1 {
					te.Column -= len(prefix)
				}
				break
			}
		}
		return te
	}
	return fmt.Errorf("%w: %v", ErrThrew, err)
}

// maxMessage bounds the message of an exception kept in an error.
const maxMessage = 1024

// message is the thrown value as a string, which for an object is the
// script's own code (toString) and may itself throw.
func (c *call) message(v goja.Value) string {
	var s string
	if err := c.try(func() { s = v.String() }); err != nil {
		return "a value whose toString failed"
	}
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	return s
}
