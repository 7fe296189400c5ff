package dispatcher

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/config"
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

// TestSessionSpeaksTransactionsV1 (docs/adr/0043-transactions-v1.md): the
// dispatcher's transactional session caps the requests that would switch
// it to the second transaction protocol.
func TestSessionSpeaksTransactionsV1(t *testing.T) {
	cfg, err := LoadConfig(func(k string) string { return map[string]string{config.EnvDev: "1"}[k] })
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	_, session := kafkaOpts(cfg, zap.NewNop())
	cl, err := kgo.NewClient(session...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
	for key, most := range map[kmsg.Key]int16{kmsg.Produce: 11, kmsg.EndTxn: 4, kmsg.TxnOffsetCommit: 4} {
		if got, ok := v.LookupMaxKeyVersion(key.Int16()); v == nil || !ok || got > most {
			t.Errorf("the session's %s requests go up to version %d; want at most %d", key.Name(), got, most)
		}
	}
}
