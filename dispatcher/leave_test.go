package dispatcher

import (
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestShutdownDuringStuckRebalance: a dispatcher stopped while its join
// waits on a group member that does not rejoin returns within the leave
// bound (kafka.LeaveTimeout), not when the broker gives up on the other
// member two minutes later.
func TestShutdownDuringStuckRebalance(t *testing.T) {
	h := newHarness(t, 2)
	testkit.StuckMember(t, h.kafka.Brokers, h.group, h.names().Events())
	r := h.start(h.config("stuck-rebalance"))
	testkit.WaitRebalancing(t, h.adm, h.group)
	r.Cancel()
	testkit.WaitFor(t, 30*time.Second, "the dispatcher to stop", r.Exited)
	if r.Err() != nil {
		t.Fatalf("Run returned %v", r.Err())
	}
}
