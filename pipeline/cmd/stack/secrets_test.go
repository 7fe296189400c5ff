package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// TestSecretsKey: `make run` uses WEBHOOKS_SECRETS_KEY when set, else a dev
// key created once in the data dir (0600) and reused by every later run, so
// components started separately agree.
func TestSecretsKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	noEnv := func(string) string { return "" }

	v1, k1, from, err := secretsKey(noEnv, dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, devKeyFile)
	if from != path || k1 == nil {
		t.Fatalf("key from %q (%v), want a new key in %s", from, k1, path)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	if _, err := topics.ParseKeyring(v1); err != nil {
		t.Fatalf("the dev key is not a WEBHOOKS_SECRETS_KEY: %v", err)
	}

	v2, k2, _, err := secretsKey(noEnv, dir)
	if err != nil || v2 != v1 || !slices.Equal(k2.IDs(), k1.IDs()) {
		t.Fatalf("second run got another key (%v)", err)
	}

	other := "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	env := func(k string) string { return map[string]string{config.EnvSecretsKey: other}[k] }
	v3, k3, from, err := secretsKey(env, dir)
	if err != nil || v3 != other || from != "$WEBHOOKS_SECRETS_KEY" || k3.KeyID() == k1.KeyID() {
		t.Fatalf("with WEBHOOKS_SECRETS_KEY set: %q from %q (%v); want it", v3, from, err)
	}

	bad := func(k string) string { return map[string]string{config.EnvSecretsKey: "c2hvcnQ="}[k] }
	if _, _, _, err := secretsKey(bad, dir); err == nil || !strings.Contains(err.Error(), config.EnvSecretsKey) {
		t.Fatalf("bad WEBHOOKS_SECRETS_KEY: %v", err)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := secretsKey(noEnv, dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt key file: %v, want an error naming it", err)
	}
}

func TestChildEnvPassesTheSecretsKey(t *testing.T) {
	env := childEnv([]string{"127.0.0.1:9092"}, 6379, 9101, "the-key")
	if !slices.Contains(env, config.EnvSecretsKey+"=the-key") {
		t.Fatalf("child environment lacks %s", config.EnvSecretsKey)
	}
}

// TestChildEnvDropsKafkaAuth: the embedded broker speaks plaintext without
// SASL, whatever TLS or SASL settings the runner's environment has.
func TestChildEnvDropsKafkaAuth(t *testing.T) {
	t.Setenv(kafka.EnvKafkaTLS, "true")
	t.Setenv(kafka.EnvKafkaSASLMechanism, "PLAIN")
	env := childEnv([]string{"127.0.0.1:9092"}, 6379, 9101, "the-key")
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v // as os/exec does: the last value of a key wins
	}
	for _, k := range kafkaAuthEnv {
		if v := last[k]; v != "" {
			t.Errorf("child environment has %s=%q, want it empty", k, v)
		}
	}
	if _, err := kafka.Load(withoutKafkaAuth(os.Getenv)); err != nil {
		t.Errorf("LoadKafka without the TLS and SASL settings: %v", err)
	}
}
