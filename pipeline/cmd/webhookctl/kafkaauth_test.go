package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
	"github.com/twmb/franz-go/pkg/kfake"
)

// selfSigned makes a certificate for 127.0.0.1 that is its own CA, and
// returns it as PEM (certificate, key) and as a tls.Certificate.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, cert
}

// TestKafkaMutualTLSAndSCRAM runs webhookctl, including the subscription
// table's client and dlq redrive's transactional producer, against a
// broker that requires a client certificate and SCRAM-SHA-512, configured
// only through the environment the chart renders.
func TestKafkaMutualTLSAndSCRAM(t *testing.T) {
	const password = "scram-Pa55"
	serverPEM, _, serverCert := selfSigned(t, "broker")
	clientPEM, clientKey, clientCert := selfSigned(t, "webhookctl")
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(clientCert.Leaf)
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser(topics.SASLScramSHA512, "hooks", password),
		kfake.TLS(&tls.Config{
			Certificates: []tls.Certificate{serverCert},
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
	for name, data := range map[string][]byte{topics.TLSCAFile: serverPEM, topics.TLSCertFile: clientPEM, topics.TLSKeyFile: clientKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, false) // its plaintext cluster goes unused
	h.brokers = strings.Join(c.ListenAddrs(), ",")
	h.env[topics.EnvBrokers] = h.brokers
	h.env[topics.EnvKafkaTLS] = "true"
	h.env[topics.EnvKafkaTLSDir] = dir
	h.env[topics.EnvKafkaSASLMechanism] = topics.SASLScramSHA512
	h.env[topics.EnvKafkaSASLUsername] = "hooks"
	h.env[topics.EnvKafkaSASLPassword] = password

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

	h.env[topics.EnvKafkaSASLPassword] = "wrong-" + password
	line := h.fails(1, "subscriptions", "list")
	if !strings.Contains(line, "cannot reach Kafka") || strings.Contains(line, password) {
		t.Errorf("wrong password: %q, want a failure to reach Kafka that does not show the password", line)
	}
	h.env[topics.EnvKafkaSASLPassword] = password
	h.env[topics.EnvKafkaSASLMechanism] = "OAUTHBEARER"
	if line := h.fails(1, "subscriptions", "list"); !strings.Contains(line, topics.EnvKafkaSASLMechanism) {
		t.Errorf("unknown mechanism: %q does not name %s", line, topics.EnvKafkaSASLMechanism)
	}
}
