package recorder

import (
	"testing"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestShutdownDuringStuckRebalance: a recorder stopped while its join
// waits on a group member that does not rejoin returns within the leave
// bound (kafka.LeaveTimeout), not when the broker gives up on the other
// member two minutes later.
func TestShutdownDuringStuckRebalance(t *testing.T) {
	h := newHarness(t)
	testkit.StuckMember(t, []string{h.env[kafka.EnvBrokers]}, topics.GroupRecorder, h.names.Attempts())
	r := h.start(h.config())
	testkit.WaitRebalancing(t, h.adm, topics.GroupRecorder)
	r.StopOK(t)
}
