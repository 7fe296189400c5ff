// Package stack runs the pipeline on one machine: the embedded
// Kafka-protocol broker, Redis, and each component as its own process.
package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// Broker is franz-go's kfake, serving the Kafka protocol on 127.0.0.1 for
// local runs and tests. Production uses real Kafka or Redpanda.
type Broker struct {
	Cluster *kfake.Cluster
}

// StartBroker listens on 127.0.0.1:port (0 picks a free port). A non-empty
// dataDir keeps topics and offsets across restarts.
func StartBroker(port int, dataDir string) (*Broker, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		// Let a crashed member's partitions move quickly in local runs.
		kfake.GroupMinSessionTimeout(time.Second),
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded broker on 127.0.0.1:%d: %w", port, err)
	}
	return &Broker{Cluster: c}, nil
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.Cluster.ListenAddrs()[0] }

// Close stops the broker (persisting its state when it has a data dir).
func (b *Broker) Close() { b.Cluster.Close() }

// EnsureTopics creates the pipeline's topics on the given brokers.
func EnsureTopics(ctx context.Context, brokers []string, names topics.Names, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kafka.Ensure(ctx, kadm.NewClient(cl), names, kafka.Layout{Partitions: partitions, ReplicationFactor: -1})
	return err
}
