package send

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// loopback lets the SSRF guard reach the test servers.
var loopback = HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ConnectTimeout: 5 * time.Second}

// customerKafka is a Kafka cluster of a customer's own: TLS with a private
// CA and SCRAM-SHA-512, one topic.
func customerKafka(t *testing.T, topic string) (*kfake.Cluster, testcert.Cert) {
	t.Helper()
	cert := testcert.New(t, "customer-kafka")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "hooks", "s3cret-pass"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}),
		kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, cert
}

func kafkaSub(t *testing.T, c *kfake.Cluster, cert testcert.Cert, topic, password string) topics.Subscription {
	t.Helper()
	sub := newSub(t, "sub_k", "")
	sub.Headers = map[string]string{"X-Tenant": "acme"}
	sub.Target(&topics.Destination{Type: topics.DestinationKafka, Brokers: c.ListenAddrs(), Topic: topic, TLS: true,
		CA: string(cert.CertPEM), SASL: topics.SASLSCRAMSHA512, Username: "hooks", Password: password}, "")
	if err := sub.Validate(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestKafkaDestination: a delivery to a Kafka destination is produced to
// the customer's topic over TLS and SASL, keyed by the ordering key, with
// the body an endpoint gets and the Standard Webhooks headers, which
// verify as a receiver would verify them; a key's messages land on one
// partition in order.
func TestKafkaDestination(t *testing.T) {
	t.Parallel()
	c, cert := customerKafka(t, "webhooks")
	sub := kafkaSub(t, c, cert, "webhooks", "s3cret-pass")
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	ctx := testCtx(t, 30*time.Second)
	for i, id := range []string{"evt_1", "evt_2", "evt_3"} {
		d := newDelivery(sub.ID, id)
		d.Key = "customer-7"
		if i == 2 {
			d.Key = ""
		}
		resp, err := s.Send(ctx, &sub, &d, []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}})
		if res := classify.For(&sub, resp.Status, err); res.Action != classify.Success {
			t.Fatalf("send %s: %v (%v)", id, res, err)
		}
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("webhooks"),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool(cert), MinVersion: tls.VersionTLS12}),
		kgo.SASL(saslMechanism(sub.Destination)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	var recs []*kgo.Record
	for len(recs) < 3 {
		fs := reader.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading the customer's topic: %v", err)
		}
		recs = append(recs, fs.Records()...)
	}
	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		h := http.Header{}
		for _, kv := range r.Headers {
			h.Add(kv.Key, string(kv.Value))
		}
		verify(t, h, r.Value, sub.Secret)
		if h.Get("X-Tenant") != "acme" || h.Get("Traceparent") == "" || h.Get("Content-Type") != "application/json" {
			t.Errorf("record headers %v: want the subscription's, the trace's and the content type", h)
		}
		byID[h.Get("webhook-id")] = r
	}
	one, two, three := byID["evt_1"], byID["evt_2"], byID["evt_3"]
	if one == nil || two == nil || three == nil {
		t.Fatalf("records by webhook-id: %v", byID)
	}
	if string(one.Key) != "customer-7" || string(three.Key) != "evt_3" {
		t.Errorf("record keys %q, %q: want the ordering key, else the event id", one.Key, three.Key)
	}
	if one.Partition != two.Partition || one.Offset >= two.Offset {
		t.Errorf("a key's records at %d/%d and %d/%d: want one partition, in order", one.Partition, one.Offset, two.Partition, two.Offset)
	}
}

// TestKafkaDestinationRefusals: what retrying cannot change is dead at once
// (a topic that does not exist, a broker the SSRF guard refuses), and a
// broker that is down is retried. (A wrong password: TestKafkaRefusals;
// kfake drops the connection where Kafka answers SASL_AUTHENTICATION_FAILED.)
func TestKafkaDestinationRefusals(t *testing.T) {
	t.Parallel()
	c, cert := customerKafka(t, "webhooks")
	down := testkit.FreeAddr(t) // nothing listens there
	for _, tc := range []struct {
		name   string
		edit   func(*topics.Subscription)
		h      HTTP
		action classify.Action
		cat    string
	}{
		{"no such topic", func(s *topics.Subscription) { s.Destination.Topic = "missing" }, loopback, classify.Dead, topics.FailureRefused},
		{"guarded address", func(*topics.Subscription) {}, HTTP{ConnectTimeout: 5 * time.Second}, classify.Dead, topics.FailureBlockedAddr},
		{"broker down", func(s *topics.Subscription) { s.Destination.Brokers = []string{down} }, loopback, classify.Retry, topics.FailureConnection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sub := kafkaSub(t, c, cert, "webhooks", "s3cret-pass")
			tc.edit(&sub)
			sub.Target(sub.Destination, "")
			s := New(tc.h, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
			t.Cleanup(s.Close)
			d := newDelivery(sub.ID, "evt_r")
			resp, err := s.Send(testCtx(t, 30*time.Second), &sub, &d, nil)
			if res := classify.For(&sub, resp.Status, err); res.Action != tc.action || res.Category != tc.cat {
				t.Fatalf("got %v/%s (%v), want %v/%s", res.Action, res.Category, err, tc.action, tc.cat)
			}
		})
	}
}

func pool(c testcert.Cert) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(c.CertPEM)
	return p
}

// TestKafkaRefusals: the broker's answers that retrying cannot change are
// refusals, wrapped or not; the others are not.
func TestKafkaRefusals(t *testing.T) {
	for _, err := range []error{kerr.SaslAuthenticationFailed, kerr.TopicAuthorizationFailed,
		fmt.Errorf("ping: %w", kerr.UnknownTopicOrPartition), kerr.MessageTooLarge} {
		if !errors.Is(kafkaError(err), classify.ErrRefused) {
			t.Errorf("%v is not a refusal", err)
		}
	}
	for _, err := range []error{kerr.NotLeaderForPartition, kerr.RequestTimedOut, context.DeadlineExceeded, io.EOF} {
		if errors.Is(kafkaError(err), classify.ErrRefused) {
			t.Errorf("%v is a refusal", err)
		}
	}
}
