package topics

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
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
			got, plain, err := decodeSubscription(s.Encode(), kr)
			if err != nil || got.Secret != s.Secret || got.PreviousSecret != s.PreviousSecret {
				t.Fatalf("keyring %v: %v, %+v", kr, err, got)
			}
			if plain != (kr != nil) {
				t.Fatalf("keyring %v: plaintext reported %t", kr, plain)
			}
		}
		if _, plain, _ := decodeSubscription(sealed, k); plain {
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

// TestTableSecrets: the table opens sealed secrets, accepts plaintext ones
// with one warning, and ignores (with a warning naming no secret) records it
// cannot open, keeping the previous state.
func TestTableSecrets(t *testing.T) {
	e := newTableEnv(t, 1)
	core, logs := observer.New(zapcore.DebugLevel)
	tbl, err := NewTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, testKeys(t), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tbl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; tbl.Close() })

	sealed := rotated(t, "sub_sealed")
	plain1, plain2 := rotated(t, "sub_plain1"), rotated(t, "sub_plain2")
	foreign := rotated(t, "sub_foreign")
	copied := rotated(t, "sub_copied")
	e.put(t, sealed.ID, sealed.EncodeWith(testKeys(t)))
	e.put(t, plain1.ID, plain1.Encode())
	e.put(t, plain2.ID, plain2.Encode())
	e.put(t, copied.ID, copied.EncodeWith(testKeys(t)))
	e.put(t, foreign.ID, foreign.EncodeWith(mustKeyring(t, keyB)))
	m := storedSecrets(t, copied.EncodeWith(testKeys(t)))
	m["secret"] = storedSecrets(t, sealed.EncodeWith(testKeys(t)))["secret"]
	b, _ := json.Marshal(m)
	e.put(t, copied.ID, b)
	waitCaughtUp(t, tbl)

	for _, want := range []Subscription{sealed, plain1, plain2, copied} {
		got, ok := tbl.Get(want.ID)
		if !ok || got.Secret != want.Secret || got.PreviousSecret != want.PreviousSecret {
			t.Errorf("Get(%s) = %v, %v; want its secrets opened (copied: the state before the bad record)", want.ID, got != nil, ok)
		}
	}
	if _, ok := tbl.Get(foreign.ID); ok {
		t.Error("a record sealed with an unknown key was applied")
	}
	if n := logs.FilterMessageSnippet("plaintext").Len(); n != 1 {
		t.Errorf("%d plaintext warnings, want 1", n)
	}
	if n := logs.FilterMessage("ignoring invalid subscription record").Len(); n != 2 {
		t.Errorf("%d ignored records logged, want 2 (unknown key, copied ciphertext)", n)
	}
	var all strings.Builder
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, l := range logs.All() {
		buf, err := enc.EncodeEntry(l.Entry, l.Context)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(buf.Bytes())
	}
	for _, s := range []Subscription{sealed, plain1, plain2, foreign, copied} {
		for _, sec := range []string{s.Secret, s.PreviousSecret} {
			if strings.Contains(all.String(), strings.TrimPrefix(sec, SecretPrefix)[:12]) {
				t.Fatalf("a secret is in the logs:\n%s", all.String())
			}
		}
	}
	if !strings.Contains(all.String(), keyBID) {
		t.Errorf("the warning does not name the unknown key id %s:\n%s", keyBID, all.String())
	}
}

func TestNewTableWarnsWithoutKeys(t *testing.T) {
	e := newTableEnv(t, 1)
	core, logs := observer.New(zapcore.WarnLevel)
	tbl, err := NewTable([]kgo.Opt{kgo.SeedBrokers(e.c.ListenAddrs()...)}, e.topic, nil, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	tbl.Close()
	if logs.FilterMessageSnippet(EnvSecretsKey).Len() != 1 {
		t.Fatalf("logs %v, want one warning naming %s", logs.All(), EnvSecretsKey)
	}
}
