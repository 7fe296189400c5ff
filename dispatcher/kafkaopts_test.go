package dispatcher

import (
	"strings"
	"testing"
	"time"

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
// it to the second transaction protocol, and asks again 1 ms after the
// coordinator refused a transaction begun while the previous one was
// completing.
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
	// A transaction begun right after a commit is refused until the
	// coordinator wrote the commit's markers (about 2 ms): asked again
	// after franz-go's 20 ms, every transaction at a steady rate waited
	// that long (ADR 0043, amended).
	if got, _ := cl.OptValue(kgo.ConcurrentTransactionsBackoff).(time.Duration); got != time.Millisecond {
		t.Errorf("the session waits %v after CONCURRENT_TRANSACTIONS; want 1ms", got)
	}
}

// TestFetchBatching: the events consumer fetches with the configured
// fetch.min.bytes and fetch.max.wait.ms (1 byte and 1s by default), and a
// wait below the 10ms franz-go accepts is refused at load, naming its
// variable.
func TestFetchBatching(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		minimum int32
		wait    time.Duration
	}{
		{map[string]string{}, 1, time.Second},
		{map[string]string{"WEBHOOKS_DISPATCHER_FETCH_MIN_BYTES": "65536", "WEBHOOKS_DISPATCHER_FETCH_MAX_WAIT": "10ms"}, 65536, 10 * time.Millisecond},
	} {
		tc.env[config.EnvDev] = "1"
		cfg, err := LoadConfig(func(k string) string { return tc.env[k] })
		if err != nil {
			t.Fatalf("LoadConfig(%v): %v", tc.env, err)
		}
		_, session := kafkaOpts(cfg, zap.NewNop())
		cl, err := kgo.NewClient(session...)
		if err != nil {
			t.Fatal(err)
		}
		minimum, wait := cl.OptValue(kgo.FetchMinBytes), cl.OptValue(kgo.FetchMaxWait)
		cl.Close()
		if minimum != tc.minimum || wait != tc.wait {
			t.Errorf("%v: the session fetches with min bytes %v, max wait %v; want %d, %v", tc.env, minimum, wait, tc.minimum, tc.wait)
		}
	}
	_, err := LoadConfig(func(k string) string {
		return map[string]string{config.EnvDev: "1", "WEBHOOKS_DISPATCHER_FETCH_MAX_WAIT": "5ms"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "WEBHOOKS_DISPATCHER_FETCH_MAX_WAIT") {
		t.Fatalf("a max wait of 5ms: %v, want an error naming the variable", err)
	}
}
