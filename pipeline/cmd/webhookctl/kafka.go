package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// kafka is a connected client with the pipeline's topic names.
type kafka struct {
	cl   *kgo.Client
	adm  *kadm.Client
	opts []kgo.Opt
	// conn are the options that reach the brokers (seed brokers, TLS,
	// SASL: kafkaconfig.Config.ClientOpts), for clients not bound to ctx.
	conn  []kgo.Opt
	names topics.Names
	// keys seal and open subscription secrets (WEBHOOKS_SECRETS_KEY);
	// keysErr, when the environment has no usable key, fails the commands
	// that read or write subscriptions, and only those.
	keys    *topics.Keyring
	keysErr error
}

// clientOpts are the options of every client webhookctl makes: the
// brokers, TLS and SASL of the environment, franz-go logs nothing (its
// default), a produced record is sent at once, and when ctx is done every
// request in flight fails, even one still connecting, which bounds the
// command by ctx's deadline.
func clientOpts(ctx context.Context, cfg kafkaconfig.Config) []kgo.Opt {
	return append(cfg.ClientOpts(),
		kgo.ProducerLinger(0),
		kgo.WithContext(ctx),
	)
}

// connect loads the Kafka settings (--brokers overriding the environment)
// and checks that a broker answers before ctx is done, so that an
// unreachable cluster fails fast with a clear message instead of retrying
// until the command times out inside some other request.
func (c *cli) connect(ctx context.Context) (*kafka, error) {
	getenv := c.getenv
	if c.brokers != "" {
		getenv = func(k string) string {
			if k == kafkaconfig.EnvBrokers {
				return c.brokers
			}
			return c.getenv(k)
		}
	}
	cfg, err := kafkaconfig.Load(getenv)
	if err != nil {
		return nil, err
	}
	keys, keysErr := config.LoadKeyring(getenv)
	opts := clientOpts(ctx, cfg)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	// Long commands have no deadline: connecting still has one.
	pingCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := cl.Ping(pingCtx); err != nil {
		cl.Close()
		if pingCtx.Err() != nil {
			err = pingCtx.Err()
		}
		return nil, fmt.Errorf("cannot reach Kafka at %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	return &kafka{cl: cl, adm: kadm.NewClient(cl), opts: opts, conn: cfg.ClientOpts(), names: cfg.Names,
		keys: keys, keysErr: keysErr}, nil
}

func (k *kafka) close() { k.cl.Close() }

// produce writes one record and returns once the broker acknowledged it.
func (k *kafka) produce(ctx context.Context, r *kgo.Record) (*kgo.Record, error) {
	rec, err := k.cl.ProduceSync(ctx, r).First()
	if err != nil {
		return nil, topicErr(r.Topic, fmt.Errorf("produce to %s: %w", r.Topic, err))
	}
	return rec, nil
}

// subscriptions reads the subscriptions topic up to its current end and
// returns the table, no longer consuming.
func (k *kafka) subscriptions(ctx context.Context) (*table.Table, error) {
	if k.keysErr != nil {
		return nil, k.keysErr
	}
	topic := k.names.Subscriptions()
	t, err := table.NewTable(k.opts, topic, k.keys, zap.NewNop())
	if err != nil {
		return nil, err
	}
	return t, readToEnd(ctx, topic, t)
}

// subscription reads subscription id; an error when there is none.
func (k *kafka) subscription(ctx context.Context, id string) (*topics.Subscription, error) {
	return entry(ctx, k.subscriptions, "subscription", id)
}

// entry reads a table with read and returns its entry id; an error naming
// what when there is none.
func entry[V any, T interface{ Get(string) (V, bool) }](ctx context.Context, read func(context.Context) (T, error), what, id string) (V, error) {
	var none V
	t, err := read(ctx)
	if err != nil {
		return none, err
	}
	v, ok := t.Get(id)
	if !ok {
		return none, fmt.Errorf("%s %s not found", what, id)
	}
	return v, nil
}

// aTable is a table of runtime/table.
type aTable interface {
	Run(ctx context.Context)
	WaitCaughtUp(ctx context.Context) error
	Close()
}

// readToEnd reads t's topic up to its current end, then stops consuming.
func readToEnd(ctx context.Context, topic string, t aTable) error {
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run(runCtx)
	}()
	err := t.WaitCaughtUp(ctx)
	stop()
	<-done
	t.Close()
	if err != nil {
		return topicErr(topic, err)
	}
	return nil
}

// topicErr turns a missing topic into a hint.
func topicErr(topic string, err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("topic %s does not exist (run webhookctl topics ensure)", topic)
	}
	return err
}
