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
	// EnvSessionTimeout is the consumer group session timeout (default 10s).
	EnvSessionTimeout = "WEBHOOKS_KAFKA_SESSION_TIMEOUT"
	// EnvStartupTimeout bounds the wait for brokers and topics at start.
	EnvStartupTimeout = "WEBHOOKS_KAFKA_STARTUP_TIMEOUT"
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

// Defaults of Settings (their envDefault tags say the same).
const (
	DefaultBrokers        = "127.0.0.1:9092"
	DefaultSessionTimeout = 10 * time.Second
	DefaultStartupTimeout = 30 * time.Second
)

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
	// default 10s; heartbeats every tenth of it.
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
	// StartupTimeout is how long WaitReady waits for the brokers and
	// topics: WEBHOOKS_KAFKA_STARTUP_TIMEOUT, default 30s.
	StartupTimeout time.Duration
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

// Settings are the Kafka variables every component reads; Load turns
// them into a Config.
type Settings struct {
	Brokers string `env:"WEBHOOKS_KAFKA_BROKERS" envDefault:"127.0.0.1:9092" desc:"Bootstrap brokers, comma-separated."`
	Prefix  string `env:"WEBHOOKS_TOPIC_PREFIX" envDefault:"webhooks." desc:"Starts every topic name; - for none."`
	Tiers   string `env:"WEBHOOKS_RETRY_TIERS" envDefault:"5s,5m,30m,2h,5h,10h" desc:"Delays of the retry tiers, one topic each, ascending, at least 1s; every component must agree."`
	// SessionTimeout is how long a crashed member keeps its partitions.
	SessionTimeout time.Duration `env:"WEBHOOKS_KAFKA_SESSION_TIMEOUT" envDefault:"10s" validate:"min=1s" desc:"Consumer group session timeout: how long a crashed member keeps its partitions (members heartbeat every tenth of it)."`
	StartupTimeout time.Duration `env:"WEBHOOKS_KAFKA_STARTUP_TIMEOUT" envDefault:"30s" validate:"gt=0" desc:"How long a component waits at start for the brokers to answer and its topics to exist before it exits with an error."`
	TLS            bool          `env:"WEBHOOKS_KAFKA_TLS" desc:"Dial the brokers over TLS (1.2 or later)."`
	TLSDir         string        `env:"WEBHOOKS_KAFKA_TLS_DIR" desc:"Directory with ca.crt (the brokers' CA; default the system roots) and, for mutual TLS, tls.crt and tls.key."`
	SASLMechanism  string        `env:"WEBHOOKS_KAFKA_SASL_MECHANISM" desc:"PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; then the username and password are required."`
	SASLUsername   string        `env:"WEBHOOKS_KAFKA_SASL_USERNAME" desc:"SASL username."`
	SASLPassword   string        `env:"WEBHOOKS_KAFKA_SASL_PASSWORD" desc:"SASL password (never logged)."`
}

// Load reads the shared Kafka settings through getenv, reporting every
// bad one at once.
func Load(getenv func(string) string) (Config, error) {
	var s Settings
	errs := []error{config.Parse(getenv, &s)}
	var c Config
	if c.Brokers = config.SplitList(s.Brokers); len(c.Brokers) == 0 {
		errs = append(errs, fmt.Errorf("%s: no broker address", EnvBrokers))
	}
	prefix := s.Prefix
	if prefix == "-" {
		prefix = ""
	}
	var err error
	if c.Names, err = topics.NewNames(prefix, s.Tiers); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvRetryTiers, err))
	}
	c.SessionTimeout, c.StartupTimeout = s.SessionTimeout, s.StartupTimeout
	if c.TLS, err = loadTLS(s); err != nil {
		errs = append(errs, err)
	}
	if c.SASL, err = loadSASL(s); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// loadTLS returns the TLS configuration of WEBHOOKS_KAFKA_TLS and
// WEBHOOKS_KAFKA_TLS_DIR, nil when TLS is off.
func loadTLS(s Settings) (*tls.Config, error) {
	dir := s.TLSDir
	if !s.TLS {
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

// loadSASL returns the SASL mechanism of WEBHOOKS_KAFKA_SASL_*, nil when
// SASL is off. Its errors never include the password.
func loadSASL(s Settings) (sasl.Mechanism, error) {
	name := strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	user, pass := s.SASLUsername, s.SASLPassword
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
			EnvKafkaSASLMechanism, s.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
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
