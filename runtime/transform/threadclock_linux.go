package transform

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// thread is the CPU clock of the thread a call runs on, which any thread
// of the process can read, and its reading when the call began.
type thread struct {
	clock int32
	from  time.Duration
}

// pinThread locks the calling goroutine to its thread until unpinThread
// and returns the thread's clock: the clock id glibc's
// pthread_getcpuclockid makes (Linux's MAKE_THREAD_CPUCLOCK of the thread
// id, CPUCLOCK_SCHED). It is false when the clock cannot be read.
func pinThread() (thread, bool) {
	runtime.LockOSThread()
	t := thread{clock: ^int32(unix.Gettid())<<3 | 6}
	from, ok := readClock(t.clock)
	t.from = from
	return t, ok
}

func unpinThread() { runtime.UnlockOSThread() }

// ran is the CPU time the thread has run since the call began on it.
func (t thread) ran() (time.Duration, bool) {
	now, ok := readClock(t.clock)
	return now - t.from, ok
}

func readClock(clock int32) (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
