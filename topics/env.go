package topics

import (
	"fmt"
	"strings"
	"time"
)

// Environment variables shared by every binary (DESIGN.md section 3).
const (
	EnvBrokers    = "WEBHOOKS_KAFKA_BROKERS"
	EnvPrefix     = "WEBHOOKS_TOPIC_PREFIX"
	EnvRetryTiers = "WEBHOOKS_RETRY_TIERS"
	EnvHTTPAddr   = "WEBHOOKS_HTTP_ADDR"
	EnvLogLevel   = "WEBHOOKS_LOG_LEVEL"
	EnvAllowCIDRs = "WEBHOOKS_ALLOW_CIDRS"
	EnvRedisURL   = "WEBHOOKS_REDIS_URL"
	EnvSecretsKey = "WEBHOOKS_SECRETS_KEY"
	// EnvDev=1 lets a component run without WEBHOOKS_SECRETS_KEY, storing
	// subscription secrets in plaintext (development only; see LoadKeyring).
	EnvDev = "WEBHOOKS_DEV"
	// EnvSessionTimeout is the consumer group session timeout (default 45s).
	EnvSessionTimeout = "WEBHOOKS_KAFKA_SESSION_TIMEOUT"
)

// DefaultBrokers is used when WEBHOOKS_KAFKA_BROKERS is unset.
const DefaultBrokers = "127.0.0.1:9092"

// Kafka is the part of every binary's configuration that locates the
// pipeline's topics.
type Kafka struct {
	// Brokers: WEBHOOKS_KAFKA_BROKERS, comma-separated, default 127.0.0.1:9092.
	Brokers []string
	// Names: WEBHOOKS_TOPIC_PREFIX (default "webhooks.") and
	// WEBHOOKS_RETRY_TIERS (default "5s,5m,30m,2h,5h,10h").
	Names Names
	// SessionTimeout is the consumer group session timeout: how long a
	// crashed member keeps its partitions. WEBHOOKS_KAFKA_SESSION_TIMEOUT,
	// default 45s.
	SessionTimeout time.Duration
}

// DefaultSessionTimeout is the consumer group session timeout by default.
const DefaultSessionTimeout = 45 * time.Second

// LoadKafka reads the shared Kafka settings through getenv.
func LoadKafka(getenv func(string) string) (Kafka, error) {
	brokers := splitList(or(getenv(EnvBrokers), DefaultBrokers))
	if len(brokers) == 0 {
		return Kafka{}, fmt.Errorf("%s: no broker address", EnvBrokers)
	}
	prefix := DefaultPrefix
	if v, ok := lookup(getenv, EnvPrefix); ok {
		prefix = v
	}
	names, err := NewNames(prefix, or(getenv(EnvRetryTiers), DefaultRetryTiers))
	if err != nil {
		return Kafka{}, fmt.Errorf("%s: %w", EnvRetryTiers, err)
	}
	session := DefaultSessionTimeout
	if v := getenv(EnvSessionTimeout); v != "" {
		session, err = time.ParseDuration(v)
		if err != nil || session < time.Second {
			return Kafka{}, fmt.Errorf("WEBHOOKS_KAFKA_SESSION_TIMEOUT: %q is not a duration of at least 1s", v)
		}
	}
	return Kafka{Brokers: brokers, Names: names, SessionTimeout: session}, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// lookup treats a set-but-empty prefix as "no prefix" only when written as
// the single character "-", since getenv cannot tell unset from empty.
func lookup(getenv func(string) string, key string) (string, bool) {
	v := getenv(key)
	switch v {
	case "":
		return "", false
	case "-":
		return "", true
	}
	return v, true
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
