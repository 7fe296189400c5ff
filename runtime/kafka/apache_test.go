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

// TestTransactionsV1OnApacheKafka (docs/adr/0043-transactions-v1.md): a
// transactional producer made by NewTx keeps its epoch from one committed
// transaction to the next, which only the first transaction protocol does;
// a client without TransactionsV1 on the same broker bumps it on every
// commit (the second protocol, which the broker offers), so the test is
// about the cap, not the broker. It asks again 1 ms after the coordinator
// refused a transaction begun while the previous one was completing.
func TestTransactionsV1OnApacheKafka(t *testing.T) {
	brokers := apacheKafka(t)
	topic := testkit.Namespace(t) + "tx"
	conn := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	adm, err := kgo.NewClient(conn...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx := testCtx(t, time.Minute)
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	epochs := func(commit func() error, producerID func() (int64, int16, error)) []int16 {
		var out []int16
		for range 3 {
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			_, epoch, err := producerID()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, epoch)
		}
		return out
	}
	tx, err := NewTx(ctx, conn, topic+"-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if got, _ := tx.cl.OptValue(kgo.ConcurrentTransactionsBackoff).(time.Duration); got != concurrentTxnBackoff {
		t.Errorf("NewTx's producer waits %v after CONCURRENT_TRANSACTIONS; want %v", got, concurrentTxnBackoff)
	}
	v1 := epochs(func() error { return tx.Commit(ctx, &kgo.Record{Topic: topic, Value: []byte("v1")}) },
		func() (int64, int16, error) { return tx.cl.ProducerID(ctx) })

	v2, err := kgo.NewClient(append(conn, kgo.TransactionalID(topic+"-v2"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	bumped := epochs(func() error {
		if err := v2.BeginTransaction(); err != nil {
			return err
		}
		if err := v2.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v2")}).FirstErr(); err != nil {
			return err
		}
		return v2.EndTransaction(ctx, kgo.TryCommit)
	}, func() (int64, int16, error) { return v2.ProducerID(ctx) })

	if v1[0] != v1[2] {
		t.Errorf("NewTx's producer epochs after three commits: %v; want one epoch throughout (transactions v1)", v1)
	}
	if bumped[0] == bumped[2] {
		t.Errorf("an uncapped client's epochs after three commits: %v; the broker does not speak transactions v2, so this test proves nothing", bumped)
	}
	t.Logf("epochs after each commit: NewTx %v, uncapped %v", v1, bumped)
}
