package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	flag "github.com/spf13/pflag"

	"golang.org/x/time/rate"
)

// maxBatch bounds the records of one produce call (and, for redrive, of one
// transaction).
const maxBatch = 100

// pace spaces the batches of a long command so that records go out at a
// given rate on average. A batch is about a second's worth of records, so a
// slow rate makes small batches (and short transactions) rather than long
// waits in the middle of one.
type pace struct {
	lim   *rate.Limiter
	batch int // records per batch
}

// defineRate defines the --rate flag of a long command.
func defineRate(fs *flag.FlagSet, def float64, what string) *float64 {
	return fs.Float64("rate", def, "max "+what+" per second")
}

// newPace checks a --rate value: a positive, finite number per second.
func newPace(perSecond float64) (*pace, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return nil, usagef("--rate %v: want a positive number per second", perSecond)
	}
	batch := int(min(math.Ceil(perSecond), maxBatch))
	// A full bucket lets the first batch go at once.
	return &pace{lim: rate.NewLimiter(rate.Limit(perSecond), batch), batch: batch}, nil
}

// wait returns when n more records (at most p.batch) may go.
func (p *pace) wait(ctx context.Context, n int) error {
	if err := p.lim.WaitN(ctx, n); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The wait would outlast the deadline.
		return fmt.Errorf("rate limit: %w", context.DeadlineExceeded)
	}
	return nil
}

// progress prints line() to stderr every second, in text mode only, until
// the returned function is first called.
func (c *cli) progress(line func() string) (stop func()) {
	if c.output != outputText {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				fmt.Fprintln(c.stderr, line())
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-stopped
	}
}
