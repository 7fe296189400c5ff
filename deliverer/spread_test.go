package deliverer

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestSpreadSubscriptionCapIsSplit (ADR 0020): a subscription spread over
// four partitions gets a quarter of WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION
// per shard, so replicas owning different shards together keep to the cap;
// a replica owning every shard gets all of it. One shard's deliveries run
// two at a time under a cap of 8 (with one lane per subscription they ran
// eight); deliveries over all four shards run eight at a time.
func TestSpreadSubscriptionCapIsSplit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := newGate(t)
	oneShard := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { g.wait(r) })
	allShards := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { g.wait(r) })
	var recs []*kgo.Record
	for _, tc := range []struct {
		id    string
		rc    *receiver
		shard func(key string) bool
	}{
		{"sub_one_shard", oneShard, func(key string) bool { return strings.HasPrefix(key, "sub_one_shard 1/") }},
		{"sub_all_shards", allShards, func(string) bool { return true }},
	} {
		s := newSub(t, tc.id, tc.rc.url())
		s.Partitions = 4
		h.putSub(s)
		for i, n := 0, 0; n < 20; i++ {
			d := newDelivery(s.ID, fmt.Sprintf("evt_%s_%d", tc.id, i))
			key := topics.DeliveryKeyOf(s.ID, s.Partitions, d.EventID)
			if tc.shard(key) {
				recs = append(recs, &kgo.Record{Topic: h.names.Deliveries(), Key: []byte(key), Value: d.Encode()})
				n++
			}
		}
	}
	h.produce(recs...)
	h.start(map[string]string{"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION": "8"})
	waitFor(t, 20*time.Second, "eight requests over the four shards", func() bool { now, _ := allShards.concurrency(); return now == 8 })
	waitFor(t, 20*time.Second, "two requests of one shard", func() bool { now, _ := oneShard.concurrency(); return now == 2 })
	keepsHolding(t, 500*time.Millisecond, "the shares of the cap", func() bool {
		_, one := oneShard.concurrency()
		_, all := allShards.concurrency()
		return one <= 2 && all <= 8
	})
	g.open()
	waitFor(t, 30*time.Second, "every delivery", func() bool { return oneShard.count()+allShards.count() >= len(recs) })
	if _, peak := oneShard.concurrency(); peak > 2 {
		t.Fatalf("%d requests of one shard of four ran at once, its share of a cap of 8 is 2", peak)
	}
	if _, peak := allShards.concurrency(); peak > 8 {
		t.Fatalf("%d requests of a spread subscription ran at once, the cap is 8", peak)
	}
}
