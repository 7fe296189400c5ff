package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

var testCtx = testkit.Ctx

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
