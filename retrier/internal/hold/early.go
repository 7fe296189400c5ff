package hold

import "time"

// NotDue returns, in offset order, the held records not yet due at now:
// the candidates for an early release (recovery acceleration).
func (p *Partition) NotDue(now time.Time) []Record {
	var out []Record
	for _, h := range p.held {
		if h.Due.After(now) {
			out = append(out, h)
		}
	}
	return out
}
