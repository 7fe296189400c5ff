package window

import "time"

// NotDue returns, in offset order, the held retries not yet due at now:
// the candidates for an early release (recovery acceleration). A scheduled
// delivery's wait is none: it is never attempted before its deliver_at.
func (p *Partition) NotDue(now time.Time) []Record {
	var out []Record
	for _, h := range p.held {
		if h.Due.After(now) && h.DeliverAt.IsZero() {
			out = append(out, h)
		}
	}
	return out
}
