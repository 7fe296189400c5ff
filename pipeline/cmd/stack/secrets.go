package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/topics"
)

// devKeyFile holds the dev secrets key under the data dir.
const devKeyFile = "secrets.key"

// secretsKey returns the WEBHOOKS_SECRETS_KEY every component gets, parsed,
// and where it came from: getenv's when set, else the dev key kept in
// <dataDir>/secrets.key, created once (mode 0600, base64 of 32 random bytes)
// so that every run, and components started by hand with that key, agree on
// the subscriptions already sealed.
func secretsKey(getenv func(string) string, dataDir string) (string, *topics.Keyring, string, error) {
	if v := getenv(config.EnvSecretsKey); v != "" {
		k, err := topics.ParseKeyring(v)
		if err != nil {
			return "", nil, "", fmt.Errorf("%s: %w", config.EnvSecretsKey, err)
		}
		return v, k, "$" + config.EnvSecretsKey, nil
	}
	path := filepath.Join(dataDir, devKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, topics.KeySize)
		rand.Read(key) // never returns an error since Go 1.24
		b, err = createOnce(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"))
	}
	if err != nil {
		return "", nil, "", fmt.Errorf("dev secrets key: %w", err)
	}
	v := strings.TrimSpace(string(b))
	k, err := topics.ParseKeyring(v)
	if err != nil {
		return "", nil, "", fmt.Errorf("%s: %w (remove it for a new key; subscriptions sealed with the old one become unreadable)", path, err)
	}
	return v, k, path, nil
}

// apiKey returns the admin key the API accepts (WEBHOOKS_API_ADMIN_KEY) and
// where it came from: getenv's when set, else the dev key kept in
// <dataDir>/api.key, created once (mode 0600), so that curl and scripts
// find it: curl -H "Authorization: Bearer $(cat .run/api.key)".
func apiKey(getenv func(string) string, dataDir string) (string, string, error) {
	return devValue(getenv, "WEBHOOKS_API_ADMIN_KEY", filepath.Join(dataDir, "api.key"), func() string {
		key, _ := topics.NewAPIKey("make run", "")
		return key
	})
}

// sessionKey returns the key that signs the dashboard's sessions
// (WEBHOOKS_API_SESSION_KEY): getenv's when set, else the dev key kept in
// <dataDir>/session.key, so that a sign-in outlives a restart of the stack.
func sessionKey(getenv func(string) string, dataDir string) (string, error) {
	v, _, err := devValue(getenv, "WEBHOOKS_API_SESSION_KEY", filepath.Join(dataDir, "session.key"), func() string {
		key := make([]byte, 32)
		rand.Read(key) // never returns an error since Go 1.24
		return base64.StdEncoding.EncodeToString(key)
	})
	return v, err
}

// devValue returns getenv(env) and "$env" when set; else the value kept in
// the file at path, created once with gen(), and the path.
func devValue(getenv func(string) string, env, path string, gen func() string) (string, string, error) {
	if v := getenv(env); v != "" {
		return v, "$" + env, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = createOnce(path, []byte(gen()+"\n"))
	}
	if err != nil {
		return "", "", fmt.Errorf("dev %s: %w", env, err)
	}
	return strings.TrimSpace(string(b)), path, nil
}

// createOnce writes v to a new file at path (mode 0600), unless another
// runner just did: then it returns what that one wrote.
func createOnce(path string, v []byte) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(v); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, err
	}
	return v, nil
}
