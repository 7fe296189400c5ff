package dispatcher

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/testkit/kafkatest"
)

// TestKafkaOptsCarryTLSAndSASL: the dispatcher's Kafka clients dial with the TLS
// and SASL settings of the environment (kafka.Config.ClientOpts).
func TestKafkaOptsCarryTLSAndSASL(t *testing.T) {
	cfg, err := LoadConfig(kafkatest.AuthEnv)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	base, session := kafkaOpts(cfg, zap.NewNop())
	kafkatest.CheckAuth(t, map[string][]kgo.Opt{"base": base, "session": session})
}
