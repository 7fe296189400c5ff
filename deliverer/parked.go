package deliverer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parkedReader reads the parked topic at given offsets for releases of
// ordered keys, with Fetch requests to the partition's leader through a
// long-lived client that does not consume (its fetch connection has no
// long poll to wait behind): no client per release, no consumer state
// shared between the workers that release keys at once, and no record
// read that the release does not need beyond the batch that holds it.
type parkedReader struct {
	cl    *kgo.Client
	topic string

	mu      sync.Mutex
	id      [16]byte        // the topic's id, for Fetch v13 and later
	leaders map[int32]int32 // partition to leader broker; nil until looked up
}

func newParkedReader(cl *kgo.Client, topic string) *parkedReader {
	return &parkedReader{cl: cl, topic: topic}
}

// scanBytes bounds one Fetch of a scan; the batch holding the offset asked
// for always comes whole, whatever its size (and at alone asks for that).
const scanBytes = 1 << 20

// fetch returns the records of partition p at and after offset off that one
// Fetch of at most maxBytes brings, and the partition's high watermark.
func (r *parkedReader) fetch(ctx context.Context, p int32, off int64, maxBytes int32) ([]*kgo.Record, int64, error) {
	leader, id, err := r.leader(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1 // no fetch session
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = r.topic, id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, off, maxBytes
	fp.CurrentLeaderEpoch, fp.LogStartOffset = -1, -1
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	kresp, err := r.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		r.forget()
		return nil, 0, fmt.Errorf("fetching %s/%d at %d: %w", r.topic, p, off, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		r.forget()
		return nil, 0, fmt.Errorf("fetching %s/%d at %d: %w", r.topic, p, off, err)
	}
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			if rp.Partition != p {
				continue
			}
			got, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: off, Topic: r.topic, Partition: p, IsolationLevel: kgo.ReadUncommitted(),
			}, rp, kgo.DefaultDecompressor(), nil)
			if got.Err != nil {
				if errors.Is(got.Err, kerr.OffsetOutOfRange) {
					return nil, rp.HighWatermark, nil // nothing there (any more)
				}
				r.forget() // a leader moved, or the topic was recreated
				return nil, 0, fmt.Errorf("fetching %s/%d at %d: %w", r.topic, p, off, got.Err)
			}
			return got.Records, rp.HighWatermark, nil
		}
	}
	return nil, 0, fmt.Errorf("fetching %s/%d at %d: partition missing from the answer", r.topic, p, off)
}

// leader returns partition p's leader and the topic id, from metadata
// looked up once and again after an error.
func (r *parkedReader) leader(ctx context.Context, p int32) (int32, [16]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.leaders[p]; ok {
		return l, r.id, nil
	}
	md, err := kadm.NewClient(r.cl).Metadata(ctx, r.topic)
	if err != nil {
		return 0, r.id, fmt.Errorf("metadata of %s: %w", r.topic, err)
	}
	td, ok := md.Topics[r.topic]
	if !ok || td.Err != nil {
		return 0, r.id, fmt.Errorf("metadata of %s: %v", r.topic, td.Err)
	}
	r.id = td.ID
	r.leaders = map[int32]int32{}
	for _, pd := range td.Partitions {
		if pd.Err == nil && pd.Leader >= 0 {
			r.leaders[pd.Partition] = pd.Leader
		}
	}
	l, ok := r.leaders[p]
	if !ok {
		return 0, r.id, fmt.Errorf("metadata of %s: partition %d has no leader", r.topic, p)
	}
	return l, r.id, nil
}

func (r *parkedReader) forget() {
	r.mu.Lock()
	r.leaders = nil
	r.mu.Unlock()
}

// at returns the record at offset off of partition p; nil when none is
// there (deleted by retention).
func (r *parkedReader) at(ctx context.Context, p int32, off int64) (*kgo.Record, int, error) {
	recs, _, err := r.fetch(ctx, p, off, 1) // the batch holding off, alone
	if err != nil {
		return nil, 0, err
	}
	for _, rec := range recs {
		if rec.Offset == off {
			return rec, len(recs), nil
		}
	}
	return nil, len(recs), nil
}
