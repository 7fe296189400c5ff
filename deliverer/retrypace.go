package deliverer

import (
	"context"
	"slices"
	"time"
)

// Due retries take the capacity fresh deliveries leave (docs/design.md,
// invariant 5; ADR 0023). A storm of retries coming due at once (an
// endpoint recovered, a tier releasing) would otherwise run at the full
// speed of the machine, and the fresh deliveries of every other
// subscription would wait for CPU behind it. Retries may start at most a
// budget of them per paceTick, which starts small when retries come, and
// every tick the deliverer compares how late the latest of the fresh
// records it started was (start minus the dispatcher's write) with the
// least such over paceWindow: late by more than twice that and paceSlack,
// the budget halves; on time, it grows by a quarter (at least one); with
// no fresh records started, it doubles, so retries alone run unchecked
// within about a second. The tick's latest record, not its mean: the
// promise is about the tail (p99), and a mean on time let the retries grow
// until the tail was three times as late. A budget of starts, not a limit
// of requests at a time: at the least limit, one request at a time, a
// fast endpoint still took a thousand retries a second (ADR 0023).
const (
	paceTick   = 100 * time.Millisecond
	paceWindow = 50 // ticks: the least lateness of the last 5 s
	paceSlack  = 2 * time.Millisecond
	// paceStart is the budget of a tick when retries come: 100 a second.
	paceStart = 10
)

// retryPacer is the budget's arithmetic, apart from time and the lanes.
type retryPacer struct {
	most, budget int
	worst        []time.Duration // the last paceWindow ticks' largest lateness
}

// newRetryPacer paces a deliverer of that many workers: a start per
// worker per millisecond is more than they can use, so the budget stops
// growing there, unchecked in effect.
func newRetryPacer(workers int) *retryPacer {
	return &retryPacer{most: max(paceStart, workers*int(paceTick/time.Millisecond)), budget: paceStart}
}

// next takes a tick's largest lateness of the fresh records started in it
// (n of them) and how many retries the lanes hold, and returns the
// retries' budget of starts for the next tick.
func (p *retryPacer) next(late time.Duration, n, retries int) int {
	if n > 0 {
		p.worst = append(p.worst, late)
		if len(p.worst) > paceWindow {
			p.worst = p.worst[1:]
		}
	}
	switch {
	case retries == 0:
		p.budget = paceStart
	case n == 0:
		p.budget = min(p.most, 2*p.budget)
	case late > 2*slices.Min(p.worst)+paceSlack:
		p.budget = max(1, p.budget/2)
	default:
		p.budget = min(p.most, p.budget+max(1, p.budget/4))
	}
	return p.budget
}

// paceRetries sets the lanes' retry budget every paceTick until ctx ends.
func (d *deliverer) paceRetries(ctx context.Context) {
	p := newRetryPacer(d.cfg.MaxInFlight)
	d.lanes.SetRetryBudget(p.budget)
	t := time.NewTicker(paceTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			late, n := d.lanes.FreshLateness()
			d.lanes.SetRetryBudget(p.next(late, n, d.lanes.BufferedIn(d.names.Redeliveries())))
		}
	}
}
