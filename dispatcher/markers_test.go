package dispatcher

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestGroupPartition: a group's offsets partition is where Kafka puts it:
// the absolute Java hash code of its id modulo the partitions, 0 for the
// one id whose hash code is the smallest int.
func TestGroupPartition(t *testing.T) {
	for _, c := range []struct {
		group string
		n     int
		want  int32
	}{
		{"hello", 50, 99162322 % 50},  // "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0}, // hashCode() == Integer.MIN_VALUE
		{"Aa", 7, 2112 % 7},           // "Aa" and "BB" collide in Java: 2112
		{"BB", 7, 2112 % 7},
		{"webhooks-dispatcher", 50, 1697199048 % 50}, // hashCode() == -1697199048
		{"é", 50, 233 % 50},                          // one UTF-16 unit, 233
		{"𝄞", 50, int32((55348*31 + 56606) % 50)},    // two UTF-16 units
	} {
		if got := groupPartition(c.group, c.n); got != c.want {
			t.Errorf("groupPartition(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
}

// TestMarkersOnApacheKafka: on a real broker, a transaction of the
// dispatcher's producer holding its group's offsets pending is found open
// on the group's partition; while its coordinator has it under way, the
// checks leave it alone, and ending it again writes the marker that
// settles the offsets: dropped after an abort, the group's after a commit.
func TestMarkersOnApacheKafka(t *testing.T) {
	brokers, ok := testkit.ApacheKafka(t)
	if !ok {
		t.Skip("describes producers and transactions, which kfake does not: runs with WEBHOOKS_TEST_KAFKA=apache")
	}
	ns := testkit.Namespace(t)
	txnID, group, topic := ns+"dispatcher-txn", ns+"dispatcher", ns+"events"
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID), kafka.TransactionsV1())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testkit.Ctx(t, 2*time.Minute)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	repaired := 0
	m := &markers{cl: cl, adm: adm, txnID: txnID, group: group, log: testkit.Logger(t), mu: &sync.Mutex{}, seen: -1,
		repaired: func() { repaired++ }}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// fetch is the group's committed offset of the topic's partition and
	// the error of a stable fetch.
	fetch := func() (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.RequireStable = group, true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return 0, err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				return p.Offset, kerr.ErrorForCode(p.ErrorCode)
			}
		}
		return 0, errors.New("no partition in the answer")
	}

	for i, commit := range []bool{false, true} {
		offset := int64(10 + i)
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
		if err := retryBusy(ctx, func() (int16, error) {
			resp, err := add.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}); err != nil {
			t.Fatalf("add offsets: %v", err)
		}
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = txnID, group, pid, epoch, -1
		ct := kmsg.NewTxnOffsetCommitRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = 0, offset, -1
		ct.Partitions = append(ct.Partitions, cp)
		tc.Topics = append(tc.Topics, ct)
		if resp, err := tc.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("transactional offset commit: %v %+v", err, resp)
		}
		if _, err := fetch(); !errors.Is(err, kerr.UnstableOffsetCommit) {
			t.Fatalf("a stable fetch during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", err)
		}
		start, err := m.openAt(ctx, pid)
		if err != nil || start < 0 {
			t.Fatalf("the open transaction not found on the group's partition: %d %v", start, err)
		}
		// Under way for its coordinator: looked at twice, left alone.
		for range 2 {
			if err := m.check(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if state, err := m.coordinatorState(ctx); err != nil || state != "Ongoing" || repaired != 0 {
			t.Fatalf("coordinator state %q (%v), %d repaired: want Ongoing and none", state, err, repaired)
		}

		if err := m.end(ctx, pid, epoch, commit); err != nil {
			t.Fatal(err)
		}
		want := int64(-1) // dropped with the abort: nothing committed yet
		if commit {
			want = offset
		}
		testkit.WaitFor(t, time.Minute, "the group's offsets settled by the marker", func() bool {
			got, err := fetch()
			return err == nil && got == want
		})
		if start, err := m.openAt(ctx, pid); err != nil || start >= 0 {
			t.Fatalf("still open on the group's partition after the marker: %d %v", start, err)
		}
	}
}
