// Package config holds what every component's configuration shares: the
// settings of the process itself (ops address, log level), the secrets key
// that seals subscription secrets at rest, and the parsing helpers.
package config

import (
	"fmt"
	"strings"

	"github.com/hookpipe/hookpipe/topics"
)

// Settings every component reads (docs/configuration.md).
const (
	EnvHTTPAddr   = "WEBHOOKS_HTTP_ADDR"
	EnvLogLevel   = "WEBHOOKS_LOG_LEVEL"
	EnvSecretsKey = topics.EnvSecretsKey
	// EnvDev=1 lets a component run without WEBHOOKS_SECRETS_KEY, storing
	// subscription secrets in plaintext (development only; see LoadKeyring).
	EnvDev = "WEBHOOKS_DEV"
)

// Secrets are the variables of the keyring that seals subscription
// secrets at rest.
type Secrets struct {
	Key string `env:"WEBHOOKS_SECRETS_KEY" desc:"Keyring sealing subscription secrets at rest: base64 of 32 random bytes (openssl rand -base64 32), or id:key pairs, comma-separated, the first sealing (rotation). Never logged."`
	Dev bool   `env:"WEBHOOKS_DEV" desc:"Development only: run without WEBHOOKS_SECRETS_KEY, storing secrets in plaintext."`
}

// LoadKeyring is the secrets-at-rest check every component that reads or
// writes subscriptions makes in its LoadConfig: it parses
// WEBHOOKS_SECRETS_KEY, and without it returns a nil keyring (plaintext
// secrets) only when WEBHOOKS_DEV=1; otherwise an error naming
// WEBHOOKS_SECRETS_KEY, so no component starts without encryption by
// accident.
func LoadKeyring(getenv func(string) string) (*topics.Keyring, error) {
	var s Secrets
	if err := Parse(getenv, &s); err != nil {
		return nil, err
	}
	if s.Key == "" {
		if s.Dev {
			return nil, nil
		}
		return nil, fmt.Errorf("%s is not set: it encrypts subscription secrets at rest "+
			"(base64 of 32 random bytes, e.g. `openssl rand -base64 32`); set %s=1 to run without it in development",
			EnvSecretsKey, EnvDev)
	}
	k, err := topics.ParseKeyring(s.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSecretsKey, err)
	}
	return k, nil
}

// SplitList splits a comma-separated list, dropping blanks around and
// between items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
