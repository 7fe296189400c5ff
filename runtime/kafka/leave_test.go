package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestLeaveBounded: a member closing while its join waits on another member
// that does not rejoin (stuck in its assignment callback, its rebalance
// timeout two minutes) is closed within the bound, not when the broker
// gives up on the other member.
func TestLeaveBounded(t *testing.T) {
	cluster, _, adm := newCluster(t)
	const topic, group = "leave", "leave-group"
	if _, err := adm.CreateTopic(testCtx(t, 10*time.Second), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	base := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(2 * time.Minute), kgo.RebalanceTimeout(2 * time.Minute)}

	release := make(chan struct{})
	assigned := make(chan struct{}, 1)
	stuck, err := kgo.NewClient(append(base, kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
		assigned <- struct{}{}
		<-release
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		stuck.Close()
	})
	go stuck.PollFetches(testCtx(t, time.Minute))
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("the first member was not assigned its partitions")
	}

	leaver := NewLeaver(testkit.Logger(t))
	joining, err := kgo.NewClient(append(base, leaver.Opt())...)
	if err != nil {
		t.Fatal(err)
	}
	go joining.PollFetches(testCtx(t, time.Minute))
	testkit.WaitFor(t, 30*time.Second, "the second member's join to start a rebalance", func() bool {
		described, err := adm.DescribeGroups(testCtx(t, 5*time.Second), group)
		return err == nil && described[group].State == "PreparingRebalance"
	})

	closed := make(chan struct{})
	go func() {
		leaver.close(joining, time.Second)
		close(closed)
	}()
	testkit.WaitFor(t, 30*time.Second, "the joining member to close", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
}
