package recorder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/testkit/kafkatest"
)

// TestKafkaOptsCarryTLSAndSASL: the recorder's Kafka clients dial with the TLS
// and SASL settings of the environment (kafka.Config.ClientOpts).
func TestKafkaOptsCarryTLSAndSASL(t *testing.T) {
	cfg, err := LoadConfig(kafkatest.AuthEnv)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	r := &recorder{cfg: cfg, topic: cfg.Kafka.Names.Attempts(), log: zap.NewNop()}
	kafkatest.CheckAuth(t, map[string][]kgo.Opt{"main": r.opts()})
}

// TestFetchesWaitForABatch: the recorder's fetches wait for a megabyte or a
// quarter of the batch wait (at most half a second): records wait for their
// batch anyway, and small fetches cost the broker and the recorder more
// per record (the recorder's CPU a delivery in BenchmarkDeployed halved).
func TestFetchesWaitForABatch(t *testing.T) {
	for _, tc := range []struct {
		batchWait string
		want      time.Duration
	}{{"1s", 250 * time.Millisecond}, {"10m", 500 * time.Millisecond}, {"20ms", 10 * time.Millisecond}} {
		cfg, err := LoadConfig(func(k string) string {
			if k == "WEBHOOKS_RECORDER_BATCH_WAIT" {
				return tc.batchWait
			}
			return kafkatest.AuthEnv(k)
		})
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		r := &recorder{cfg: cfg, topic: cfg.Kafka.Names.Attempts(), log: zap.NewNop()}
		cl, err := kgo.NewClient(r.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		minBytes, maxWait := cl.OptValue(kgo.FetchMinBytes), cl.OptValue(kgo.FetchMaxWait)
		cl.Close()
		if minBytes != int32(fetchMinBytes) || maxWait != tc.want {
			t.Errorf("batch wait %s: fetches wait for %v bytes or %v, want %d or %v", tc.batchWait, minBytes, maxWait, fetchMinBytes, tc.want)
		}
	}
}
