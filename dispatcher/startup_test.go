package dispatcher

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestRunStartup checks that Run refuses to start, with a clear error, when
// it cannot work, and returns nil when cancelled before it started.
func TestRunStartup(t *testing.T) {
	names := topics.Names{Prefix: topics.DefaultPrefix}
	closedPort := func(t *testing.T) []string { return []string{testkit.FreeAddr(t)} }
	noTopics := func(t *testing.T) []string {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c.ListenAddrs()
	}
	for _, tc := range []struct {
		name      string
		brokers   func(t *testing.T) []string
		cancelled bool
		err       []string // substrings of the error; none means Run returns nil
	}{
		{name: "no brokers", brokers: func(*testing.T) []string { return nil }, err: []string{kafka.EnvBrokers}},
		{name: "unreachable", brokers: closedPort, err: []string{"kafka not ready after 500ms", kafka.EnvBrokers, "unreachable"}},
		{name: "missing topics", brokers: noTopics, err: []string{"missing topics webhooks.events", "webhookctl topics ensure"}},
		{name: "cancelled while waiting", brokers: closedPort, cancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			cfg := Config{
				Kafka:           kafka.Config{Brokers: tc.brokers(t), Names: names, StartupTimeout: 500 * time.Millisecond},
				TransactionalID: "startup",
			}
			err := Run(ctx, cfg, zaptest.NewLogger(t))
			if len(tc.err) == 0 {
				if err != nil {
					t.Fatalf("Run: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Run returned nil")
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
