package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestLeaveBounded: a member closing while its join waits on another member
// that does not rejoin is closed within the bound, not when the broker
// gives up on the other member.
func TestLeaveBounded(t *testing.T) {
	cluster, _, adm := newCluster(t)
	const topic, group = "leave", "leave-group"
	if _, err := adm.CreateTopic(testCtx(t, 10*time.Second), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	testkit.StuckMember(t, cluster.ListenAddrs(), group, topic)

	leaver := NewLeaver(testkit.Logger(t))
	joining, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		leaver.Opt())
	if err != nil {
		t.Fatal(err)
	}
	go joining.PollFetches(testCtx(t, time.Minute))
	testkit.WaitRebalancing(t, adm, group)

	closed := make(chan struct{})
	go func() {
		leaver.close(joining, time.Second)
		close(closed)
	}()
	testkit.WaitFor(t, 30*time.Second, "the joining member to close", testkit.Done(closed))
}
