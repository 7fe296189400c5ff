package kafka

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// apacheKafka skips the test unless the tests run on Apache Kafka
// (testkit.ApacheKafka), whose broker settings these tests are about.
func apacheKafka(t *testing.T) []string {
	t.Helper()
	brokers, ok := testkit.ApacheKafka(t)
	if !ok {
		t.Skip("checks what Apache Kafka accepts: runs with WEBHOOKS_TEST_KAFKA=apache")
	}
	return brokers
}

// TestEnsureOnApacheKafka: Apache Kafka accepts the topics with our configs
// (compaction, retention), Ensure finds them on a second run and verifies
// the compacted ones, and a delivery record of the largest size the
// dispatcher writes fits the broker's default max.message.bytes.
func TestEnsureOnApacheKafka(t *testing.T) {
	brokers := apacheKafka(t)
	k, err := Load(func(name string) string {
		return map[string]string{EnvBrokers: strings.Join(brokers, ","), EnvPrefix: testkit.Namespace(t)}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(k.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t, time.Minute)
	res, err := Ensure(ctx, adm, k.Names, Layout{Partitions: 3, ReplicationFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != len(k.Names.All()) {
		t.Fatalf("created %v, want every topic", res.Created)
	}
	if res, err = Ensure(ctx, adm, k.Names, Layout{Partitions: 3, ReplicationFactor: -1}); err != nil || len(res.Existing) != len(k.Names.All()) {
		t.Fatalf("second Ensure = %+v, %v; want every topic existing", res, err)
	}
	for _, topic := range k.Names.All() {
		// A broker may answer UNKNOWN_TOPIC_OR_PARTITION for a topic
		// created a moment ago; describeTopic asks again.
		rc, err := describeTopic(ctx, adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, c := range rc.Configs {
			got[c.Key] = c.MaybeValue()
		}
		for key, want := range k.Names.TopicConfigs(topic) {
			if got[key] != *want {
				t.Errorf("%s: %s=%s, want %s", topic, key, got[key], *want)
			}
		}
	}
	// The largest data the dispatcher takes (512 KiB) base64-encoded in
	// a delivery, with room for the rest of the record.
	big := &kgo.Record{Topic: k.Names.Deliveries(), Value: []byte(strings.Repeat("x", 700<<10))}
	if err := cl.ProduceSync(ctx, big).FirstErr(); err != nil {
		t.Fatalf("a 700 KiB delivery record: %v", err)
	}
}

// TestAuthOnApacheKafka: the broker settings for TLS and SCRAM-SHA-512
// (WEBHOOKS_KAFKA_TLS, _TLS_DIR, _SASL_*) reach Apache Kafka's SASL_SSL
// listener; a wrong password is refused with the broker's error.
func TestAuthOnApacheKafka(t *testing.T) {
	brokers := apacheKafka(t)
	dir := os.Getenv(testkit.EnvTestKafkaDir)
	if dir == "" {
		t.Fatalf("%s is not set: the broker's services.sh directory holds its CA", testkit.EnvTestKafkaDir)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(tlsDir, TLSCAFile), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(brokers[0], ":")
	p, _ := strconv.Atoi(port)
	for password, ok := range map[string]bool{"hookpipe-secret": true, "wrong": false} {
		k, err := Load(func(name string) string {
			return map[string]string{EnvBrokers: host + ":" + strconv.Itoa(p+1), EnvKafkaTLS: "true", EnvKafkaTLSDir: tlsDir,
				EnvKafkaSASLMechanism: SASLScramSHA512, EnvKafkaSASLUsername: "hookpipe", EnvKafkaSASLPassword: password}[name]
		})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(k.ClientOpts(), kgo.RequestRetries(0))...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kadm.NewClient(cl).ListTopics(testCtx(t, 30*time.Second))
		cl.Close()
		switch {
		case ok && err != nil:
			t.Errorf("with the right password: %v", err)
		case !ok && !errors.Is(err, kerr.SaslAuthenticationFailed):
			t.Errorf("with a wrong password: %v, want %v", err, kerr.SaslAuthenticationFailed)
		}
	}
}
