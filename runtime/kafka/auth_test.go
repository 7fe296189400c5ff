package kafka

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
)

// testPassword is the SASL password of these tests: no error may hold it.
const testPassword = "s3cret-Pa55word"

// tlsDir writes files (name to content) into a new temporary directory.
func tlsDir(tb testing.TB, files map[string][]byte) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// clientOf builds (without connecting) a client from k.ClientOpts, to read
// back the options it got.
func clientOf(t *testing.T, k Config) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(k.ClientOpts()...)
	if err != nil {
		t.Fatalf("kgo.NewClient(ClientOpts()): %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestLoadKafkaTLSAndSASL(t *testing.T) {
	ca := testcert.New(t, "test-ca")
	client := testcert.New(t, "test-client")
	caOnly := tlsDir(t, map[string][]byte{TLSCAFile: ca.CertPEM})
	mutual := tlsDir(t, map[string][]byte{TLSCAFile: ca.CertPEM, TLSCertFile: client.CertPEM, TLSKeyFile: client.KeyPEM})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.X509)

	for _, tc := range []struct {
		name       string
		env        map[string]string
		wantTLS    bool
		wantRoots  *x509.CertPool // nil: the system roots
		wantCert   bool           // a client certificate
		wantSASL   string         // mechanism name, "" for none
		wantOptLen int
	}{
		{name: "nothing set: plaintext, no SASL", env: nil, wantOptLen: 1},
		{name: "TLS false", env: map[string]string{EnvKafkaTLS: "false"}, wantOptLen: 1},
		{name: "TLS with the system roots", env: map[string]string{EnvKafkaTLS: "true"}, wantTLS: true, wantOptLen: 2},
		{name: "TLS as 1", env: map[string]string{EnvKafkaTLS: "1"}, wantTLS: true, wantOptLen: 2},
		{
			name:    "TLS with a CA",
			env:     map[string]string{EnvKafkaTLS: "true", EnvKafkaTLSDir: caOnly},
			wantTLS: true, wantRoots: caPool, wantOptLen: 2,
		},
		{
			name:    "mutual TLS",
			env:     map[string]string{EnvKafkaTLS: "true", EnvKafkaTLSDir: mutual},
			wantTLS: true, wantRoots: caPool, wantCert: true, wantOptLen: 2,
		},
		{
			name: "SASL PLAIN without TLS",
			env: map[string]string{EnvKafkaSASLMechanism: "PLAIN", EnvKafkaSASLUsername: "u",
				EnvKafkaSASLPassword: testPassword},
			wantSASL: "PLAIN", wantOptLen: 2,
		},
		{
			name: "SASL SCRAM-SHA-256, mechanism in lower case",
			env: map[string]string{EnvKafkaSASLMechanism: "scram-sha-256", EnvKafkaSASLUsername: "u",
				EnvKafkaSASLPassword: testPassword},
			wantSASL: "SCRAM-SHA-256", wantOptLen: 2,
		},
		{
			name: "SASL SCRAM-SHA-512 over mutual TLS",
			env: map[string]string{EnvKafkaTLS: "true", EnvKafkaTLSDir: mutual,
				EnvKafkaSASLMechanism: "SCRAM-SHA-512", EnvKafkaSASLUsername: "u", EnvKafkaSASLPassword: testPassword},
			wantTLS: true, wantRoots: caPool, wantCert: true, wantSASL: "SCRAM-SHA-512", wantOptLen: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{EnvBrokers: "k1:9092,k2:9093"}
			for k, v := range tc.env {
				m[k] = v
			}
			k, err := Load(env(m))
			if err != nil {
				t.Fatalf("LoadKafka: %v", err)
			}
			if got := len(k.ClientOpts()); got != tc.wantOptLen {
				t.Errorf("len(ClientOpts()) = %d, want %d", got, tc.wantOptLen)
			}
			cl := clientOf(t, k)
			if got, _ := cl.OptValue(kgo.SeedBrokers).([]string); !slices.Equal(got, []string{"k1:9092", "k2:9093"}) {
				t.Errorf("SeedBrokers = %q, want k1:9092,k2:9093", got)
			}
			got, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
			if (got != nil) != tc.wantTLS || (k.TLS != nil) != tc.wantTLS {
				t.Fatalf("DialTLSConfig = %v, Config.TLS = %v, want TLS %v", got, k.TLS, tc.wantTLS)
			}
			if tc.wantTLS {
				if got.MinVersion != tls.VersionTLS12 {
					t.Errorf("MinVersion = %#x, want TLS 1.2 (%#x)", got.MinVersion, tls.VersionTLS12)
				}
				if tc.wantRoots == nil && got.RootCAs != nil {
					t.Errorf("RootCAs set, want the system roots (nil)")
				}
				if tc.wantRoots != nil && (got.RootCAs == nil || !got.RootCAs.Equal(tc.wantRoots)) {
					t.Errorf("RootCAs is not the pool of ca.crt")
				}
				if n := len(got.Certificates); n != map[bool]int{false: 0, true: 1}[tc.wantCert] {
					t.Errorf("%d client certificates, want client certificate %v", n, tc.wantCert)
				}
				if tc.wantCert && !got.Certificates[0].Leaf.Equal(client.X509) {
					t.Errorf("client certificate is not tls.crt")
				}
			}
			mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
			var names []string
			for _, m := range mechs {
				names = append(names, m.Name())
			}
			if want := []string{tc.wantSASL}; tc.wantSASL == "" && len(names) != 0 || tc.wantSASL != "" && !slices.Equal(names, want) {
				t.Errorf("SASL mechanisms = %q, want %q", names, tc.wantSASL)
			}
			if (k.SASL != nil) != (tc.wantSASL != "") {
				t.Errorf("Config.SASL = %v, want SASL %q", k.SASL, tc.wantSASL)
			}
		})
	}
}

func TestLoadKafkaTLSAndSASLErrors(t *testing.T) {
	ca := testcert.New(t, "test-ca")
	client := testcert.New(t, "test-client")
	other := testcert.New(t, "other")
	noCA := tlsDir(t, map[string][]byte{TLSCertFile: client.CertPEM, TLSKeyFile: client.KeyPEM})
	notPEM := tlsDir(t, map[string][]byte{TLSCAFile: []byte("not a certificate\n")})
	certOnly := tlsDir(t, map[string][]byte{TLSCAFile: ca.CertPEM, TLSCertFile: client.CertPEM})
	keyOnly := tlsDir(t, map[string][]byte{TLSCAFile: ca.CertPEM, TLSKeyFile: client.KeyPEM})
	mismatched := tlsDir(t, map[string][]byte{TLSCAFile: ca.CertPEM, TLSCertFile: client.CertPEM, TLSKeyFile: other.KeyPEM})
	missing := filepath.Join(t.TempDir(), "absent")

	tlsOn := func(dir string) map[string]string {
		return map[string]string{EnvKafkaTLS: "true", EnvKafkaTLSDir: dir}
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr []string // substrings
	}{
		{"TLS not a boolean", map[string]string{EnvKafkaTLS: "yes please"}, []string{EnvKafkaTLS, `"yes please"`}},
		{"TLS dir without TLS", map[string]string{EnvKafkaTLSDir: noCA}, []string{EnvKafkaTLSDir, EnvKafkaTLS + " is not true"}},
		{"TLS dir with TLS false", map[string]string{EnvKafkaTLS: "false", EnvKafkaTLSDir: noCA}, []string{EnvKafkaTLSDir}},
		{"TLS dir missing ca.crt", tlsOn(noCA), []string{EnvKafkaTLSDir, "no ca.crt in " + noCA}},
		{"TLS dir does not exist", tlsOn(missing), []string{EnvKafkaTLSDir, "no ca.crt in " + missing}},
		{"ca.crt not PEM", tlsOn(notPEM), []string{EnvKafkaTLSDir, "ca.crt holds no PEM certificate"}},
		{"tls.crt without tls.key", tlsOn(certOnly), []string{EnvKafkaTLSDir, "tls.crt has no tls.key"}},
		{"tls.key without tls.crt", tlsOn(keyOnly), []string{EnvKafkaTLSDir, "tls.key has no tls.crt"}},
		{"tls.key does not match tls.crt", tlsOn(mismatched), []string{EnvKafkaTLSDir, "client certificate"}},
		{
			"unknown mechanism",
			map[string]string{EnvKafkaSASLMechanism: "GSSAPI", EnvKafkaSASLUsername: "u", EnvKafkaSASLPassword: testPassword},
			[]string{EnvKafkaSASLMechanism, `"GSSAPI"`, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		},
		{
			"mechanism without username",
			map[string]string{EnvKafkaSASLMechanism: "SCRAM-SHA-512", EnvKafkaSASLPassword: testPassword},
			[]string{EnvKafkaSASLUsername, "required"},
		},
		{
			"mechanism without password",
			map[string]string{EnvKafkaSASLMechanism: "PLAIN", EnvKafkaSASLUsername: "u"},
			[]string{EnvKafkaSASLPassword, "required"},
		},
		{
			"username without mechanism",
			map[string]string{EnvKafkaSASLUsername: "u"},
			[]string{EnvKafkaSASLMechanism, "required"},
		},
		{
			"password without mechanism",
			map[string]string{EnvKafkaSASLPassword: testPassword},
			[]string{EnvKafkaSASLMechanism, "required"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Load(env(tc.env))
			if err == nil {
				t.Fatalf("kafka.Load = %+v, want an error", k)
			}
			msg := err.Error()
			for _, s := range tc.wantErr {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not mention %q", msg, s)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			if strings.Contains(msg, testPassword) {
				t.Errorf("error %q holds the password", msg)
			}
		})
	}
}

// TestKafkaPrintsNoSecret: a Config printed by mistake shows neither the
// SASL password nor the client key.
func TestKafkaPrintsNoSecret(t *testing.T) {
	ca := testcert.New(t, "test-ca")
	dir := tlsDir(t, map[string][]byte{TLSCAFile: ca.CertPEM, TLSCertFile: ca.CertPEM, TLSKeyFile: ca.KeyPEM})
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		k, err := Load(env(map[string]string{EnvKafkaTLS: "true", EnvKafkaTLSDir: dir,
			EnvKafkaSASLMechanism: mech, EnvKafkaSASLUsername: "u", EnvKafkaSASLPassword: testPassword}))
		if err != nil {
			t.Fatalf("LoadKafka: %v", err)
		}
		key := ca.TLS.PrivateKey.(*ecdsa.PrivateKey)
		d, err := key.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"%v", "%+v", "%#v"} {
			s := fmt.Sprintf(verb, k)
			if strings.Contains(s, testPassword) {
				t.Errorf("%s of Config (%s) holds the password: %s", verb, mech, s)
			}
			if strings.Contains(s, new(big.Int).SetBytes(d).String()) {
				t.Errorf("%s of Config (%s) holds the private key", verb, mech)
			}
		}
	}
}

// TestKafkaOverTLSAndSCRAM connects to a broker that requires TLS and
// SCRAM-SHA-256 with only the settings kafka.Load reads, and checks that a
// wrong password is refused.
func TestKafkaOverTLSAndSCRAM(t *testing.T) {
	server := testcert.New(t, "kfake")
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser(SASLScramSHA256, "u", testPassword),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}, MinVersion: tls.VersionTLS12}),
		kfake.SeedTopics(1, "t"),
	)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	dir := tlsDir(t, map[string][]byte{TLSCAFile: server.CertPEM})
	settings := map[string]string{
		EnvBrokers:            strings.Join(c.ListenAddrs(), ","),
		EnvKafkaTLS:           "true",
		EnvKafkaTLSDir:        dir,
		EnvKafkaSASLMechanism: SASLScramSHA256,
		EnvKafkaSASLUsername:  "u",
		EnvKafkaSASLPassword:  testPassword,
	}
	connect := func(t *testing.T, override map[string]string, extra ...kgo.Opt) (*kgo.Client, error) {
		t.Helper()
		m := maps(settings, override)
		k, err := Load(env(m))
		if err != nil {
			t.Fatalf("LoadKafka: %v", err)
		}
		cl, err := kgo.NewClient(append(k.ClientOpts(), extra...)...)
		if err != nil {
			t.Fatalf("kgo.NewClient: %v", err)
		}
		t.Cleanup(cl.Close)
		return cl, cl.Ping(testCtx(t, 15*time.Second))
	}

	t.Run("right password", func(t *testing.T) {
		cl, err := connect(t, nil, kgo.ProducerLinger(0))
		if err != nil {
			t.Fatalf("Ping over TLS with SCRAM-SHA-256: %v", err)
		}
		ctx := testCtx(t, 15*time.Second)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce over TLS with SCRAM-SHA-256: %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		_, err := connect(t, map[string]string{EnvKafkaSASLPassword: "wrong-" + testPassword})
		if err == nil {
			t.Fatal("Ping with a wrong password succeeded")
		}
		// kfake drops the connection on a failed SCRAM exchange (EOF); a
		// real broker answers SASL_AUTHENTICATION_FAILED.
		t.Logf("Ping with a wrong password: %v", err)
	})
	t.Run("no SASL", func(t *testing.T) {
		_, err := connect(t, map[string]string{EnvKafkaSASLMechanism: "", EnvKafkaSASLUsername: "", EnvKafkaSASLPassword: ""})
		if err == nil {
			t.Fatal("Ping without SASL succeeded on a broker that requires it")
		}
	})
	t.Run("CA that did not sign the broker", func(t *testing.T) {
		wrongCA := testcert.New(t, "other-ca")
		_, err := connect(t, map[string]string{EnvKafkaTLSDir: tlsDir(t, map[string][]byte{TLSCAFile: wrongCA.CertPEM})})
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("Ping trusting another CA: %v, want an unknown authority error", err)
		}
	})
}

// maps returns base with override applied; an empty override value
// removes the key.
func maps(base, override map[string]string) map[string]string {
	out := make(map[string]string, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range override {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}
