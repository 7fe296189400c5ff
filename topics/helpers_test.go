package topics

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// mustSecret returns a fresh valid signing secret.
func mustSecret(tb testing.TB) string {
	tb.Helper()
	s, err := NewSecret()
	if err != nil {
		tb.Fatalf("NewSecret: %v", err)
	}
	return s
}

// secretOf returns "whsec_" + base64 of n bytes.
func secretOf(n int) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", n)))
}

// wantInvalid checks that err is a validation error of the given record and
// field: it wraps ErrInvalid and is an *InvalidError.
func wantInvalid(tb testing.TB, err error, record, field string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want an invalid %s (field %q)", record, field)
	}
	if !errors.Is(err, ErrInvalid) {
		tb.Fatalf("error %q does not wrap ErrInvalid", err)
	}
	var ie *InvalidError
	if !errors.As(err, &ie) {
		tb.Fatalf("error %q is not an *InvalidError", err)
	}
	if ie.Record != record || ie.Field != field {
		tb.Fatalf("error %q is about %s.%s, want %s.%s", err, ie.Record, ie.Field, record, field)
	}
	if ie.Reason == "" {
		tb.Fatalf("error %q has no reason", err)
	}
}
