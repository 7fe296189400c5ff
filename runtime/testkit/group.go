package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StuckMember joins group, consuming topics, and once assigned stays in
// its assignment callback until the test ends: a member that never
// rejoins, so the group's next rebalance waits on it for its rebalance
// timeout (two minutes).
func StuckMember(tb testing.TB, brokers []string, group string, topics ...string) {
	tb.Helper()
	release := make(chan struct{})
	assigned := make(chan struct{}, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.SessionTimeout(2*time.Minute), kgo.RebalanceTimeout(2*time.Minute),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
			<-release
		}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		close(release)
		cl.Close()
	})
	go cl.PollFetches(Ctx(tb, 5*time.Minute))
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		tb.Fatalf("the stuck member of %s was not assigned partitions within 30s", group)
	}
}

// WaitRebalancing waits until group prepares a rebalance: a member has
// sent a join and waits for the others to join too.
func WaitRebalancing(tb testing.TB, adm *kadm.Client, group string) {
	tb.Helper()
	WaitFor(tb, 30*time.Second, group+" to prepare a rebalance", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		described, err := adm.DescribeGroups(ctx, group)
		return err == nil && described[group].State == "PreparingRebalance"
	})
}
