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
// subscription would wait for CPU behind it. The retries' limit of
// requests at a time starts small when retries come, and every paceTick
// the deliverer compares how late the latest of the fresh records it
// started was (start minus the dispatcher's write) with the least such
// over paceWindow: late by more than twice that and paceSlack, the limit
// halves; on time, it grows by one; with no fresh records started, it
// doubles, so retries alone have every worker within a second. The tick's
// latest record, not its mean: the promise is about the tail (p99), and a
// mean on time let the retries grow until the tail was three times as
// late (ADR 0023).
const (
	paceTick   = 100 * time.Millisecond
	paceWindow = 50 // ticks: the least lateness of the last 5 s
	paceSlack  = 2 * time.Millisecond
)

// retryPacer is the limit's arithmetic, apart from time and the lanes.
type retryPacer struct {
	workers, start, limit int
	worst                 []time.Duration // the last paceWindow ticks' largest lateness
}

func newRetryPacer(workers int) *retryPacer {
	start := max(1, workers/64)
	return &retryPacer{workers: workers, start: start, limit: start}
}

// next takes a tick's largest lateness of the fresh records started in it
// (n of them) and how many retries the lanes hold, and returns the retries'
// limit.
func (p *retryPacer) next(late time.Duration, n, retries int) int {
	if n > 0 {
		p.worst = append(p.worst, late)
		if len(p.worst) > paceWindow {
			p.worst = p.worst[1:]
		}
	}
	switch {
	case retries == 0:
		p.limit = p.start
	case n == 0:
		p.limit = min(p.workers, 2*p.limit)
	case late > 2*slices.Min(p.worst)+paceSlack:
		p.limit = max(1, p.limit/2)
	default:
		p.limit = min(p.workers, p.limit+1)
	}
	return p.limit
}

// paceRetries sets the lanes' retry limit every paceTick until ctx ends.
func (d *deliverer) paceRetries(ctx context.Context) {
	p := newRetryPacer(d.cfg.MaxInFlight)
	d.lanes.SetRetryLimit(p.limit)
	t := time.NewTicker(paceTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			late, n := d.lanes.FreshLateness()
			d.lanes.SetRetryLimit(p.next(late, n, d.lanes.BufferedIn(d.names.Redeliveries())))
		}
	}
}
