package deliverer

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(envOf(map[string]string{config.EnvDev: "1"}))
	if err != nil {
		t.Fatalf("LoadConfig with no environment but WEBHOOKS_DEV=1: %v", err)
	}
	if c.Secrets != nil {
		t.Fatalf("secrets %v in dev mode without a key", c.Secrets)
	}
	want := Config{
		Group: topics.GroupDeliverer, MaxInFlight: 1024, MaxBuffered: 8192, MaxPerSubscription: 64,
		CommitInterval: time.Second, ShutdownTimeout: 30 * time.Second, MaxResponseBytes: 64 << 10,
		HTTP: send.HTTP{ConnectTimeout: 10 * time.Second},
	}
	got := c
	got.Kafka = kafka.Config{}
	if !equalConfig(got, want) {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	if !slices.Equal(c.Kafka.Brokers, []string{kafka.DefaultBrokers}) || c.Kafka.Names.Prefix != topics.DefaultPrefix ||
		c.Kafka.SessionTimeout != kafka.DefaultSessionTimeout || len(c.Kafka.Names.Tiers) != 6 {
		t.Fatalf("Kafka defaults = %+v", c.Kafka)
	}
}

func equalConfig(a, b Config) bool {
	return a.Group == b.Group && a.MaxInFlight == b.MaxInFlight && a.MaxBuffered == b.MaxBuffered &&
		a.MaxPerSubscription == b.MaxPerSubscription && a.CommitInterval == b.CommitInterval &&
		a.ShutdownTimeout == b.ShutdownTimeout && a.MaxResponseBytes == b.MaxResponseBytes &&
		a.ConnectTimeout == b.ConnectTimeout && a.RequireHTTPS == b.RequireHTTPS &&
		slices.Equal(a.AllowCIDRs, b.AllowCIDRs)
}

func TestLoadConfigFromEnv(t *testing.T) {
	c, err := LoadConfig(envOf(map[string]string{
		"WEBHOOKS_KAFKA_BROKERS":                  "k1:9092, k2:9092",
		"WEBHOOKS_TOPIC_PREFIX":                   "x.",
		"WEBHOOKS_RETRY_TIERS":                    "1m,1s",
		"WEBHOOKS_KAFKA_SESSION_TIMEOUT":          "6s",
		"WEBHOOKS_DELIVERER_GROUP":                "g",
		"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT":        "3",
		"WEBHOOKS_DELIVERER_MAX_BUFFERED":         "3",
		"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION": "2",
		"WEBHOOKS_DELIVERER_COMMIT_INTERVAL":      "50ms",
		"WEBHOOKS_SHUTDOWN_TIMEOUT":               "5s",
		"WEBHOOKS_CONNECT_TIMEOUT":                "1s",
		"WEBHOOKS_ALLOW_CIDRS":                    "127.0.0.0/8, ::1",
		"WEBHOOKS_REQUIRE_HTTPS":                  "true",
		"WEBHOOKS_SECRETS_KEY":                    testSecretsKey,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Secrets == nil || c.Secrets.KeyID() != testKeys(t).KeyID() {
		t.Fatalf("secrets %v, want the key of WEBHOOKS_SECRETS_KEY", c.Secrets)
	}
	want := Config{
		Group: "g", MaxInFlight: 3, MaxBuffered: 3, MaxPerSubscription: 2, CommitInterval: 50 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, MaxResponseBytes: 64 << 10,
		HTTP: send.HTTP{ConnectTimeout: time.Second, RequireHTTPS: true,
			AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}},
	}
	if !equalConfig(c, want) {
		t.Fatalf("config = %+v, want %+v", c, want)
	}
	if !slices.Equal(c.Kafka.Brokers, []string{"k1:9092", "k2:9092"}) || c.Kafka.Names.Deliveries() != "x.deliveries" ||
		c.Kafka.SessionTimeout != 6*time.Second || !slices.Equal(c.Kafka.Names.Tiers, []time.Duration{time.Second, time.Minute}) {
		t.Fatalf("Kafka = %+v", c.Kafka)
	}
}

// TestLoadConfigErrors: every bad value is refused with an error that names
// its variable, so an operator knows what to fix.
func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"WEBHOOKS_KAFKA_BROKERS", " , "},
		{"WEBHOOKS_RETRY_TIERS", "5x"},
		{"WEBHOOKS_RETRY_TIERS", "100ms"},
		{"WEBHOOKS_KAFKA_SESSION_TIMEOUT", "soon"},
		{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT", "many"},
		{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT", "0"},
		{"WEBHOOKS_DELIVERER_MAX_BUFFERED", "1.5"},
		{"WEBHOOKS_DELIVERER_MAX_BUFFERED", "10"}, // below the default MaxInFlight of 1024
		{"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION", "x"},
		{"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION", "-1"},
		{"WEBHOOKS_DELIVERER_COMMIT_INTERVAL", "1 second"},
		{"WEBHOOKS_DELIVERER_COMMIT_INTERVAL", "0s"},
		{"WEBHOOKS_SHUTDOWN_TIMEOUT", "x"},
		{"WEBHOOKS_SHUTDOWN_TIMEOUT", "-1s"},
		{"WEBHOOKS_CONNECT_TIMEOUT", "10"},
		{"WEBHOOKS_CONNECT_TIMEOUT", "0s"},
		{"WEBHOOKS_ALLOW_CIDRS", "10.0.0.0/33"},
		{"WEBHOOKS_ALLOW_CIDRS", "localhost"},
		{"WEBHOOKS_REQUIRE_HTTPS", "maybe"},
		{"WEBHOOKS_SECRETS_KEY", "c2hvcnQ="},
		{"WEBHOOKS_SECRETS_KEY", "id with spaces:" + testSecretsKey},
		{"WEBHOOKS_DEV", "maybe"},
		{"WEBHOOKS_DEV", "0"}, // and no WEBHOOKS_SECRETS_KEY
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			env := map[string]string{config.EnvDev: "1"}
			env[tc.key] = tc.value
			_, err := LoadConfig(envOf(env))
			if err == nil {
				t.Fatalf("LoadConfig accepted %s=%q", tc.key, tc.value)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("error %q does not name %s", err, tc.key)
			}
		})
	}
}

// TestLoadConfigNamesEveryVariable: a configuration wrong in every
// variable is refused with one error naming each, those the validate tags
// check and the egress proxy that code checks alike.
func TestLoadConfigNamesEveryVariable(t *testing.T) {
	testkit.RefusesEach(t, LoadConfig, map[string]string{
		"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT": "-1", "WEBHOOKS_DELIVERER_MAX_BUFFERED": "-2",
		"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION": "-1", "WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION": "-2",
		"WEBHOOKS_RETRY_FLOOR": "-1s", "WEBHOOKS_DELIVERER_COMMIT_INTERVAL": "0s", "WEBHOOKS_SHUTDOWN_TIMEOUT": "-1s",
		"WEBHOOKS_CONNECT_TIMEOUT": "0s", "WEBHOOKS_RATE_LIMIT_MAX_WAIT": "-1s", "WEBHOOKS_AUTO_DISABLE_AFTER": "-1s",
		"WEBHOOKS_TENANT_RATE": "+Inf", "WEBHOOKS_BREAKER_THRESHOLD": "101", "WEBHOOKS_BREAKER_MIN_CALLS": "0",
		"WEBHOOKS_BREAKER_WINDOW": "11ms", "WEBHOOKS_BREAKER_SLEEP": "0s", "WEBHOOKS_BREAKER_PROBES": "0",
		"WEBHOOKS_EGRESS_PROXY": "ftp://proxy.example:21",
	})
}
