package kafka

import (
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/topics"

	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The Kafka settings every component reads (docs/configuration.md).
const (
	EnvBrokers    = "WEBHOOKS_KAFKA_BROKERS"
	EnvPrefix     = "WEBHOOKS_TOPIC_PREFIX"
	EnvRetryTiers = "WEBHOOKS_RETRY_TIERS"
	// EnvSessionTimeout is the consumer group session timeout (default 45s).
	EnvSessionTimeout = "WEBHOOKS_KAFKA_SESSION_TIMEOUT"
	// EnvKafkaTLS=true dials the brokers over TLS.
	EnvKafkaTLS = "WEBHOOKS_KAFKA_TLS"
	// EnvKafkaTLSDir is a directory with ca.crt (the CA that signed the
	// brokers' certificates) and, for mutual TLS, tls.crt and tls.key.
	EnvKafkaTLSDir = "WEBHOOKS_KAFKA_TLS_DIR"
	// EnvKafkaSASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512;
	// EnvKafkaSASLUsername and EnvKafkaSASLPassword are then required.
	EnvKafkaSASLMechanism = "WEBHOOKS_KAFKA_SASL_MECHANISM"
	EnvKafkaSASLUsername  = "WEBHOOKS_KAFKA_SASL_USERNAME"
	EnvKafkaSASLPassword  = "WEBHOOKS_KAFKA_SASL_PASSWORD"
)

// Files read from WEBHOOKS_KAFKA_TLS_DIR (the key names of a Kubernetes
// TLS Secret, plus ca.crt).
const (
	TLSCAFile   = "ca.crt"
	TLSCertFile = "tls.crt"
	TLSKeyFile  = "tls.key"
)

// The SASL mechanisms WEBHOOKS_KAFKA_SASL_MECHANISM accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// DefaultBrokers is used when WEBHOOKS_KAFKA_BROKERS is unset.
const DefaultBrokers = "127.0.0.1:9092"

// Config is the part of every binary's configuration that locates the
// pipeline's topics.
type Config struct {
	// Brokers: WEBHOOKS_KAFKA_BROKERS, comma-separated, default 127.0.0.1:9092.
	Brokers []string
	// Names: WEBHOOKS_TOPIC_PREFIX (default "webhooks.") and
	// WEBHOOKS_RETRY_TIERS (default "5s,5m,30m,2h,5h,10h").
	Names topics.Names
	// SessionTimeout is the consumer group session timeout: how long a
	// crashed member keeps its partitions. WEBHOOKS_KAFKA_SESSION_TIMEOUT,
	// default 45s.
	SessionTimeout time.Duration
	// TLS, when not nil, is the configuration the brokers are dialed with
	// (WEBHOOKS_KAFKA_TLS=true): TLS 1.2 or later, the CA from
	// WEBHOOKS_KAFKA_TLS_DIR/ca.crt or else the system roots, and the client
	// certificate tls.crt/tls.key of that directory when present. nil dials
	// in plaintext.
	TLS *tls.Config
	// SASL, when not nil, authenticates every connection
	// (WEBHOOKS_KAFKA_SASL_MECHANISM with _USERNAME and _PASSWORD). It holds
	// the password: never log it, print only SASL.Name().
	SASL sasl.Mechanism
}

// ClientOpts are the options that connect a franz-go client to the
// brokers: kgo.SeedBrokers, plus kgo.DialTLSConfig and kgo.SASL when
// configured. Every Kafka client of the pipeline starts from them. With
// TLS configured they cannot be combined with kgo.Dialer (franz-go refuses
// both).
func (k Config) ClientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}
	if k.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(k.TLS))
	}
	if k.SASL != nil {
		opts = append(opts, kgo.SASL(k.SASL))
	}
	return opts
}

// DefaultSessionTimeout is the consumer group session timeout by default.
const DefaultSessionTimeout = 45 * time.Second

// Load reads the shared Kafka settings through getenv.
func Load(getenv func(string) string) (Config, error) {
	brokers := config.SplitList(or(getenv(EnvBrokers), DefaultBrokers))
	if len(brokers) == 0 {
		return Config{}, fmt.Errorf("%s: no broker address", EnvBrokers)
	}
	prefix := topics.DefaultPrefix
	if v, ok := lookup(getenv, EnvPrefix); ok {
		prefix = v
	}
	names, err := topics.NewNames(prefix, or(getenv(EnvRetryTiers), topics.DefaultRetryTiers))
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvRetryTiers, err)
	}
	session := DefaultSessionTimeout
	if v := getenv(EnvSessionTimeout); v != "" {
		session, err = time.ParseDuration(v)
		if err != nil || session < time.Second {
			return Config{}, fmt.Errorf("WEBHOOKS_KAFKA_SESSION_TIMEOUT: %q is not a duration of at least 1s", v)
		}
	}
	tlsCfg, err := loadKafkaTLS(getenv)
	if err != nil {
		return Config{}, err
	}
	mech, err := loadKafkaSASL(getenv)
	if err != nil {
		return Config{}, err
	}
	return Config{Brokers: brokers, Names: names, SessionTimeout: session, TLS: tlsCfg, SASL: mech}, nil
}

// loadKafkaTLS returns the TLS configuration of WEBHOOKS_KAFKA_TLS and
// WEBHOOKS_KAFKA_TLS_DIR, nil when TLS is off.
func loadKafkaTLS(getenv func(string) string) (*tls.Config, error) {
	on := false
	if v := getenv(EnvKafkaTLS); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not true or false", EnvKafkaTLS, v)
		}
		on = b
	}
	dir := getenv(EnvKafkaTLSDir)
	if !on {
		if dir != "" {
			return nil, fmt.Errorf("%s is set but %s is not true: set %s=true to dial the brokers over TLS",
				EnvKafkaTLSDir, EnvKafkaTLS, EnvKafkaTLS)
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if dir == "" {
		return cfg, nil // the system roots verify the brokers
	}
	ca, err := os.ReadFile(filepath.Join(dir, TLSCAFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKafkaTLSDir, fileErr(dir, TLSCAFile, err))
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", EnvKafkaTLSDir, filepath.Join(dir, TLSCAFile))
	}
	certFile, keyFile := filepath.Join(dir, TLSCertFile), filepath.Join(dir, TLSKeyFile)
	hasCert, err := exists(certFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKafkaTLSDir, err)
	}
	hasKey, err := exists(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKafkaTLSDir, err)
	}
	switch {
	case hasCert && hasKey:
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: client certificate %s with key %s: %w", EnvKafkaTLSDir, certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case hasCert:
		return nil, fmt.Errorf("%s: %s has no %s beside it (mutual TLS needs both)", EnvKafkaTLSDir, certFile, TLSKeyFile)
	case hasKey:
		return nil, fmt.Errorf("%s: %s has no %s beside it (mutual TLS needs both)", EnvKafkaTLSDir, keyFile, TLSCertFile)
	}
	return cfg, nil
}

// fileErr says which file of dir is missing, more plainly than os does.
func fileErr(dir, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s in %s", name, dir)
	}
	return err
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// loadKafkaSASL returns the SASL mechanism of WEBHOOKS_KAFKA_SASL_*, nil
// when SASL is off. Its errors never include the password.
func loadKafkaSASL(getenv func(string) string) (sasl.Mechanism, error) {
	name := strings.ToUpper(strings.TrimSpace(getenv(EnvKafkaSASLMechanism)))
	user, pass := getenv(EnvKafkaSASLUsername), getenv(EnvKafkaSASLPassword)
	if name == "" {
		if user != "" || pass != "" {
			return nil, fmt.Errorf("%s is required when %s or %s is set (%s, %s or %s)",
				EnvKafkaSASLMechanism, EnvKafkaSASLUsername, EnvKafkaSASLPassword, SASLPlain, SASLScramSHA256, SASLScramSHA512)
		}
		return nil, nil
	}
	switch name {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		return nil, fmt.Errorf("%s: %q is not %s, %s or %s",
			EnvKafkaSASLMechanism, getenv(EnvKafkaSASLMechanism), SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if user == "" {
		return nil, fmt.Errorf("%s: required with %s=%s", EnvKafkaSASLUsername, EnvKafkaSASLMechanism, name)
	}
	if pass == "" {
		return nil, fmt.Errorf("%s: required with %s=%s", EnvKafkaSASLPassword, EnvKafkaSASLMechanism, name)
	}
	switch name {
	case SASLPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
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
