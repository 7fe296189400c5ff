package dispatcher

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

func TestLoadConfig(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
		err   string // substring of the error, "" for none
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c Config) {
				if got := strings.Join(c.Kafka.Brokers, ","); got != kafka.DefaultBrokers {
					t.Errorf("brokers %q", got)
				}
				if c.Kafka.Names.Events() != "webhooks.events" || c.Group != topics.GroupDispatcher ||
					c.MaxEventBytes != topics.DefaultMaxEventBytes ||
					c.TransactionTimeout != 10*time.Second || c.Kafka.StartupTimeout != 30*time.Second ||
					c.ShutdownTimeout != 10*time.Second {
					t.Errorf("defaults %+v", c)
				}
				if !strings.HasPrefix(c.TransactionalID, "webhooks-dispatcher-"+host+"-") {
					t.Errorf("transactional id %q", c.TransactionalID)
				}
				other, err := LoadConfig(func(k string) string { return map[string]string{config.EnvDev: "1"}[k] })
				if err != nil || other.TransactionalID == c.TransactionalID {
					t.Errorf("two processes got the same transactional id %q (%v)", c.TransactionalID, err)
				}
			},
		},
		{
			name: "set",
			env: map[string]string{
				kafka.EnvBrokers: "k1:9092, k2:9092", kafka.EnvPrefix: "t.", EnvTxnID: "dispatcher-0",
				EnvMaxEventBytes: "1000",
			},
			check: func(t *testing.T, c Config) {
				if strings.Join(c.Kafka.Brokers, ",") != "k1:9092,k2:9092" || c.Kafka.Names.Events() != "t.events" ||
					c.TransactionalID != "dispatcher-0" || c.MaxEventBytes != 1000 {
					t.Errorf("config %+v", c)
				}
			},
		},
		{name: "max bytes not a number", env: map[string]string{EnvMaxEventBytes: "256k"}, err: EnvMaxEventBytes},
		{name: "max bytes zero", env: map[string]string{EnvMaxEventBytes: "0"}, err: EnvMaxEventBytes},
		{name: "max bytes negative", env: map[string]string{EnvMaxEventBytes: "-1"}, err: EnvMaxEventBytes},
		{name: "max bytes too large", env: map[string]string{EnvMaxEventBytes: fmt.Sprint(maxRecordData + 1)}, err: EnvMaxEventBytes + " must be at most"},
		{
			name: "max bytes the most a record carries", env: map[string]string{EnvMaxEventBytes: fmt.Sprint(maxRecordData)},
			check: func(t *testing.T, c Config) {
				if c.MaxEventBytes != maxRecordData {
					t.Errorf("MaxEventBytes = %d", c.MaxEventBytes)
				}
			},
		},
		{name: "dedup window below 1ms", env: map[string]string{EnvDedupWindow: "999us"}, err: EnvDedupWindow + " must be at least 1ms"},
		{name: "zero shutdown timeout", env: map[string]string{EnvShutdownTimeout: "0s"}, err: EnvShutdownTimeout + " must be positive"},
		{name: "unknown types policy", env: map[string]string{EnvUnknownEventTypes: "drop"}, err: EnvUnknownEventTypes + `: "drop" is not accept, warn or reject`},
		{name: "no brokers", env: map[string]string{kafka.EnvBrokers: " , "}, err: kafka.EnvBrokers},
		{name: "retry tiers", env: map[string]string{kafka.EnvRetryTiers: "5ms"}, err: kafka.EnvRetryTiers},
		{
			name: "secrets key",
			env:  map[string]string{config.EnvSecretsKey: testSecretsKey, config.EnvDev: ""},
			check: func(t *testing.T, c Config) {
				if c.Secrets == nil || c.Secrets.KeyID() != testKeys(t).KeyID() {
					t.Errorf("secrets %v", c.Secrets)
				}
			},
		},
		{
			name: "dev mode: no key, plaintext",
			check: func(t *testing.T, c Config) {
				if c.Secrets != nil {
					t.Errorf("secrets %v, want none", c.Secrets)
				}
			},
		},
		{name: "no secrets key outside dev mode", env: map[string]string{config.EnvDev: ""}, err: config.EnvSecretsKey + " is not set"},
		{name: "bad secrets key", env: map[string]string{config.EnvSecretsKey: "c2hvcnQ="}, err: config.EnvSecretsKey + ": key: decodes to 5 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Dev mode unless the case says otherwise.
			env := map[string]string{config.EnvDev: "1"}
			maps.Copy(env, tc.env)
			c, err := LoadConfig(func(k string) string { return env[k] })
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %s", err, tc.err)
			case tc.check != nil:
				tc.check(t, c)
			}
		})
	}
}
