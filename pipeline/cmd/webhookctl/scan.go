package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
)

// window is what to read of topic (kafka.ReadWindow), a missing topic
// answered with a hint.
func (k *kafka) window(ctx context.Context, topic string, since, until time.Time) (kafkaconfig.Window, error) {
	w, err := kafkaconfig.ReadWindow(ctx, k.adm, topic, since, until)
	return w, topicErr(topic, err)
}

// scan reads w (kafka.Scan), a missing topic answered with a hint.
func (k *kafka) scan(ctx context.Context, w kafkaconfig.Window, fn func(*kgo.Record) error) error {
	return topicErr(w.Topic, kafkaconfig.Scan(ctx, k.opts, w, fn))
}
