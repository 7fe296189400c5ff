package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FirstWrites keeps a transactional producer clear of a race in franz-go
// (v1.22.3). The records of the first write to a topic the client had
// never produced to wait for the topic's metadata; the goroutine that loads
// it hands them to their partitions, where they can be sent, acknowledged
// and flushed, before it publishes the topic's partitions. EndTransaction
// forgets which partitions the transaction added by walking the published
// ones, so a commit in that window leaves the partition marked added: the
// next transaction writes to it without adding it, the broker answers
// INVALID_TXN_STATE (it was not in that transaction), and the producer
// fails for good.
//
// Note every record a transaction writes; Wait, once they are flushed and
// before the transaction ends, returns when the partitions of every topic
// written for the first time are published. It is not safe for concurrent
// use: a transaction is one goroutine's.
type FirstWrites struct {
	// published holds the topics whose partitions the producer has
	// published; fresh, the first record of each other topic written in
	// the transaction under way.
	published map[string]bool
	fresh     map[string]*kgo.Record
}

// NewFirstWrites returns a FirstWrites for one transactional client.
func NewFirstWrites() *FirstWrites {
	return &FirstWrites{published: map[string]bool{}, fresh: map[string]*kgo.Record{}}
}

// Note records that the transaction under way writes r.
func (f *FirstWrites) Note(r *kgo.Record) {
	if f.published[r.Topic] {
		return
	}
	if _, ok := f.fresh[r.Topic]; !ok {
		f.fresh[r.Topic] = r
	}
}

// firstWriteWait bounds Wait: a topic's partitions are published
// microseconds after its first records are handed over, unless the loading
// goroutine is descheduled. A record the producer refused before
// partitioning it (its topic never loaded) is waited for this long.
const firstWriteWait = 2 * time.Second

// Wait returns once cl's producer has published the partitions of every
// topic first written since the last Wait; call it after the records
// noted are flushed (their partitions are set then). It returns an error
// when ctx is done or firstWriteWait passes first.
func (f *FirstWrites) Wait(ctx context.Context, cl *kgo.Client) error {
	if len(f.fresh) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, firstWriteWait)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for topic, r := range f.fresh {
		delete(f.fresh, topic)
		// PartitionLeader reads the partitions the producer published,
		// which EndTransaction walks; the one written has a leader.
		for {
			if leader, _, _ := cl.PartitionLeader(topic, r.Partition); leader >= 0 {
				f.published[topic] = true
				break
			}
			select {
			case <-ctx.Done():
				clear(f.fresh)
				return fmt.Errorf("waiting for the producer to publish the partitions of %s: %w", topic, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}
