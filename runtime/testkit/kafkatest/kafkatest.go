// Package kafkatest checks, in the components' tests, that their Kafka
// clients carry the TLS and SASL settings of the environment.
package kafkatest

import (
	"crypto/tls"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
)

// AuthEnv is an environment with TLS (system roots) and SCRAM-SHA-512 on,
// in dev mode so that no secrets key is needed.
func AuthEnv(k string) string {
	return map[string]string{config.EnvDev: "1", kafka.EnvKafkaTLS: "true",
		kafka.EnvKafkaSASLMechanism: kafka.SASLScramSHA512, kafka.EnvKafkaSASLUsername: "u",
		kafka.EnvKafkaSASLPassword: "p"}[k]
}

// CheckAuth fails t unless a client built from each of clients' options
// dials with TLS 1.2 or later and authenticates with SCRAM-SHA-512, as
// AuthEnv asks.
func CheckAuth(t *testing.T, clients map[string][]kgo.Opt) {
	t.Helper()
	for name, opts := range clients {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatalf("%s client: %v", name, err)
		}
		if c, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); c == nil || c.MinVersion != tls.VersionTLS12 {
			t.Errorf("%s client: DialTLSConfig %v, want TLS 1.2 or later", name, c)
		}
		if m, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism); len(m) != 1 || m[0].Name() != kafka.SASLScramSHA512 {
			t.Errorf("%s client: SASL %v, want %s", name, m, kafka.SASLScramSHA512)
		}
		cl.Close()
	}
}
