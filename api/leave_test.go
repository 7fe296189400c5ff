package api

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestRunnerElectionLeavesWithinBound: an API replica stopped while its
// join to the runner election waits on a member that does not rejoin stops
// within the leave bound (kafka.LeaveTimeout), not when the broker gives up
// on the other member two minutes later.
func TestRunnerElectionLeavesWithinBound(t *testing.T) {
	c := newCluster(t)
	cfg, err := LoadConfig(func(k string) string { return c.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	testkit.StuckMember(t, c.c.ListenAddrs(), cfg.Group, c.names.Operations())
	r := c.replica()
	testkit.WaitRebalancing(t, kadm.NewClient(c.cl), cfg.Group)
	stopped := make(chan struct{})
	go func() {
		r.stop()
		close(stopped)
	}()
	testkit.WaitFor(t, 30*time.Second, "the replica to stop", testkit.Done(stopped))
}
