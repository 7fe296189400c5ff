package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// LeaveTimeout bounds how long closing a group member may take. It fits,
// with the final commit's 10 s, in the 20 s the Helm chart adds to the
// shutdown budget for the pod's grace period.
const LeaveTimeout = 5 * time.Second

// A Leaver closes a consumer-group client within LeaveTimeout.
//
// Closing leaves the group, and franz-go sends the leave only once the
// join or sync it has in flight is answered. A broker answers a join when
// every member has rejoined or the group's rebalance timeout (60 s by
// default) has passed, so one replica that does not rejoin would hold the
// shutdown of every other past its grace period. Past the bound the Leaver
// cancels the client's context: the join is abandoned, no LeaveGroup is
// sent, and the group drops the member when its session times out, as it
// would after a crash. Offsets were committed before, so nothing is lost.
type Leaver struct {
	ctx    context.Context
	cancel context.CancelFunc
	log    *zap.Logger
}

// NewLeaver returns a Leaver; its Opt goes into the client's options.
func NewLeaver(log *zap.Logger) *Leaver {
	ctx, cancel := context.WithCancel(context.Background())
	return &Leaver{ctx: ctx, cancel: cancel, log: log}
}

// Opt gives the client the context Close cancels past the bound.
func (l *Leaver) Opt() kgo.Opt { return kgo.WithContext(l.ctx) }

// Close closes cl (leaving its group), cancelling the client's context if
// that has not finished within LeaveTimeout.
func (l *Leaver) Close(cl interface{ Close() }) { l.close(cl, LeaveTimeout) }

func (l *Leaver) close(cl interface{ Close() }, bound time.Duration) {
	t := time.AfterFunc(bound, func() {
		l.log.Warn("leaving the consumer group is waiting on a rebalance; closing without leaving (the group drops this member after its session timeout)",
			zap.Duration("after", bound))
		l.cancel()
	})
	cl.Close()
	t.Stop()
	l.cancel()
}
