package queuetest

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Rounds are the rates of rounds that hookpipe (ours) and a bare client
// took in turns, each sending the same number of messages, and the CPU
// time the process spent per message in each: on a loaded machine a
// rate is what the other processes left, the CPU time is still what it
// took.
type Rounds struct {
	ours, bare, oursCPU, bareCPU []float64
}

// Interleave runs ours and bare rounds times each, taking turns (the one
// to go first alternating), each sending n messages of a prefix of ids
// of its own under run.
func Interleave(b *testing.B, run string, rounds, n int, ours, bare func(prefix string, n int) error) Rounds {
	var r Rounds
	time1 := func(f func(string, int) error, prefix string, rates, cpus *[]float64) {
		start, cpu := time.Now(), cpuTime(b)
		if err := f(prefix, n); err != nil {
			b.Fatal(err)
		}
		*rates = append(*rates, float64(n)/time.Since(start).Seconds())
		*cpus = append(*cpus, float64((cpuTime(b)-cpu).Microseconds())/float64(n))
	}
	for i := range rounds {
		prefix := fmt.Sprintf("evt_%s_%d_", run, i)
		if i%2 == 0 {
			time1(ours, prefix+"s", &r.ours, &r.oursCPU)
			time1(bare, prefix+"b", &r.bare, &r.bareCPU)
		} else {
			time1(bare, prefix+"b", &r.bare, &r.bareCPU)
			time1(ours, prefix+"s", &r.ours, &r.oursCPU)
		}
	}
	return r
}

// Report reports the medians of ours's rate (unit), the bare client's
// (bare-msgs/s) and the rounds' ratios of the two (ratio), the lowest and
// highest ratio (ratio-min, ratio-max), and the medians of the CPU time
// per message (cpu-µs/msg, bare-cpu-µs/msg).
func (r Rounds) Report(b *testing.B, unit string) {
	ratios := make([]float64, len(r.ours))
	for i := range r.ours {
		ratios[i] = r.ours[i] / r.bare[i]
	}
	b.ReportMetric(median(r.ours), unit)
	b.ReportMetric(median(r.bare), "bare-msgs/s")
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(slices.Min(ratios), "ratio-min")
	b.ReportMetric(slices.Max(ratios), "ratio-max")
	b.ReportMetric(median(r.oursCPU), "cpu-µs/msg")
	b.ReportMetric(median(r.bareCPU), "bare-cpu-µs/msg")
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
