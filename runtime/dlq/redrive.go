package dlq

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// Redriver sends dead letters back, each with a marker on the dlq
// pointing at it, in transactions: deliveries to the deliveries topic,
// events the catalog refused to the events topic.
type Redriver struct {
	tx     *kafka.Tx
	names  topics.Names
	reason string
}

// NewRedriver returns a redriver, its transactional producer ready; reason
// goes into every marker (who redrove).
//
// Its transactional id is fixed per dlq topic, and it is initialised
// before the dlq is read: that fences any other redrive still running (it
// can commit nothing more) and waits until what that one committed is
// readable, so two redrives, even concurrent ones (webhookctl's and the
// API's alike), never both redrive one dead letter. It also ends at once a
// transaction left open by a redrive that died, instead of holding back
// read-committed consumers of the deliveries and dlq topics for the
// transaction timeout.
func NewRedriver(ctx context.Context, conn []kgo.Opt, names topics.Names, reason string) (*Redriver, error) {
	tx, err := kafka.NewTx(ctx, conn, "webhookctl-redrive-"+names.DLQ(),
		kgo.RecordPartitioner(partitioner{events: names.Events(), manual: kgo.ManualPartitioner(), pipeline: topics.Partitioner()}))
	if err != nil {
		return nil, err
	}
	return &Redriver{tx: tx, names: names, reason: reason}, nil
}

// Close closes the producer.
func (r *Redriver) Close() { r.tx.Close() }

// Batch sends each dead letter back, a delivery to the deliveries topic as
// the first attempt of a new schedule, an event to the events topic
// (keyed as it was, so it is dispatched and judged again), and writes a
// marker pointing at it to the dlq,
// all in one transaction with extra (a caller's progress record): either
// every dead letter of the batch is redriven and marked, or none is. It
// marks the entries Redriven. An error wrapping kafka.ErrFenced means
// another redrive took over.
func (r *Redriver) Batch(ctx context.Context, batch []*Entry, extra ...*kgo.Record) error {
	now := time.Now().UTC()
	recs := make([]*kgo.Record, 0, 2*len(batch)+len(extra))
	for _, e := range batch {
		marker := topics.DeadLetter{
			Redriven: &topics.Source{Topic: r.names.DLQ(), Partition: e.Partition, Offset: e.Offset},
			Reason:   r.reason,
			DeadAt:   now,
		}
		if e.DeadLetter.Delivery == nil {
			var key []byte
			if e.Key != "" {
				key = []byte(e.Key)
			}
			// Back to the partition it was read from: where its key's
			// other events are, whatever partitioner its producer used.
			recs = append(recs,
				&kgo.Record{Topic: r.names.Events(), Partition: e.DeadLetter.Source.Partition, Key: key, Value: e.DeadLetter.RawEvent},
				&kgo.Record{Topic: r.names.DLQ(), Key: key, Value: marker.Encode()})
			continue
		}
		d := *e.DeadLetter.Delivery
		d.Attempt = 1
		d.FirstAttemptAt = time.Time{}
		d.NotBefore = time.Time{}
		key := []byte(e.Key)
		if len(key) == 0 {
			key = []byte(d.SubscriptionID + "/" + d.EventID)
		}
		recs = append(recs,
			&kgo.Record{Topic: r.names.Deliveries(), Key: key, Value: d.Encode()},
			&kgo.Record{Topic: r.names.DLQ(), Key: key, Value: marker.Encode()})
	}
	if err := r.tx.Commit(ctx, append(recs, extra...)...); err != nil {
		return err
	}
	for _, e := range batch {
		e.Redriven = true
	}
	return nil
}

// ToRedrive are the entries a redrive sends back: not redriven yet, and
// redrivable (topics.DeadLetter.Redrivable); and how many were skipped as
// already redriven and as not redrivable (undecodable events).
func ToRedrive(found []*Entry) (todo []*Entry, already, undecodable int) {
	for _, e := range found {
		switch {
		case e.Redriven:
			already++
		case !e.DeadLetter.Redrivable():
			undecodable++
		default:
			todo = append(todo, e)
		}
	}
	return todo, already, undecodable
}

// partitioner places redriven events on the partition they came from and
// everything else as the pipeline does.
type partitioner struct {
	events           string
	manual, pipeline kgo.Partitioner
}

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	if t == p.events {
		return p.manual.ForTopic(t)
	}
	return p.pipeline.ForTopic(t)
}
