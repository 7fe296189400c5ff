package deliverer

import (
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestShutdownDuringStuckRebalance: a deliverer stopped while its join
// waits on a group member that does not rejoin returns within the leave
// bound (kafka.LeaveTimeout), not when the broker gives up on the other
// member two minutes later.
func TestShutdownDuringStuckRebalance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	testkit.StuckMember(t, h.cluster.ListenAddrs(), topics.GroupDeliverer, h.names.Deliveries())
	r := h.start(nil)
	testkit.WaitRebalancing(t, h.adm, topics.GroupDeliverer)
	if err := r.Stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}
