package send

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// kafkaPublisher produces to topics on the customers' own Kafka clusters,
// one client per destination (see conns).
type kafkaPublisher struct {
	dial  dialFunc
	conns *conns[*kgo.Client]
}

func newKafkaPublisher(dial dialFunc) Publisher {
	return &kafkaPublisher{dial: dial, conns: newConns(func(cl *kgo.Client) { cl.Close() }, nil)}
}

// Publish produces m with m.Key as the record key, so that the cluster's
// partitioner keeps a key's messages on one partition in order, and waits
// for every in-sync replica to have it.
func (p *kafkaPublisher) Publish(ctx context.Context, d *topics.Destination, m *Message) error {
	cl, err := p.conns.get(d, func() (*kgo.Client, error) { return p.client(ctx, d) })
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: d.Topic, Key: []byte(m.Key), Value: m.Body, Headers: make([]kgo.RecordHeader, len(m.Header))}
	for i, f := range m.Header {
		r.Headers[i] = kgo.RecordHeader{Key: f.Name, Value: []byte(f.Value)}
	}
	return kafkaError(cl.ProduceSync(ctx, r).FirstErr())
}

func (p *kafkaPublisher) Close() { p.conns.close() }

// client is a producer for d: its brokers dialled through the SSRF guard
// (the brokers it learns from metadata too), TLS and SASL as d says.
func (p *kafkaPublisher) client(ctx context.Context, d *topics.Destination) (*kgo.Client, error) {
	dial := p.dial
	if d.TLS {
		dial = tlsDial(p.dial, d.CA)
	}
	if err := reach(ctx, dial, d.Brokers[0]); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.Brokers...),
		kgo.Dialer(dial),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		// A topic that does not exist fails the record after two metadata
		// answers saying so, rather than after the attempt's timeout.
		kgo.UnknownTopicRetries(2),
		kgo.RecordDeliveryTimeout(5 * time.Minute),
		kgo.ClientID("hookpipe"),
	}
	if m := saslMechanism(d); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", classify.ErrRefused, err)
	}
	// A client retries a refused login until the attempt's timeout: ask
	// once, so that wrong credentials are told as such.
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, kafkaError(err)
	}
	return cl, nil
}

// tlsDial wraps dial in TLS, verifying the server's name against the
// system's roots, or ca's certificates (PEM) when given.
func tlsDial(dial dialFunc, ca string) dialFunc {
	roots := caPool(ca)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

func saslMechanism(d *topics.Destination) sasl.Mechanism {
	switch d.SASL {
	case topics.SASLPlain:
		return plain.Auth{User: d.Username, Pass: d.Password}.AsMechanism()
	case topics.SASLSCRAMSHA256:
		return scram.Auth{User: d.Username, Pass: d.Password}.AsSha256Mechanism()
	case topics.SASLSCRAMSHA512:
		return scram.Auth{User: d.Username, Pass: d.Password}.AsSha512Mechanism()
	}
	return nil
}

// kafkaRefusals are the broker's answers retrying cannot change.
var kafkaRefusals = []error{
	kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidTopicException,
	kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.SaslAuthenticationFailed,
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.PolicyViolation,
}

// kafkaError marks a refusal as classify.ErrRefused.
func kafkaError(err error) error {
	for _, r := range kafkaRefusals {
		if errors.Is(err, r) {
			return fmt.Errorf("%w: %w", classify.ErrRefused, err)
		}
	}
	return err
}
