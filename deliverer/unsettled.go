package deliverer

import (
	"context"
	"sync"
	"sync/atomic"
)

// unsettled bounds what a crash repeats (ADR 0029): a record holds one of
// MaxInFlight slots from before a worker takes it until the broker
// acknowledged a commit that covers it (its watermark or a finished run
// above it). A process killed at any moment has at most MaxInFlight
// records whose requests the next owner makes again: running, outcome not
// acknowledged, or finished and not yet committed. When half the slots
// wait for a commit, or a worker waits for a slot, the commit loop is
// woken instead of waiting for its interval.
type unsettled struct {
	slots chan struct{}
	wake  chan struct{} // one pending wake-up of the commit loop

	idle atomic.Int64 // slots of workers waiting for a record

	mu   sync.Mutex
	done int // slots whose records are done, waiting for a commit
}

func newUnsettled(n int) *unsettled {
	return &unsettled{slots: make(chan struct{}, n), wake: make(chan struct{}, 1)}
}

// take takes a slot for one record, waiting for one while every slot is
// taken; false when ctx ends first.
func (u *unsettled) take(ctx context.Context) bool {
	select {
	case u.slots <- struct{}{}:
		return true
	default:
	}
	u.nudge()
	select {
	case u.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// records is the number of slots held by records: running, or done and
// waiting for a commit.
func (u *unsettled) records() int { return len(u.slots) - int(u.idle.Load()) }

// giveBack frees a slot taken for no record.
func (u *unsettled) giveBack() { <-u.slots }

// finished counts the slot of a record that is done: the next commit
// covers it. Called after the lanes know the record is done.
func (u *unsettled) finished() {
	u.mu.Lock()
	u.done++
	half := u.done >= cap(u.slots)/2
	u.mu.Unlock()
	if half {
		u.nudge()
	}
}

// covered is the number of slots a commit that reads the lanes' state
// from now on covers; settle(covered) once the broker acknowledged it.
func (u *unsettled) covered() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.done
}

// settle frees n slots covered by an acknowledged commit.
func (u *unsettled) settle(n int) {
	u.mu.Lock()
	u.done -= n
	u.mu.Unlock()
	for range n {
		<-u.slots
	}
}

func (u *unsettled) nudge() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}
