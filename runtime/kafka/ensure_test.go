package kafka

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicConfig returns the value of one config key of a topic as the broker
// describes it.
func topicConfig(tb testing.TB, adm *kadm.Client, topic, key string) (string, bool) {
	tb.Helper()
	rc, err := describeTopic(testCtx(tb, 10*time.Second), adm, topic)
	if err != nil {
		tb.Fatalf("describe %s: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue(), true
		}
	}
	return "", false
}

func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		tiers  string
		parts  int32
	}{
		{"default names", topics.DefaultPrefix, topics.DefaultRetryTiers, 6},
		{"no prefix, two tiers", "", "10s,1m", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, adm := newCluster(t)
			n, err := topics.NewNames(tc.prefix, tc.tiers)
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t, 15*time.Second)
			res, err := Ensure(ctx, adm, n, Layout{Partitions: tc.parts, ReplicationFactor: -1})
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if !slices.Equal(res.Created, n.All()) || len(res.Existing) != 0 {
				t.Fatalf("Ensure = created %q, existing %q; want created %q", res.Created, res.Existing, n.All())
			}

			// A fresh client: adm caches the metadata it saw before creating.
			details, err := freshAdmin(t, c).ListTopics(ctx, n.All()...)
			if err != nil {
				t.Fatal(err)
			}
			for _, topic := range n.All() {
				d, ok := details[topic]
				if !ok || d.Err != nil {
					t.Fatalf("topic %s missing after Ensure: %v", topic, d.Err)
				}
				want := int(tc.parts)
				if topic == n.Subscriptions() || topic == n.Operations() || topic == n.EventTypes() || topic == n.Notices() {
					want = 1
				}
				if got := len(d.Partitions); got != want {
					t.Errorf("%s has %d partitions, want %d", topic, got, want)
				}
			}
			for _, topic := range n.Compacted() {
				// compact, or compact,delete (cancellations): as created.
				want := *n.TopicConfigs(topic)["cleanup.policy"]
				if v, _ := topicConfig(t, adm, topic, "cleanup.policy"); v != want {
					t.Errorf("%s cleanup.policy = %q, want %s", topic, v, want)
				}
			}
			for _, d := range n.Tiers {
				v, ok := topicConfig(t, adm, n.Retry(d), "retention.ms")
				ms, err := strconv.ParseInt(v, 10, 64)
				if !ok || err != nil || time.Duration(ms)*time.Millisecond < 4*d {
					t.Errorf("%s retention.ms = %q, want >= 4 x %v", n.Retry(d), v, d)
				}
			}

			// A second Ensure finds everything and creates nothing.
			res, err = Ensure(ctx, adm, n, Layout{Partitions: tc.parts, ReplicationFactor: -1})
			if err != nil {
				t.Fatalf("second Ensure: %v", err)
			}
			if len(res.Created) != 0 || !slices.Equal(res.Existing, n.All()) {
				t.Fatalf("second Ensure = created %q, existing %q; want all existing", res.Created, res.Existing)
			}
		})
	}
}

func TestEnsureCreatesOnlyMissing(t *testing.T) {
	_, _, adm := newCluster(t)
	n, err := topics.NewNames(topics.DefaultPrefix, "5s")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 15*time.Second)
	if _, err := adm.CreateTopic(ctx, 2, -1, nil, n.Events()); err != nil {
		t.Fatal(err)
	}
	res, err := Ensure(ctx, adm, n, Layout{Partitions: 4, ReplicationFactor: -1})
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if !slices.Equal(res.Existing, []string{n.Events()}) {
		t.Fatalf("Existing = %q, want only %s", res.Existing, n.Events())
	}
	want := slices.DeleteFunc(n.All(), func(s string) bool { return s == n.Events() })
	if !slices.Equal(res.Created, want) {
		t.Fatalf("Created = %q, want %q", res.Created, want)
	}
}

func TestEnsureRefusesUncompactedSubscriptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]*string
	}{
		{"default policy", nil},
		{"delete policy", map[string]*string{"cleanup.policy": ptr("delete")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, adm := newCluster(t)
			n, err := topics.NewNames(topics.DefaultPrefix, topics.DefaultRetryTiers)
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t, 15*time.Second)
			if _, err := adm.CreateTopic(ctx, 1, -1, tc.configs, n.Subscriptions()); err != nil {
				t.Fatal(err)
			}
			_, err = Ensure(ctx, adm, n, Layout{Partitions: 3, ReplicationFactor: -1})
			if err == nil {
				t.Fatal("Ensure accepted an uncompacted subscriptions topic")
			}
			if !strings.Contains(err.Error(), n.Subscriptions()) {
				t.Fatalf("error %q does not name %s", err, n.Subscriptions())
			}
		})
	}
}

func TestEnsureAcceptsCompactDelete(t *testing.T) {
	_, _, adm := newCluster(t)
	n, err := topics.NewNames(topics.DefaultPrefix, "5s")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 15*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": ptr("compact,delete")}, n.Subscriptions()); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, adm, n, Layout{Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatalf("Ensure with cleanup.policy=compact,delete: %v", err)
	}
}

func TestEnsureRejectsBadLayout(t *testing.T) {
	_, _, adm := newCluster(t)
	n, _ := topics.NewNames(topics.DefaultPrefix, "5s")
	for _, parts := range []int32{0, -1} {
		res, err := Ensure(testCtx(t, 5*time.Second), adm, n, Layout{Partitions: parts, ReplicationFactor: -1})
		if err == nil || len(res.Created) != 0 {
			t.Fatalf("Ensure with %d partitions = %+v, %v; want an error and nothing created", parts, res, err)
		}
	}
}

func ptr(s string) *string { return &s }

// freshAdmin returns an admin client with no cached metadata.
func freshAdmin(tb testing.TB, c *kfake.Cluster) *kadm.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestEnsureWaitsForNewTopics: Apache Kafka answers a DescribeConfigs of a
// topic created a moment before with UNKNOWN_TOPIC_OR_PARTITION until the
// topic's metadata reaches the broker asked (seen on a loaded machine in
// CI); Ensure asks again instead of failing.
func TestEnsureWaitsForNewTopics(t *testing.T) {
	c, _, adm := newCluster(t)
	n, err := topics.NewNames(topics.DefaultPrefix, "5s")
	if err != nil {
		t.Fatal(err)
	}
	unknown := 3
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if unknown == 0 {
			return nil, nil, false
		}
		unknown--
		req := kreq.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	if _, err := Ensure(testCtx(t, 30*time.Second), adm, n, Layout{Partitions: 2, ReplicationFactor: -1}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if unknown != 0 {
		t.Fatalf("%d refusals left: the test tests nothing", unknown)
	}
}
