package config

import (
	"slices"
	"strings"
	"testing"
)

// keyA is a secrets key (base64 of 32 bytes) and keyAID the id
// topics.ParseKeyring gives it.
const keyA, keyAID = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "630dcd29"

func TestLoadKeyring(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		ids     []string // nil: no keyring
		errHas  []string
		errNot  string
		wantErr bool
	}{
		{name: "key", env: map[string]string{EnvSecretsKey: keyA}, ids: []string{keyAID}},
		{name: "key in dev mode", env: map[string]string{EnvSecretsKey: keyA, EnvDev: "1"}, ids: []string{keyAID}},
		{name: "dev mode", env: map[string]string{EnvDev: "1"}},
		{name: "dev mode true", env: map[string]string{EnvDev: "true"}},
		{name: "missing", env: nil, wantErr: true,
			errHas: []string{"WEBHOOKS_SECRETS_KEY is not set", "WEBHOOKS_DEV=1", "openssl rand -base64 32"}},
		{name: "missing, dev mode off", env: map[string]string{EnvDev: "0"}, wantErr: true, errHas: []string{"WEBHOOKS_SECRETS_KEY is not set"}},
		{name: "bad dev value", env: map[string]string{EnvDev: "yes please"}, wantErr: true, errHas: []string{"WEBHOOKS_DEV"}},
		{name: "bad key", env: map[string]string{EnvSecretsKey: keyA[:30], EnvDev: "1"}, wantErr: true,
			errHas: []string{"WEBHOOKS_SECRETS_KEY: "}, errNot: keyA[:30]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := LoadKeyring(func(key string) string { return tc.env[key] })
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "\n") || (tc.errNot != "" && strings.Contains(err.Error(), tc.errNot)) {
					t.Errorf("error %q is not one line without the key", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (k == nil) != (tc.ids == nil) || (k != nil && !slices.Equal(k.IDs(), tc.ids)) {
				t.Fatalf("keyring %v, want ids %v", k, tc.ids)
			}
		})
	}
}
