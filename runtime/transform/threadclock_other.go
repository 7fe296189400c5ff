//go:build !linux

package transform

import "time"

// thread stands for the CPU clock of a call's thread, which only Linux
// lets another thread read: elsewhere a call's time limit counts wall
// time.
type thread struct{}

func pinThread() (thread, bool) { return thread{}, false }

func unpinThread() {}

func (thread) ran() (time.Duration, bool) { return 0, false }
