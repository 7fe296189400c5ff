package queuetest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// kafkaPartitions is how many partitions a customer's topic has.
const kafkaPartitions = 3

// CustomerKafka is a topic of the test's own on a customer's Kafka
// cluster, a broker apart from the pipeline's: the Apache Kafka at
// WEBHOOKS_TEST_KAFKA_BROKERS when it is set (the topic deleted when the
// test ends), else a kfake cluster of the test's own on a 127.0.0.1 port.
func CustomerKafka(tb testing.TB) (brokers []string, topic string) {
	tb.Helper()
	topic = uniqueName("test-")
	if b := os.Getenv(testkit.EnvTestKafkaBrokers); b != "" {
		brokers = strings.Split(b, ",")
		createTopic(tb, brokers, topic)
		return brokers, topic
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, topic))
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs(), topic
}

// createTopic creates topic on the cluster at brokers, deleted when the
// test ends.
func createTopic(tb testing.TB, brokers []string, topic string) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		tb.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, kafkaPartitions, 1, nil, topic); err != nil {
		cl.Close()
		tb.Fatalf("create topic %s: %v", topic, err)
	}
	tb.Cleanup(func() {
		// Best effort: the broker may be gone.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
		cl.Close()
	})
}

// KafkaProducer is a bare franz-go producer of the cluster at brokers
// that acknowledges as a Sender's does (every in-sync replica, no
// linger), closed when the test ends.
func KafkaProducer(tb testing.TB, brokers []string) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// PublishKafka produces n records (msg(i), i from 0: its key, body and
// headers) to topic through cl, with up to inflight unacknowledged. It
// returns the first error, after which it produces no more.
func PublishKafka(ctx context.Context, cl *kgo.Client, topic string, n, inflight int, msg func(int) Msg) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, max(inflight, 1))
	var wg sync.WaitGroup
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Add(1)
		cl.Produce(ctx, kafkaRecord(topic, msg(i)), func(_ *kgo.Record, err error) {
			if err != nil {
				cancel(err)
			}
			<-slots
			wg.Done()
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// kafkaRecord is m as a record of topic.
func kafkaRecord(topic string, m Msg) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(m.Key), Value: m.Body}
	if len(m.Header) > 0 {
		r.Headers = make([]kgo.RecordHeader, len(m.Header))
		for i, h := range m.Header {
			r.Headers[i] = kgo.RecordHeader{Key: h.Name, Value: []byte(h.Value)}
		}
	}
	return r
}
