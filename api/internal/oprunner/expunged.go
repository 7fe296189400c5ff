package oprunner

import (
	"context"
	"time"

	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/runtime/dlq"
)

// expungedSince is the set of the events expunged since since, which a
// replay of the events published since then skips; empty without
// ClickHouse (nothing can be expunged without it). An error fails the
// replay rather than resend what may have been expunged.
func (rn *Runner) expungedSince(ctx context.Context, since time.Time) (map[string]bool, error) {
	if rn.ch == nil {
		return map[string]bool{}, nil
	}
	return retention.ExpungedSince(ctx, rn.ch, rn.database, since)
}

// expungedAmong is the set of the expunged events among ids (of dead
// letters, of failed events): they are not sent again; empty
// without ClickHouse.
func (rn *Runner) expungedAmong(ctx context.Context, ids []string) (map[string]bool, error) {
	if rn.ch == nil {
		return map[string]bool{}, nil
	}
	return retention.ExpungedAmong(ctx, rn.ch, rn.database, ids)
}

// eventIDs are the events of dead letters.
func eventIDs(entries []*dlq.Entry) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = eventID(e)
	}
	return ids
}

// eventID is the event of a dead letter: its delivery's, or the refused
// event's.
func eventID(e *dlq.Entry) string {
	if d := e.DeadLetter.Delivery; d != nil {
		return d.EventID
	}
	ev, _ := e.DeadLetter.Event()
	return ev.ID
}
