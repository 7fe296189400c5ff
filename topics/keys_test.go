package topics

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A subscription of width 1 (Partitions 0 or 1) keeps the key and the
// partition it had before subscriptions could be spread, byte for byte.
func TestSpreadWidthOneUnchanged(t *testing.T) {
	p := Partitioner().ForTopic("webhooks.deliveries")
	for _, width := range []int{0, 1} {
		s := Subscription{ID: "sub_1", Ordering: OrderingKey, Partitions: width}
		for i := range 50 {
			e := Event{ID: fmt.Sprintf("evt_%d", i), Key: fmt.Sprintf("order_%d", i)}
			key := s.DeliveryKey(&e)
			if want := "sub_1/" + e.Key; key != want {
				t.Fatalf("width %d: DeliveryKey = %q, want %q", width, key, want)
			}
			for _, n := range []int{1, 3, 12} {
				if got, want := p.Partition(&kgo.Record{Key: []byte(key)}, n), kafkaPartition("sub_1", n); got != want {
					t.Fatalf("width %d: Partition(%q, %d) = %d, want %d", width, key, n, got, want)
				}
			}
		}
	}
}

// The shards of a spread subscription take distinct, consecutive
// partitions starting at the one the subscription had unspread; every
// shard is used; a topic with fewer partitions than shards wraps.
func TestSpreadShardsTakeDistinctPartitions(t *testing.T) {
	p := Partitioner().ForTopic("webhooks.deliveries")
	for _, id := range []string{"sub_1", "sub_hot", "acme-endpoint-17"} {
		for _, tc := range []struct{ width, n int }{{2, 3}, {4, 4}, {4, 12}, {12, 12}, {64, 64}, {8, 3}} {
			t.Run(fmt.Sprintf("%s/width=%d/n=%d", id, tc.width, tc.n), func(t *testing.T) {
				base := kafkaPartition(id, tc.n)
				shardOf := map[int]int{} // partition -> shard
				for i := range 40 * tc.width {
					key := DeliveryKeyOf(id, tc.width, fmt.Sprintf("evt_%d", i))
					_, shard := splitKey([]byte(key))
					got := p.Partition(&kgo.Record{Key: []byte(key)}, tc.n)
					if want := (base + shard) % tc.n; got != want {
						t.Fatalf("Partition(%q) = %d, want %d (base %d + shard %d)", key, got, want, base, shard)
					}
					if s, seen := shardOf[got]; seen && s != shard && tc.width <= tc.n {
						t.Fatalf("shards %d and %d share partition %d", s, shard, got)
					}
					shardOf[got] = shard
				}
				if want := min(tc.width, tc.n); len(shardOf) != want {
					t.Fatalf("%d keys took %d partitions, want %d: %v", 40*tc.width, len(shardOf), want, shardOf)
				}
			})
		}
	}
}

// A key always has the same shard: the same ordering key (or event id)
// gives the same delivery key and partition whenever it is computed, so
// per-key order holds; the shard is Kafka's partitioner on the rest.
func TestSpreadKeyHasOneShard(t *testing.T) {
	p := Partitioner().ForTopic("webhooks.deliveries")
	s := Subscription{ID: "sub_1", Ordering: OrderingKey, Partitions: 4}
	for i := range 200 {
		k := fmt.Sprintf("order_%d", i)
		want := "sub_1 " + strconv.Itoa(kafkaPartition(k, 4)) + "/" + k
		part := -1
		for j := range 5 {
			e := Event{ID: fmt.Sprintf("evt_%d_%d", i, j), Key: k}
			key := s.DeliveryKey(&e)
			if key != want {
				t.Fatalf("DeliveryKey of key %q = %q, want %q", k, key, want)
			}
			got := p.Partition(&kgo.Record{Key: []byte(key)}, 16)
			if part >= 0 && got != part {
				t.Fatalf("key %q went to partitions %d and %d", k, part, got)
			}
			part = got
		}
	}
}

func TestSubscriptionOfKeyStripsShard(t *testing.T) {
	for _, tc := range []struct{ key, sub, lane string }{
		{"sub_1/evt_1", "sub_1", "sub_1"},
		{"sub_1 3/evt_1", "sub_1", "sub_1 3"},
		{"sub_1 0/a/b c", "sub_1", "sub_1 0"},
		{"sub_1 63/x", "sub_1", "sub_1 63"},
		// Not made by DeliveryKeyOf: the prefix is taken whole.
		{"sub_1 64/x", "sub_1 64", "sub_1 64"},
		{"sub_1 x/y", "sub_1 x", "sub_1 x"},
		{"sub 1", "sub 1", "sub 1"},
	} {
		if got := string(SubscriptionOfKey([]byte(tc.key))); got != tc.sub {
			t.Errorf("SubscriptionOfKey(%q) = %q, want %q", tc.key, got, tc.sub)
		}
		if got := string(LaneOfKey([]byte(tc.key))); got != tc.lane {
			t.Errorf("LaneOfKey(%q) = %q, want %q", tc.key, got, tc.lane)
		}
	}
}
