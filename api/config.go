package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/api/internal/session"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/topics"
)

// Config is the API's configuration: LoadConfig reads it from the
// environment (docs/configuration.md).
type Config struct {
	// Kafka locates the brokers and topics (package runtime/kafka).
	Kafka kafka.Config `env:"-"`
	// Secrets seals and opens subscription secrets (config.LoadKeyring).
	Secrets *topics.Keyring `env:"-"`
	// Addr serves the API.
	Addr string `env:"WEBHOOKS_API_ADDR" envDefault:"127.0.0.1:8080" desc:"Address of the HTTP API."`
	// AdminKey is an admin key given from outside (a Kubernetes Secret, or
	// make run's .run/api.key): accepted as admin besides the keys of the
	// apikeys topic. Never logged.
	AdminKey string `env:"WEBHOOKS_API_ADMIN_KEY" desc:"An admin API key accepted besides the keys on the apikeys topic (hpk_ and 43 base64url characters); the bootstrap key. Never logged."`
	// TLSCert and TLSKey serve the API over TLS when both are set.
	TLSCert string `env:"WEBHOOKS_API_TLS_CERT" desc:"PEM certificate file: with WEBHOOKS_API_TLS_KEY the API serves HTTPS."`
	TLSKey  string `env:"WEBHOOKS_API_TLS_KEY" desc:"PEM key file of WEBHOOKS_API_TLS_CERT."`
	// HTTPAddr serves /metrics, /healthz and /readyz (package runtime/ops).
	HTTPAddr string `env:"WEBHOOKS_HTTP_ADDR" desc:"Address of /metrics, /healthz and /readyz; empty: not served."`
	// Pprof serves Go's profiles on HTTPAddr.
	Pprof bool `env:"WEBHOOKS_PPROF" desc:"Serve Go's profiles under /debug/pprof/ on WEBHOOKS_HTTP_ADDR (off by default; keep that port private)."`
	// Redis holds the per-key request rate limits (package redisstate); an
	// empty URL means no limit.
	Redis redisstate.Config `env:"-"`
	// RateLimit is how many requests per second one API key may make,
	// across all replicas (GCRA in Redis, a burst of the same); 0: none.
	RateLimit float64 `env:"WEBHOOKS_API_RATE_LIMIT" envDefault:"50" validate:"finite,min=0" desc:"Requests per second one API key may make across all replicas (a burst of as many); 0: no limit. Needs Redis; without it, or while it is down, requests are not limited."`
	// TenantMaxSubscriptions is the most subscriptions a tenant may have,
	// unless the tenants topic sets its own; 0: unlimited.
	TenantMaxSubscriptions int `env:"WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS" envDefault:"0" validate:"min=0" desc:"Most subscriptions one tenant may have, unless the tenants topic sets its own (webhookctl tenants set-quota); a create past it is refused (0: unlimited)."`
	// SessionKey signs the dashboard's session cookies and the portal's
	// links; every replica must have the same one.
	SessionKey string `env:"WEBHOOKS_API_SESSION_KEY" desc:"Signs dashboard sessions and portal links: 32 or more random bytes, base64; the same on every replica. Empty: a random key per process (sessions and links then work on that replica only, until it restarts). Never logged."`
	// Group is the consumer group that elects the replica running the bulk
	// operations.
	Group string `env:"WEBHOOKS_API_GROUP" envDefault:"webhooks-api" desc:"Consumer group of the API replicas: the one of them assigned the operations topic's partition runs the bulk operations (redrives, replays)."`
	// HTTP is how test-send reaches endpoints, and the alert channels their
	// URLs: the deliverer's settings.
	send.HTTP
	// Alert is how alert channels send (the SMTP server) and the alerter's
	// consumer group.
	Alert alert.Config
	// Conn is where the message log reads the attempts: the recorder's
	// ClickHouse.
	schema.Conn
	// ShutdownTimeout bounds the requests in progress after SIGTERM.
	ShutdownTimeout time.Duration `env:"WEBHOOKS_SHUTDOWN_TIMEOUT" envDefault:"10s" validate:"gt=0" desc:"How long requests in progress may finish after SIGTERM."`
	// UnknownEventTypes is what POST /v1/events does with an event whose
	// type is not in the event catalog.
	UnknownEventTypes string `env:"WEBHOOKS_UNKNOWN_EVENT_TYPES" envDefault:"accept" validate:"oneof=accept warn reject" desc:"An event whose type is not in the event catalog: accept, warn (accept it, count it as unknown and say so in the answer) or reject (422); the dispatcher reads it too."`
	// RequestTimeout bounds one request, the broker's acknowledgement
	// included.
	RequestTimeout time.Duration `env:"WEBHOOKS_API_REQUEST_TIMEOUT" envDefault:"15s" validate:"gt=0" desc:"Bounds one request, waiting for the broker included."`
}

// LoadConfig reads the configuration through getenv, reporting every bad
// variable at once: config.Parse checks the validate tags, validate the
// rest.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	errs := []error{config.Parse(getenv, &c, append(send.Parsers, schema.Parsers...)...)}
	var err error
	c.Kafka, err = kafka.Load(getenv)
	errs = append(errs, err)
	c.Secrets, err = config.LoadKeyring(getenv)
	errs = append(errs, err)
	c.Redis, err = redisstate.Load(getenv)
	errs = append(errs, err, c.validate())
	return c, errors.Join(errs...)
}

// validate checks what the tags cannot say: keys and the TLS files, which
// go together.
func (c *Config) validate() error {
	errs := []error{c.Validate(), c.Alert.Validate()} // the HTTP settings (send.HTTP), the alerter's
	if c.AdminKey != "" && (!strings.HasPrefix(c.AdminKey, topics.APIKeyPrefix) || len(c.AdminKey) < 24) {
		errs = append(errs, fmt.Errorf("%s: not an API key (%s and at least 20 characters)", config.Name(c, &c.AdminKey), topics.APIKeyPrefix))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, fmt.Errorf("%s and %s go together", config.Name(c, &c.TLSCert), config.Name(c, &c.TLSKey)))
	}
	if c.SessionKey != "" {
		if _, err := session.DecodeKey(c.SessionKey); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", config.Name(c, &c.SessionKey), err))
		}
	}
	return errors.Join(errs...)
}
