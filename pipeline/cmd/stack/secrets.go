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
		b, err = createDevKey(path)
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

// createDevKey writes a new key to path, unless another runner just did.
func createDevKey(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	key := make([]byte, topics.KeySize)
	rand.Read(key) // never returns an error since Go 1.24
	v := []byte(base64.StdEncoding.EncodeToString(key) + "\n")
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
