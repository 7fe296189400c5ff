//go:build !unix

package transform

import "time"

// cpuTime is 0 where getrusage does not exist: the metric reads 0.
func cpuTime() time.Duration { return 0 }
