package topics

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Secrets at rest. A subscription's signing secrets are sealed with
// AES-256-GCM before they are written to the subscriptions topic, each as
//
//	enc:v1:<key id>:<base64 of nonce || ciphertext || tag>
//
// with a random 12-byte nonce and, as additional data, the subscription id
// and the field name: a ciphertext copied into another subscription (or from
// previous_secret into secret) does not decrypt. In memory Subscription.Secret
// is always the plaintext "whsec_" value; only the codec (EncodeWith,
// DecodeSubscriptionWith) sees the sealed form.

// EnvSecretsKey is the variable that holds the keyring
// (runtime/config.LoadKeyring reads it).
const EnvSecretsKey = "WEBHOOKS_SECRETS_KEY"

// encPrefix starts every sealed secret; encV1 is the only format so far.
const (
	encPrefix = "enc:"
	encV1     = "enc:v1:"
)

// KeySize is the length of a secrets key: AES-256.
const KeySize = 32

var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Keyring holds the keys that seal subscription secrets: the first seals,
// every one opens, so a key can be rotated by putting the new key first and
// keeping the old one until every subscription has been rewritten. A nil
// *Keyring means secrets are stored in plaintext (development only).
//
// Its String method names the key ids only; no method returns key bytes.
type Keyring struct {
	primary string
	ids     []string
	aeads   map[string]cipher.AEAD
}

// ParseKeyring parses WEBHOOKS_SECRETS_KEY: the base64 of 32 bytes, or a
// comma-separated list of "<id>:<base64 of 32 bytes>" entries, the first of
// which seals. An entry without an id gets one derived from the key: the
// first 8 hex digits of its SHA-256, so it is stable across restarts and
// processes. Errors never quote key material.
func ParseKeyring(s string) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	entries := strings.Split(s, ",")
	for i, e := range entries {
		e = strings.TrimSpace(e)
		where := "key"
		if len(entries) > 1 {
			where = fmt.Sprintf("entry %d", i+1)
		}
		if e == "" {
			return nil, fmt.Errorf("%s is empty", where)
		}
		id, b64, named := strings.Cut(e, ":")
		if !named {
			id, b64 = "", e
		} else if !keyIDRE.MatchString(id) {
			return nil, fmt.Errorf("%s: the key id must be 1-64 letters, digits, '_', '.' or '-'", where)
		} else {
			where += " (" + id + ")"
		}
		key, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if id == "" {
			sum := sha256.Sum256(key)
			id = hex.EncodeToString(sum[:4])
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("%s: key id %s is given twice", where, id)
		}
		block, err := aes.NewCipher(key)
		if err != nil { // only a wrong key size fails, and decodeKey checked it
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		k.aeads[id] = aead
		k.ids = append(k.ids, id)
	}
	k.primary = k.ids[0]
	return k, nil
}

func decodeKey(b64 string) ([]byte, error) {
	b64 = strings.TrimSpace(b64)
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		return nil, errors.New("not valid base64")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("decodes to %d bytes, want %d (e.g. `openssl rand -base64 32`)", len(key), KeySize)
	}
	return key, nil
}

// KeyID is the id of the key that seals.
func (k *Keyring) KeyID() string { return k.primary }

// IDs are the ids of every key, the sealing one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// String names the key ids, never the keys.
func (k *Keyring) String() string {
	if k == nil {
		return "keyring(none)"
	}
	return "keyring(" + strings.Join(k.ids, ",") + ")"
}

// GoString keeps %#v from printing the ciphers' internals.
func (k *Keyring) GoString() string { return k.String() }

// secretAAD binds a sealed secret to its subscription and field.
func secretAAD(subID, field string) []byte {
	return []byte("hookpipe/subscription-secret/v1\x00" + subID + "\x00" + field)
}

// seal encrypts a secret with the primary key.
func (k *Keyring) seal(subID, field, secret string) string {
	aead := k.aeads[k.primary]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(secret)+aead.Overhead())
	rand.Read(nonce) // never returns an error since Go 1.24
	sealed := aead.Seal(nonce, nonce, []byte(secret), secretAAD(subID, field))
	return encV1 + k.primary + ":" + base64.StdEncoding.EncodeToString(sealed)
}

// open decrypts a sealed secret. Errors wrap ErrInvalid and never quote the
// value.
func (k *Keyring) open(subID, field, v string) (string, error) {
	rest, ok := strings.CutPrefix(v, encV1)
	if !ok {
		return "", invalid("subscription", field, "sealed in an unsupported format (want enc:v1:<key id>:<base64>)")
	}
	id, b64, ok := strings.Cut(rest, ":")
	if !ok || !keyIDRE.MatchString(id) {
		return "", invalid("subscription", field, "sealed value has no valid key id")
	}
	if k == nil {
		return "", invalid("subscription", field, "sealed with key %s, but no %s is configured", id, EnvSecretsKey)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", invalid("subscription", field, "sealed with key %s, which %s does not hold", id, EnvSecretsKey)
	}
	sealed, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", invalid("subscription", field, "sealed value is not valid base64")
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return "", invalid("subscription", field, "sealed value is too short")
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], secretAAD(subID, field))
	if err != nil {
		return "", invalid("subscription", field, "does not decrypt with key %s (altered, or copied from another subscription)", id)
	}
	return string(plain), nil
}

// isSealed reports whether a stored secret is in the sealed form.
func isSealed(v string) bool { return strings.HasPrefix(v, encPrefix) }

// secretFields are a record's sealed fields, each by its sealing name.
type secretFields []struct {
	name string
	v    *string
}

// values are the fields that are set.
func (fs secretFields) values() []string {
	var out []string
	for _, f := range fs {
		if *f.v != "" {
			out = append(out, *f.v)
		}
	}
	return out
}

// replace sets each field that is set to fn of its name and value.
func (fs secretFields) replace(fn func(name, v string) string) {
	for _, f := range fs {
		if *f.v != "" {
			*f.v = fn(f.name, *f.v)
		}
	}
}
