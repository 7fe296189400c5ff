package topics

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics/testkit"
)

// The shared test helpers (package testkit), by their names here.
var (
	waitFor = testkit.WaitFor
	testCtx = testkit.Ctx
)

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

// newCluster starts an in-process one-broker Kafka and returns it with a
// client and an admin client on it, all closed at the end of the test.
func newCluster(tb testing.TB, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client, *kadm.Client) {
	tb.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return c, cl, kadm.NewClient(cl)
}

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
