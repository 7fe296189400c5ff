package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

var demoTypes = []string{"order.created", "order.paid", "invoice.created", "customer.updated"}

// Producer publishes demo events at a steady rate.
type Producer struct {
	Published atomic.Int64
	Errors    atomic.Int64
}

// Run publishes ratePerSec events per second to topic until ctx is done,
// in batches every 100 ms. Events carry 50 ordering keys and a created_at
// that the receiver turns into publish-to-receipt latency.
func (p *Producer) Run(ctx context.Context, cl *kgo.Client, topic string, ratePerSec int) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	perTick := max(1, ratePerSec/10)
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range perTick {
			n++
			ev := topics.Event{
				ID:        fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), n),
				Type:      demoTypes[n%len(demoTypes)],
				Tenant:    "acme",
				Key:       fmt.Sprintf("order_%d", n%50),
				CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
				Data:      json.RawMessage(fmt.Sprintf(`{"n": %d, "amount_cents": %d}`, n, 100+n%900)),
			}
			b, _ := json.Marshal(ev)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(ev.Key), Value: b}, func(_ *kgo.Record, err error) {
				if err != nil {
					p.Errors.Add(1)
					return
				}
				p.Published.Add(1)
			})
		}
	}
}

// Outcomes counts attempt records by outcome, read from the attempts topic.
type Outcomes struct {
	Success, Retry, Dead, Other atomic.Int64
}

// Run consumes the attempts topic from its end until ctx is done.
func (o *Outcomes) Run(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachRecord(func(r *kgo.Record) {
			a, err := topics.DecodeAttempt(r.Value)
			if err != nil {
				return
			}
			switch a.Outcome {
			case topics.OutcomeSuccess:
				o.Success.Add(1)
			case topics.OutcomeRetry:
				o.Retry.Add(1)
			case topics.OutcomeDead:
				o.Dead.Add(1)
			default:
				o.Other.Add(1)
			}
		})
	}
}
