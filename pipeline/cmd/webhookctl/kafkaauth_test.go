package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	kafkaconfig "github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// TestKafkaMutualTLSAndSCRAM runs webhookctl, including the subscription
// table's client and dlq redrive's transactional producer, against a
// broker that requires a client certificate and SCRAM-SHA-512, configured
// only through the environment the chart renders.
func TestKafkaMutualTLSAndSCRAM(t *testing.T) {
	const password = "scram-Pa55"
	server, client := testcert.New(t, "broker"), testcert.New(t, "webhookctl")
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(client.X509)
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser(kafkaconfig.SASLScramSHA512, "hooks", password),
		kfake.TLS(&tls.Config{
			Certificates: []tls.Certificate{server.TLS},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCAs,
			MinVersion:   tls.VersionTLS12,
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	for name, data := range map[string][]byte{kafkaconfig.TLSCAFile: server.CertPEM, kafkaconfig.TLSCertFile: client.CertPEM, kafkaconfig.TLSKeyFile: client.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, false) // its plaintext cluster goes unused
	h.brokers = strings.Join(c.ListenAddrs(), ",")
	h.env[kafkaconfig.EnvBrokers] = h.brokers
	h.env[kafkaconfig.EnvKafkaTLS] = "true"
	h.env[kafkaconfig.EnvKafkaTLSDir] = dir
	h.env[kafkaconfig.EnvKafkaSASLMechanism] = kafkaconfig.SASLScramSHA512
	h.env[kafkaconfig.EnvKafkaSASLUsername] = "hooks"
	h.env[kafkaconfig.EnvKafkaSASLPassword] = password

	h.ok("topics", "ensure", "--partitions", "2")
	var sub topics.Subscription
	h.json(&sub, "subscriptions", "create", "--url", "https://a.example/", "--events", "a")
	if out := h.ok("subscriptions", "get", sub.ID); !strings.Contains(out, sub.ID) {
		t.Errorf("subscriptions get %s:\n%s", sub.ID, out)
	}
	var sum redriveSummary
	h.json(&sum, "dlq", "redrive") // starts the transactional producer
	if sum.Redriven != 0 {
		t.Errorf("redrive of an empty dlq: %+v", sum)
	}

	h.env[kafkaconfig.EnvKafkaSASLPassword] = "wrong-" + password
	line := h.fails(1, "subscriptions", "list")
	if !strings.Contains(line, "cannot reach Kafka") || strings.Contains(line, password) {
		t.Errorf("wrong password: %q, want a failure to reach Kafka that does not show the password", line)
	}
	h.env[kafkaconfig.EnvKafkaSASLPassword] = password
	h.env[kafkaconfig.EnvKafkaSASLMechanism] = "OAUTHBEARER"
	if line := h.fails(1, "subscriptions", "list"); !strings.Contains(line, kafkaconfig.EnvKafkaSASLMechanism) {
		t.Errorf("unknown mechanism: %q does not name %s", line, kafkaconfig.EnvKafkaSASLMechanism)
	}
}
