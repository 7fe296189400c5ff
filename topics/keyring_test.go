package topics

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Test keys: bytes 0..31, 32..63 and 64..95, with the ids derived from
// them (the first 8 hex digits of their SHA-256).
const (
	keyA, keyAID = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "630dcd29"
	keyB, keyBID = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=", "72dbb733"
	keyC         = "QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8="
)

// testKeys is the keyring of the package's table tests: keyA alone.
func testKeys(tb testing.TB) *Keyring { return mustKeyring(tb, keyA) }

func mustKeyring(tb testing.TB, s string) *Keyring {
	tb.Helper()
	k, err := ParseKeyring(s)
	if err != nil {
		tb.Fatalf("ParseKeyring: %v", err)
	}
	return k
}

func TestParseKeyring(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ids  []string
	}{
		{"bare key", keyA, []string{keyAID}},
		{"bare key, spaces around", "  " + keyA + "\n", []string{keyAID}},
		{"bare key without padding", strings.TrimRight(keyA, "="), []string{keyAID}},
		{"named", "k2026:" + keyA, []string{"k2026"}},
		{"rotation list", "new:" + keyB + ", old:" + keyA, []string{"new", "old"}},
		{"list with a bare entry", "new:" + keyB + "," + keyA, []string{"new", keyAID}},
		{"two bare keys", keyB + "," + keyA, []string{keyBID, keyAID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeyring(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(k.IDs(), tc.ids) || k.KeyID() != tc.ids[0] {
				t.Fatalf("ids %v, sealing %s; want %v", k.IDs(), k.KeyID(), tc.ids)
			}
		})
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "key is empty"},
		{"not base64", "not*base64!", "not valid base64"},
		{"16 bytes", base64.StdEncoding.EncodeToString(make([]byte, 16)), "decodes to 16 bytes, want 32"},
		{"33 bytes", base64.StdEncoding.EncodeToString(make([]byte, 33)), "decodes to 33 bytes, want 32"},
		{"empty entry", keyA + ",", "entry 2 is empty"},
		{"bad id", "a b:" + keyA, "key id must be"},
		{"empty id", ":" + keyA, "key id must be"},
		{"duplicate id", "k:" + keyA + ",k:" + keyB, "key id k is given twice"},
		{"duplicate derived id", keyA + "," + keyA, "key id " + keyAID + " is given twice"},
		{"bad second entry", "new:" + keyB + ",old:" + keyA[:20], "entry 2 (old): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeyring(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			for _, key := range []string{keyA, keyB, keyA[:20], strings.TrimRight(keyA, "=")} {
				if strings.Contains(err.Error(), key) {
					t.Fatalf("error %q quotes key material", err)
				}
			}
		})
	}
}

// Printing a keyring, or a config holding one, in any verb shows ids only.
func TestKeyringNeverPrintsKeys(t *testing.T) {
	k := mustKeyring(t, "new:"+keyB+","+keyA)
	cfg := struct {
		Name    string
		Secrets *Keyring
	}{"x", k}
	raw := [][]byte{}
	for _, b64 := range []string{keyA, keyB} {
		b, _ := base64.StdEncoding.DecodeString(b64)
		raw = append(raw, b)
	}
	js, _ := json.Marshal(cfg)
	for _, out := range []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg), string(js),
		(*Keyring)(nil).String(),
	} {
		for i, b64 := range []string{keyA, keyB} {
			if strings.Contains(out, b64) || strings.Contains(out, string(raw[i])) || strings.Contains(out, fmt.Sprintf("%x", raw[i][:8])) {
				t.Fatalf("%q shows key material", out)
			}
		}
	}
	if got := k.String(); got != "keyring(new,"+keyAID+")" {
		t.Fatalf("String() = %q", got)
	}
}

// rotated is a subscription in the middle of a secret rotation.
func rotated(tb testing.TB, id string) Subscription {
	tb.Helper()
	return Subscription{
		ID: id, URL: "https://example.com/" + id, EventTypes: []string{"*"}, Enabled: true,
		Secret: mustSecret(tb), PreviousSecret: mustSecret(tb), PreviousSecretUntil: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC),
	}
}

// storedSecrets decodes the raw JSON of a subscription value.
func storedSecrets(tb testing.TB, b []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestEncodeWithSealsSecrets(t *testing.T) {
	k := testKeys(t)
	s := rotated(t, "sub_1")
	b := s.EncodeWith(k)
	for _, secret := range []string{s.Secret, s.PreviousSecret} {
		if strings.Contains(string(b), strings.TrimPrefix(secret, SecretPrefix)) {
			t.Fatalf("sealed value holds a plaintext secret: %s", b)
		}
	}
	m := storedSecrets(t, b)
	for _, f := range []string{"secret", "previous_secret"} {
		if v, _ := m[f].(string); !strings.HasPrefix(v, "enc:v1:"+keyAID+":") {
			t.Fatalf("%s = %q, want enc:v1:%s:...", f, v, keyAID)
		}
	}
	if m["secret"] == m["previous_secret"] {
		t.Fatal("two secrets sealed alike")
	}
	if again := s.EncodeWith(k); string(again) == string(b) {
		t.Fatal("two encodings are identical: the nonce is not fresh")
	}
	got, err := DecodeSubscriptionWith(b, k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Secret != s.Secret || got.PreviousSecret != s.PreviousSecret || !got.PreviousSecretUntil.Equal(s.PreviousSecretUntil) || got.URL != s.URL {
		t.Fatalf("round trip changed the subscription:\n%+v\n%+v", got, s)
	}
	// Without a previous secret, none is written.
	s.PreviousSecret, s.PreviousSecretUntil = "", time.Time{}
	if m := storedSecrets(t, s.EncodeWith(k)); m["previous_secret"] != nil {
		t.Fatalf("previous_secret written: %v", m["previous_secret"])
	}
	// A nil keyring is Encode: plaintext.
	if string(s.EncodeWith(nil)) != string(s.Encode()) {
		t.Fatal("EncodeWith(nil) differs from Encode")
	}
}

func TestDecodeSubscriptionWith(t *testing.T) {
	k := testKeys(t)
	s := rotated(t, "sub_1")
	sealed := s.EncodeWith(k)
	m := storedSecrets(t, sealed)
	secret := m["secret"].(string)
	edit := func(f func(m map[string]any)) []byte {
		m := storedSecrets(t, sealed)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	other := rotated(t, "sub_2")
	sealedOther := storedSecrets(t, other.EncodeWith(k))
	// flip is the sealed secret with one ciphertext bit flipped.
	prefix := "enc:v1:" + keyAID + ":"
	ct, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, prefix))
	if err != nil {
		t.Fatal(err)
	}
	ct[len(ct)/2] ^= 1
	flip := prefix + base64.StdEncoding.EncodeToString(ct)

	t.Run("plaintext accepted", func(t *testing.T) {
		for _, kr := range []*Keyring{nil, k} {
			got, plain, err := DecodeSubscriptionPlain(s.Encode(), kr)
			if err != nil || got.Secret != s.Secret || got.PreviousSecret != s.PreviousSecret {
				t.Fatalf("keyring %v: %v, %+v", kr, err, got)
			}
			if plain != (kr != nil) {
				t.Fatalf("keyring %v: plaintext reported %t", kr, plain)
			}
		}
		if _, plain, _ := DecodeSubscriptionPlain(sealed, k); plain {
			t.Fatal("sealed value reported as plaintext")
		}
	})
	t.Run("rotated key ring opens the old key's values", func(t *testing.T) {
		ring := mustKeyring(t, "new:"+keyB+","+keyA)
		got, err := DecodeSubscriptionWith(sealed, ring)
		if err != nil || got.Secret != s.Secret {
			t.Fatalf("%v, %q", err, got.Secret)
		}
		resealed := got.EncodeWith(ring)
		if v := storedSecrets(t, resealed)["secret"].(string); !strings.HasPrefix(v, "enc:v1:new:") {
			t.Fatalf("resealed with %q, want key new", v)
		}
		if _, err := DecodeSubscriptionWith(resealed, mustKeyring(t, "new:"+keyB)); err != nil {
			t.Fatalf("the new key alone: %v", err)
		}
		if _, err := DecodeSubscriptionWith(resealed, k); err == nil {
			t.Fatal("the old key alone opened a value sealed with the new one")
		}
	})

	for _, tc := range []struct {
		name  string
		value []byte
		k     *Keyring
		field string
		want  string
	}{
		{"no keyring", sealed, nil, "secret", "no WEBHOOKS_SECRETS_KEY is configured"},
		{"unknown key id", sealed, mustKeyring(t, keyB), "secret", "sealed with key " + keyAID + ", which WEBHOOKS_SECRETS_KEY does not hold"},
		{"same id, other key", sealed, mustKeyring(t, keyAID+":"+keyC), "secret", "does not decrypt"},
		{"copied from another subscription", edit(func(m map[string]any) { m["secret"] = sealedOther["secret"] }), k, "secret", "does not decrypt"},
		{"secret and previous swapped", edit(func(m map[string]any) {
			m["secret"], m["previous_secret"] = m["previous_secret"], m["secret"]
		}), k, "secret", "does not decrypt"},
		{"altered", edit(func(m map[string]any) { m["secret"] = flip }), k, "secret", "does not decrypt"},
		{"id changed", edit(func(m map[string]any) { m["id"] = "sub_9" }), k, "secret", "does not decrypt"},
		{"truncated", edit(func(m map[string]any) { m["secret"] = "enc:v1:" + keyAID + ":AAAA" }), k, "secret", "too short"},
		{"not base64", edit(func(m map[string]any) { m["secret"] = "enc:v1:" + keyAID + ":***" }), k, "secret", "not valid base64"},
		{"no key id", edit(func(m map[string]any) { m["secret"] = "enc:v1:" + keyAID }), k, "secret", "no valid key id"},
		{"bad key id", edit(func(m map[string]any) { m["secret"] = "enc:v1:a b:AAAA" }), k, "secret", "no valid key id"},
		{"unknown version", edit(func(m map[string]any) { m["secret"] = "enc:v2:" + strings.TrimPrefix(secret, "enc:v1:") }), k, "secret", "unsupported format"},
		{"previous secret altered", edit(func(m map[string]any) { m["previous_secret"] = flip }), k, "previous_secret", "does not decrypt"},
		{"sealed empty secret", edit(func(m map[string]any) {
			e := Subscription{ID: "sub_1"}
			m["secret"] = storedSecrets(t, e.EncodeWith(k))["secret"]
		}), k, "secret", "must start with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSubscriptionWith(tc.value, tc.k)
			wantInvalid(t, err, "subscription", tc.field)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
			for _, sec := range []string{s.Secret, s.PreviousSecret, secret, other.Secret} {
				if strings.Contains(err.Error(), sec) || strings.Contains(err.Error(), strings.TrimPrefix(sec, SecretPrefix)[:12]) {
					t.Fatalf("error %q quotes a secret", err)
				}
			}
		})
	}
}
