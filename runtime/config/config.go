// Package config holds what every component's configuration shares: the
// settings of the process itself (ops address, log level), the secrets key
// that seals subscription secrets at rest, and the parsing helpers.
package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hookpipe/hookpipe/topics"
)

// Settings every component reads (docs/configuration.md).
const (
	EnvHTTPAddr   = "WEBHOOKS_HTTP_ADDR"
	EnvLogLevel   = "WEBHOOKS_LOG_LEVEL"
	EnvSecretsKey = "WEBHOOKS_SECRETS_KEY"
	// EnvDev=1 lets a component run without WEBHOOKS_SECRETS_KEY, storing
	// subscription secrets in plaintext (development only; see LoadKeyring).
	EnvDev = "WEBHOOKS_DEV"
)

// LoadKeyring is the secrets-at-rest check every component that reads or
// writes subscriptions makes in its LoadConfig: it parses
// WEBHOOKS_SECRETS_KEY, and without it returns a nil keyring (plaintext
// secrets) only when WEBHOOKS_DEV=1; otherwise an error naming
// WEBHOOKS_SECRETS_KEY, so no component starts without encryption by
// accident.
func LoadKeyring(getenv func(string) string) (*topics.Keyring, error) {
	dev := false
	if v := getenv(EnvDev); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a boolean", EnvDev, v)
		}
		dev = b
	}
	v := getenv(EnvSecretsKey)
	if v == "" {
		if dev {
			return nil, nil
		}
		return nil, fmt.Errorf("%s is not set: it encrypts subscription secrets at rest "+
			"(base64 of 32 random bytes, e.g. `openssl rand -base64 32`); set %s=1 to run without it in development",
			EnvSecretsKey, EnvDev)
	}
	k, err := topics.ParseKeyring(v)
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
