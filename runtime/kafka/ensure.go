package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/topics"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Layout says how many partitions the pipeline topics get on creation.
type Layout struct {
	// Partitions of every topic but those of Names.OnePartition, which
	// always get one.
	Partitions int32
	// ReplicationFactor; -1 uses the broker default.
	ReplicationFactor int16
}

// EnsureResult reports what Ensure found and did.
type EnsureResult struct {
	Created  []string
	Existing []string
}

// Ensure creates every missing pipeline topic and verifies the ones that
// exist: the subscriptions topic must be compacted.
func Ensure(ctx context.Context, adm *kadm.Client, n topics.Names, l Layout) (EnsureResult, error) {
	var res EnsureResult
	if l.Partitions <= 0 {
		return res, errors.New("ensure topics: partitions must be positive")
	}
	details, err := adm.ListTopics(ctx, n.All()...)
	if err != nil {
		return res, fmt.Errorf("list topics: %w", err)
	}
	for _, t := range n.All() {
		if d, ok := details[t]; ok && d.Err == nil {
			res.Existing = append(res.Existing, t)
			continue
		}
		parts := l.Partitions
		if n.OnePartition(t) {
			parts = 1
		}
		r, err := adm.CreateTopic(ctx, parts, l.ReplicationFactor, n.TopicConfigs(t), t)
		if err == nil {
			err = r.Err
		}
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			res.Existing = append(res.Existing, t)
		case err != nil:
			return res, fmt.Errorf("create topic %s: %w", t, err)
		default:
			res.Created = append(res.Created, t)
		}
	}
	for _, t := range n.Compacted() {
		if err := verifyCompacted(ctx, adm, t); err != nil {
			return res, err
		}
	}
	return res, nil
}

// describeWait bounds how long Ensure waits for a topic it just created to
// be described: Apache Kafka answers UNKNOWN_TOPIC_OR_PARTITION until the
// new topic's metadata has reached the broker asked.
const describeWait = 10 * time.Second

func verifyCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
	rc, err := describeTopic(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("describe %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			if slices.Contains(strings.Split(c.MaybeValue(), ","), "compact") {
				return nil
			}
			return fmt.Errorf("topic %s has cleanup.policy=%s; it must be compacted", topic, c.MaybeValue())
		}
	}
	return fmt.Errorf("topic %s has no cleanup.policy; it must be compacted", topic)
}

// describeTopic describes a topic's configs, asking again for up to
// describeWait while the broker does not know the topic yet.
func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (kadm.ResourceConfig, error) {
	deadline := time.Now().Add(describeWait)
	wait := 50 * time.Millisecond
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		var rc kadm.ResourceConfig
		if err == nil {
			rc, err = rcs.On(topic, nil)
		}
		if err == nil {
			err = rc.Err
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return rc, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return rc, err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}
