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
// the deliverer compares how late the fresh records it started were (start
// minus the dispatcher's write) with the least it saw over paceWindow:
// late by more than twice that and paceSlack, the limit halves; on time,
// it grows by one; with no fresh records started, it doubles, so retries
// alone have every worker within a second.
const (
	paceTick   = 100 * time.Millisecond
	paceWindow = 50 // ticks: the least lateness of the last 5 s
	paceSlack  = 2 * time.Millisecond
)

// retryPacer is the limit's arithmetic, apart from time and the lanes.
type retryPacer struct {
	workers, start, limit int
	means                 []time.Duration // the last paceWindow ticks' mean lateness
}

func newRetryPacer(workers int) *retryPacer {
	start := max(1, workers/64)
	return &retryPacer{workers: workers, start: start, limit: start}
}

// next takes a tick's mean lateness of the fresh records started in it (n
// of them) and how many retries the lanes hold, and returns the retries'
// limit.
func (p *retryPacer) next(mean time.Duration, n, retries int) int {
	if n > 0 {
		p.means = append(p.means, mean)
		if len(p.means) > paceWindow {
			p.means = p.means[1:]
		}
	}
	switch {
	case retries == 0:
		p.limit = p.start
	case n == 0:
		p.limit = min(p.workers, 2*p.limit)
	case mean > 2*slices.Min(p.means)+paceSlack:
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
			mean, n := d.lanes.FreshLateness()
			d.lanes.SetRetryLimit(p.next(mean, n, d.lanes.BufferedIn(d.names.Redeliveries())))
		}
	}
}
