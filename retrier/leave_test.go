package retrier

import (
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestShutdownDuringStuckRebalance: a retrier stopped while its join waits
// on a group member that does not rejoin returns within the leave bound
// (kafka.LeaveTimeout), not when the broker gives up on the other member
// two minutes later.
func TestShutdownDuringStuckRebalance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	testkit.StuckMember(t, h.cluster.ListenAddrs(), topics.GroupRetrier, h.names.RetryTopics()[0])
	r := h.start(h.config())
	testkit.WaitRebalancing(t, h.adm, topics.GroupRetrier)
	r.StopOK(t)
}
