package topics

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Delivery keys. A delivery record is keyed "<subscription id>/<rest>",
// rest being the ordering key (ordered subscriptions, events with a key)
// or the event id. A subscription spread over several partitions
// (Subscription.Partitions > 1) is keyed "<subscription id> <shard>/<rest>"
// instead: the shard is where Kafka's partitioner puts rest among the
// subscription's partitions, so a key always has one shard, and ids never
// contain a space or '/' (checkID), so the key parses back. Everything a
// delivery causes (retries, redeliveries, parked copies, holds, dead
// letters, redrives) keeps the record's key, and so its partition, without
// anyone copying the shard.

// MaxPartitions bounds Subscription.Partitions.
const MaxPartitions = 64

// kafkaHash is Kafka's default partitioner (murmur2, as Java and franz-go
// use); it keeps no state for keyed records.
var kafkaHash = kgo.StickyKeyPartitioner(nil).ForTopic("")

func hashPartition(key []byte, n int) int { return kafkaHash.Partition(&kgo.Record{Key: key}, n) }

// DeliveryKeyOf is the key of a delivery for subscription id spread over
// partitions (0 or 1: not spread), rest being its ordering key or event id.
func DeliveryKeyOf(id string, partitions int, rest string) string {
	if partitions <= 1 {
		return id + "/" + rest
	}
	return id + " " + strconv.Itoa(hashPartition([]byte(rest), partitions)) + "/" + rest
}

// LaneOfKey returns what a delivery key says before '/': the subscription
// id, and " <shard>" for a spread subscription. Records with the same lane
// share a partition; the deliverer caps each lane's requests.
func LaneOfKey(key []byte) []byte {
	if i := strings.IndexByte(string(key), '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// SubscriptionOfKey returns the subscription id of a delivery key.
func SubscriptionOfKey(key []byte) []byte {
	sub, _ := splitKey(key)
	return sub
}

// splitKey returns the subscription id and the shard of a delivery key (0
// when it has none). A key without '/' is not a delivery key: it is its
// own id.
func splitKey(key []byte) (sub []byte, shard int) {
	lane := LaneOfKey(key)
	if len(lane) == len(key) {
		return key, 0
	}
	i := strings.IndexByte(string(lane), ' ')
	if i < 0 {
		return lane, 0
	}
	shard, err := strconv.Atoi(string(lane[i+1:]))
	if err != nil || shard < 0 || shard >= MaxPartitions {
		return lane, 0 // not a key this package made: hashed whole
	}
	return lane[:i], shard
}

// Partitioner places records keyed "<subscription id>/..." by the
// subscription id alone (Kafka's murmur2 hashing), so all of a
// subscription's deliveries, retries and dead letters share a partition. A
// spread subscription's shard s goes s partitions further (modulo the
// partition count), so its shards take distinct partitions when the topic
// has as many, and its shard 0 is where the whole subscription was before
// it was spread. Keys without '/' hash whole, exactly as Kafka's default
// partitioner does.
func Partitioner() kgo.Partitioner {
	return kgo.StickyKeyPartitioner(func(key []byte, n int) int {
		sub, shard := splitKey(key)
		return (hashPartition(sub, n) + shard) % n
	})
}
