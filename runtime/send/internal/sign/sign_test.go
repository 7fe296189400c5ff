package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestStandardWebhooksVector checks against the example in the Standard
// Webhooks specification and its reference libraries.
func TestStandardWebhooksVector(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	k := NewKey(key)
	for i := range 3 { // a kept HMAC state signs as a new one
		got := Signature([]*Key{k}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
			[]byte(`{"test": 2432232314}`))
		const want = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
		if got != want {
			t.Fatalf("signature %d = %q, want %q", i, got, want)
		}
		Signature([]*Key{k}, "msg_other", 1, []byte("other"))
	}
}

// TestIndependentVerification verifies with code that does not share the
// signer's helpers: plain string concatenation, as a receiver would.
func TestIndependentVerification(t *testing.T) {
	k1, k2 := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 24))
	body := []byte(`{"id":"evt_1","data":{"x":1}}`)
	header := Signature([]*Key{NewKey(k1), NewKey(k2)}, "evt_1", 1700000000, body)
	sigs := strings.Split(header, " ")
	if len(sigs) != 2 {
		t.Fatalf("header %q: want two signatures", header)
	}
	for i, k := range [][]byte{k1, k2} {
		m := hmac.New(sha256.New, k)
		fmt.Fprintf(m, "%s.%d.%s", "evt_1", 1700000000, body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		if sigs[i] != want {
			t.Errorf("signature %d = %q, want %q", i, sigs[i], want)
		}
	}
}

func BenchmarkSignature(b *testing.B) {
	keys := []*Key{NewKey([]byte(strings.Repeat("k", 32)))}
	body := []byte(strings.Repeat("x", 1024))
	b.ReportAllocs()
	for b.Loop() {
		Signature(keys, "evt_123", 1700000000, body)
	}
}
