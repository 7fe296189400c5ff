package table

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

var testCtx = testkit.Ctx

// newCluster is testkit.Kafka.
var newCluster = testkit.Kafka

// waitDone waits for ch to be closed within timeout and reports whether it was.
func waitDone(ch <-chan struct{}, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
		return false
	}
}

// keyA and keyB are secrets keys (base64 of 32 bytes).
const (
	keyA   = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	keyB   = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	keyBID = "72dbb733"
)

// testKeys is the keyring of the table tests: keyA alone.
func testKeys(tb testing.TB) *topics.Keyring { return mustKeyring(tb, keyA) }

func mustKeyring(tb testing.TB, s string) *topics.Keyring {
	tb.Helper()
	k, err := topics.ParseKeyring(s)
	if err != nil {
		tb.Fatalf("ParseKeyring: %v", err)
	}
	return k
}

// mustSecret returns a fresh valid signing secret.
func mustSecret(tb testing.TB) string {
	tb.Helper()
	s, err := topics.NewSecret()
	if err != nil {
		tb.Fatalf("NewSecret: %v", err)
	}
	return s
}

// rotated is a subscription in the middle of a secret rotation.
func rotated(tb testing.TB, id string) topics.Subscription {
	tb.Helper()
	return topics.Subscription{
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
