package kafka

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// env returns a getenv over a fixed map, so tests need no process globals.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadKafka(t *testing.T) {
	defaultTiers := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}
	for _, tc := range []struct {
		name        string
		env         map[string]string
		wantBrokers []string
		wantPrefix  string
		wantTiers   []time.Duration
		wantSession time.Duration // 0 means DefaultSessionTimeout
	}{
		{
			name:        "defaults",
			env:         nil,
			wantBrokers: []string{"127.0.0.1:9092"},
			wantPrefix:  "webhooks.",
			wantTiers:   defaultTiers,
		},
		{
			name: "overrides",
			env: map[string]string{
				EnvBrokers:                       "k1:9092, k2:9093 ,,k3:9094",
				EnvPrefix:                        "staging.",
				EnvRetryTiers:                    "1m,10s",
				"WEBHOOKS_KAFKA_SESSION_TIMEOUT": "10s",
			},
			wantBrokers: []string{"k1:9092", "k2:9093", "k3:9094"},
			wantPrefix:  "staging.",
			wantTiers:   []time.Duration{10 * time.Second, time.Minute},
			wantSession: 10 * time.Second,
		},
		{
			name:        "dash means no prefix",
			env:         map[string]string{EnvPrefix: "-"},
			wantBrokers: []string{"127.0.0.1:9092"},
			wantPrefix:  "",
			wantTiers:   defaultTiers,
		},
		{
			name:        "empty prefix means default",
			env:         map[string]string{EnvPrefix: ""},
			wantBrokers: []string{"127.0.0.1:9092"},
			wantPrefix:  "webhooks.",
			wantTiers:   defaultTiers,
		},
		{
			name:        "other env vars are ignored",
			env:         map[string]string{"KAFKA_BROKERS": "x:1", "TOPIC_PREFIX": "y."},
			wantBrokers: []string{"127.0.0.1:9092"},
			wantPrefix:  "webhooks.",
			wantTiers:   defaultTiers,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Load(env(tc.env))
			if err != nil {
				t.Fatalf("LoadKafka: %v", err)
			}
			if !slices.Equal(k.Brokers, tc.wantBrokers) {
				t.Errorf("Brokers = %q, want %q", k.Brokers, tc.wantBrokers)
			}
			if k.Names.Prefix != tc.wantPrefix {
				t.Errorf("Prefix = %q, want %q", k.Names.Prefix, tc.wantPrefix)
			}
			if !slices.Equal(k.Names.Tiers, tc.wantTiers) {
				t.Errorf("Tiers = %v, want %v", k.Names.Tiers, tc.wantTiers)
			}
			wantSession := tc.wantSession
			if wantSession == 0 {
				wantSession = 10 * time.Second
			}
			if k.SessionTimeout != wantSession {
				t.Errorf("SessionTimeout = %v, want %v", k.SessionTimeout, wantSession)
			}
			if want := tc.wantPrefix + "events"; k.Names.Events() != want {
				t.Errorf("Events() = %q, want %q", k.Names.Events(), want)
			}
		})
	}
}

func TestLoadKafkaErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr []string // substrings
	}{
		{"bad tiers", map[string]string{EnvRetryTiers: "5s,later"}, []string{EnvRetryTiers, "later"}},
		{"tier below 1s", map[string]string{EnvRetryTiers: "100ms"}, []string{EnvRetryTiers}},
		{"tiers only commas", map[string]string{EnvRetryTiers: ","}, []string{EnvRetryTiers}},
		{"brokers only commas", map[string]string{EnvBrokers: " , "}, []string{EnvBrokers}},
		{"session timeout not a duration", map[string]string{"WEBHOOKS_KAFKA_SESSION_TIMEOUT": "45"}, []string{"WEBHOOKS_KAFKA_SESSION_TIMEOUT", `"45"`}},
		{"session timeout below 1s", map[string]string{"WEBHOOKS_KAFKA_SESSION_TIMEOUT": "500ms"}, []string{"WEBHOOKS_KAFKA_SESSION_TIMEOUT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Load(env(tc.env))
			if err == nil {
				t.Fatalf("LoadKafka = %+v, want an error", k)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}
