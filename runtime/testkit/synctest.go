package testkit

import (
	"fmt"
	"testing"
	"time"
)

// Watchdog fails loudly if a testing/synctest bubble runs for more than d
// of real time: call it outside the bubble, so its timer runs on the real
// clock. kgo's mutexes are sync.Mutex unless built with -tags synctests, and
// a goroutine blocked on one keeps virtual time from advancing: without the
// tag a bubble hung once on a loaded machine, so make test sets it; run by
// hand without it, this says so instead of the test binary's timeout.
func Watchdog(t *testing.T, d time.Duration) (stop func()) {
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		panic(fmt.Sprintf("%s: the synctest bubble is still running after %v of real time; rerun with -tags synctests", name, d))
	})
	return func() { timer.Stop() }
}
