package recorder

import (
	"crypto/tls"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"go.uber.org/zap"
)

// TestKafkaOptsCarryTLSAndSASL: the recorder's Kafka clients dial with the TLS
// and SASL settings of the environment (topics.Kafka.ClientOpts).
func TestKafkaOptsCarryTLSAndSASL(t *testing.T) {
	env := map[string]string{topics.EnvDev: "1", topics.EnvKafkaTLS: "true",
		topics.EnvKafkaSASLMechanism: topics.SASLScramSHA512, topics.EnvKafkaSASLUsername: "u",
		topics.EnvKafkaSASLPassword: "p"}
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	log := zap.NewNop()
	r := &recorder{cfg: cfg, topic: cfg.Kafka.Names.Attempts(), log: log}
	for name, opts := range map[string][]kgo.Opt{
		"main": r.opts(),
	} {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatalf("%s client: %v", name, err)
		}
		if c, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); c == nil || c.MinVersion != tls.VersionTLS12 {
			t.Errorf("%s client: DialTLSConfig %v, want TLS 1.2 or later", name, c)
		}
		if m, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism); len(m) != 1 || m[0].Name() != topics.SASLScramSHA512 {
			t.Errorf("%s client: SASL %v, want %s", name, m, topics.SASLScramSHA512)
		}
		cl.Close()
	}
}
