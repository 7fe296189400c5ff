package topics

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
)

// APIKey is the value on the apikeys topic (compacted, keyed by the key's
// id): a key of the control plane's HTTP API. The key itself is shown once,
// when created; the record holds only its SHA-256. An admin key (no tenant)
// reaches every tenant; a tenant key only its tenant's subscriptions and
// events. A revoked key stays on the topic with RevokedAt, so every replica
// refuses it.
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	Tenant    string     `json:"tenant,omitempty"`
	Hash      string     `json:"hash"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// APIKeyPrefix starts every API key: "hpk_" and the base64url of 32 random
// bytes (256 bits).
const APIKeyPrefix = "hpk_"

// NewAPIKey returns a fresh key and its record (id, hash, tenant, name;
// created now).
func NewAPIKey(name, tenant string) (string, APIKey) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return key, APIKey{ID: NewID("key_"), Name: name, Tenant: tenant, Hash: HashAPIKey(key), CreatedAt: time.Now().UTC()}
}

// HashAPIKey is the stored form of a key: hex SHA-256. A key has 256 random
// bits, so a fast hash is enough: there is nothing to guess.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Admin reports whether the key reaches every tenant.
func (k *APIKey) Admin() bool { return k.Tenant == "" }

// Revoked reports whether the key was revoked.
func (k *APIKey) Revoked() bool { return k.RevokedAt != nil }

// Encode renders the record value.
func (k *APIKey) Encode() []byte {
	return encodeRecord(k)
}

// DecodeAPIKey decodes an apikeys value strictly.
func DecodeAPIKey(b []byte) (APIKey, error) {
	var k APIKey
	if err := decodeStrict("api key", b, &k); err != nil {
		return APIKey{}, err
	}
	if err := checkID("api key", "id", k.ID); err != nil {
		return APIKey{}, err
	}
	if len(k.Hash) != 64 || strings.Trim(k.Hash, "0123456789abcdef") != "" {
		return APIKey{}, invalid("api key", "hash", "not a hex SHA-256")
	}
	return k, nil
}
