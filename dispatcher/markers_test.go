package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
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
	cl, err := kgo.NewClient(append(kafka.TransactionsV1(), kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID))...)
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
	m := &markers{cl: cl, adm: adm, txnID: txnID, group: group, log: testkit.Logger(t), mu: &sync.Mutex{},
		repaired: func() { repaired++ }}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// fetch is the group's committed offset of the topic's partition and
	// the error of a stable fetch.
	fetch := func() (int64, error) { return stableOffset(ctx, cl, group, topic) }

	for i, commit := range []bool{false, true} {
		offset := int64(10 + i)
		holdOffsets(t, cl, txnID, pid, epoch, group, topic, offset)
		if _, err := fetch(); !errors.Is(err, kerr.UnstableOffsetCommit) {
			t.Fatalf("a stable fetch during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", err)
		}
		if open := openAt(t, m, pid); open.ProducerEpoch != epoch {
			t.Fatalf("the open transaction found on the group's partition at epoch %d, want %d", open.ProducerEpoch, epoch)
		}
		// Under way for its coordinator: looked at twice, left alone.
		for range ownLooks {
			if err := m.check(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if d, err := m.describe(ctx, txnID); err != nil || d.State != "Ongoing" {
			t.Fatalf("coordinator state %q (%v): want Ongoing, left alone", d.State, err)
		}

		if err := m.end(ctx, txnID, pid, epoch, commit, nil, true); err != nil {
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
		if open, err := m.openOn(ctx, offsetsPart(t, m)); err != nil || open[pid].CurrentTxnStartOffset >= 0 && open[pid].ProducerID == pid {
			t.Fatalf("still open on the group's partition after the marker: %+v %v", open[pid], err)
		}
	}

	// Another dispatcher's transaction holding the group's offsets, under
	// way for its coordinator: found by its producer, left alone at every
	// look, then ended as that producer.
	otherID := txnIDPrefix + ns + "gone"
	other, err := kgo.NewClient(append(kafka.TransactionsV1(), kgo.SeedBrokers(brokers...), kgo.TransactionalID(otherID))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	opid, oepoch, err := other.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holdOffsets(t, other, otherID, opid, oepoch, group, topic, 20)
	if _, err := fetch(); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("a stable fetch during the other's transaction: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	seen := openAt(t, m, opid)
	for range otherLooks + 1 {
		if err := m.check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.seen[opid].looks; got != otherLooks+1 {
		t.Fatalf("the other's transaction at %d looks: want %d, left alone", got, otherLooks+1)
	}
	listed, err := adm.ListTransactions(ctx, []int64{opid}, nil)
	if err != nil || listed[otherID].State != "Ongoing" {
		t.Fatalf("the other's transaction listed by its producer: %+v %v", listed, err)
	}
	if err := m.end(ctx, otherID, opid, oepoch, false, nil, true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "the group's offsets settled by the other's marker", func() bool {
		got, err := fetch()
		return err == nil && got == 11
	})

	// Seen open at every look, complete for its coordinator, but closed
	// when the partition is looked at again (its marker was on the way):
	// left alone, no longer tracked.
	m.seen = map[int64]openTxn{opid: {DescribedProducer: seen, looks: otherLooks}}
	repaired = 0 // the checks above may have ended another test's, left so
	if err := m.endOther(ctx, offsetsPart(t, m), m.seen[opid]); err != nil {
		t.Fatal(err)
	}
	if _, tracked := m.seen[opid]; tracked || repaired != 0 {
		t.Fatalf("a transaction closed since it was seen: tracked %v, %d ended; want neither", tracked, repaired)
	}
}

// holdOffsets has producer pid (of txnID, at epoch) commit offset for
// the topic's partition 0 in group, in a transaction it leaves open.
func holdOffsets(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16, group, topic string, offset int64) {
	t.Helper()
	ctx := testkit.Ctx(t, time.Minute)
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
	if err := commitOffset(ctx, cl, txnID, pid, epoch, group, topic, offset); err != nil {
		t.Fatalf("transactional offset commit: %v", err)
	}
}

// commitOffset has producer pid (of txnID, at epoch) commit offset for
// the topic's partition 0 in group, in its transaction.
func commitOffset(ctx context.Context, cl *kgo.Client, txnID string, pid int64, epoch int16, group, topic string, offset int64) error {
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = txnID, group, pid, epoch, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, offset, -1
	ct.Partitions = append(ct.Partitions, cp)
	tc.Topics = append(tc.Topics, ct)
	resp, err := tc.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// offsetsPart is the group's partition of __consumer_offsets.
func offsetsPart(t *testing.T, m *markers) int32 {
	t.Helper()
	part, err := m.offsetsPartition(testkit.Ctx(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return part
}

// openAt is the transaction of producer pid open on the group's offsets
// partition, failing t when there is none.
func openAt(t *testing.T, m *markers, pid int64) kadm.DescribedProducer {
	t.Helper()
	open, err := m.openOn(testkit.Ctx(t, time.Minute), offsetsPart(t, m))
	if err != nil {
		t.Fatal(err)
	}
	pr, ok := open[pid]
	if !ok {
		t.Fatalf("no transaction of producer %d open on the group's partition: %+v", pid, open)
	}
	return pr
}

// TestMarkerDecisions: a transaction found open on the group's offsets
// partition is counted at each look in a row that finds it at the same
// offset, and ended with the outcome its coordinator recorded for that
// producer and epoch; one the coordinator ended by moving the producer to
// a later epoch, now settled, is dropped, and for this dispatcher's
// producer only while the coordinator holds the epoch it has.
func TestMarkerDecisions(t *testing.T) {
	open := func(pid, start int64) map[int64]kadm.DescribedProducer {
		return map[int64]kadm.DescribedProducer{pid: {ProducerID: pid, CurrentTxnStartOffset: start}}
	}
	seen := track(nil, open(7, 100))
	seen = track(seen, open(7, 100))
	if seen[7].looks != 2 {
		t.Fatalf("open at the same offset twice: %d looks, want 2", seen[7].looks)
	}
	if seen = track(seen, open(7, 140)); seen[7].looks != 1 {
		t.Fatalf("open at another offset: %d looks, want 1 (a new transaction)", seen[7].looks)
	}
	if seen = track(seen, open(8, 140)); len(seen) != 1 || seen[8].looks != 1 {
		t.Fatalf("a producer no longer open is forgotten: %+v", seen)
	}

	at := kadm.DescribedProducer{ProducerID: 7, ProducerEpoch: 3, CurrentTxnStartOffset: 100}
	for _, c := range []struct {
		name    string
		d       kadm.DescribedTransaction
		epoch   int16 // of this dispatcher's producer now
		want    verdict
		wantOwn verdict
	}{
		{"aborted", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "CompleteAbort"}, 3, aborted, aborted},
		{"committed", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "CompleteCommit"}, 3, committed, committed},
		{"under way", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "Ongoing"}, 3, underWay, underWay},
		{"being committed", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "PrepareCommit"}, 3, underWay, underWay},
		{"another producer now", kadm.DescribedTransaction{ProducerID: 9, ProducerEpoch: 3, State: "CompleteCommit"}, 3, underWay, underWay},
		{"an older epoch", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 2, State: "CompleteCommit"}, 3, underWay, underWay},
		{"initialized again", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "Empty"}, 4, dropped, dropped},
		{"initialized again, committed since", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "CompleteCommit"}, 4, dropped, dropped},
		{"initialized again, under way", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "Ongoing"}, 4, underWay, underWay},
		{"initialized again by another process", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 5, State: "Empty"}, 4, dropped, underWay},
		{"timed out, aborted", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "CompleteAbort"}, 3, dropped, underWay},
		{"timed out, being aborted", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "PrepareAbort"}, 3, underWay, underWay},
	} {
		if got := outcome(at, c.d); got != c.want {
			t.Errorf("%s: outcome = %d, want %d", c.name, got, c.want)
		}
		if got := ownOutcome(at, c.d, c.epoch); got != c.wantOwn {
			t.Errorf("%s: ownOutcome = %d, want %d", c.name, got, c.wantOwn)
		}
	}
}

// TestLostMarkersOnApacheKafka: on a real broker, the states a broker
// restart left dispatchers' transactions in (ADR 0045), made by writing
// past the coordinator with the brokers' partition verification off.
//
//   - Committed for its coordinator, its markers on none of its partitions:
//     ended again, the marker settles the group's offsets and closes the
//     records left open on a deliveries partition (their read-committed
//     end moves past them); fails with only the offsets partition ended.
//   - Aborted by its coordinator's timeout, which moved the producer to the
//     next epoch, its marker on neither the group's offsets partition nor
//     a deliveries partition: aborted on the offsets at that epoch, the
//     offsets dropped; then, open on the deliveries partition alone,
//     committed there (fails without either).
//   - Aborted, its marker lost on a deliveries partition alone: committed
//     there, whatever the coordinator holds.
//   - Ending one goes on when its context ends (a shutdown).
func TestLostMarkersOnApacheKafka(t *testing.T) {
	brokers, ok := testkit.ApacheKafka(t)
	if !ok {
		t.Skip("describes producers and transactions, which kfake does not: runs with WEBHOOKS_TEST_KAFKA=apache")
	}
	ns := testkit.Namespace(t)
	group, events, deliveries, other := ns+"dispatcher", ns+"events", ns+"deliveries", ns+"other"
	cl, err := kgo.NewClient(append(kafka.TransactionsV1(), kgo.SeedBrokers(brokers...))...) // as the dispatcher's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx := testkit.Ctx(t, 3*time.Minute)
	for _, topic := range []string{events, deliveries, other} {
		if _, err := adm.CreateTopic(ctx, 4, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	m := &markers{cl: cl, adm: adm, group: group, writes: []string{deliveries, ns + "dlq"}, log: testkit.Logger(t),
		mu: &sync.Mutex{}, repaired: func() {}}
	stable := func() (int64, error) { return stableOffset(ctx, cl, group, events) }
	lso := func(p int32) int64 {
		listed, err := adm.ListCommittedOffsets(ctx, deliveries)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := listed.Lookup(deliveries, p)
		return o.Offset
	}
	// closed looks until the records written on deliveries partition p
	// (two, then the marker) are readable by read-committed consumers.
	closed := func(p int32) {
		testkit.WaitFor(t, 2*time.Minute, fmt.Sprintf("deliveries partition %d's records committed", p), func() bool {
			if err := m.check(ctx); err != nil {
				t.Logf("check: %v", err)
			}
			return lso(p) == 3
		})
	}

	// Committed, no marker anywhere.
	id := txnIDPrefix + ns + "committed"
	pcl, pid, epoch := producer(t, brokers, id, time.Minute)
	withoutVerification(t, adm, func() error {
		if err := commitOffset(ctx, pcl, id, pid, epoch, group, events, 7); err != nil {
			return err
		}
		return writePast(ctx, pcl, id, pid, epoch, deliveries, 0)
	})
	inOther(t, pcl, id, pid, epoch, other)
	endTxn(t, pcl, id, pid, epoch, true)
	if _, err := stable(); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("a stable fetch with the marker lost: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	if got := lso(0); got != 0 {
		t.Fatalf("the deliveries partition's read-committed end with the marker lost: %d, want 0", got)
	}
	lookUntilEnded(t, m, pid)
	testkit.WaitFor(t, time.Minute, "the group's offsets settled by the commit", func() bool {
		got, err := stable()
		return err == nil && got == 7
	})
	testkit.WaitFor(t, time.Minute, "the deliveries partition's records committed", func() bool { return lso(0) == 3 })

	// Aborted by its timeout, the producer at the next epoch; no marker on
	// the group's offsets partition nor on deliveries partition 1.
	id = txnIDPrefix + ns + "timed-out"
	pcl, pid, epoch = producer(t, brokers, id, time.Second)
	withoutVerification(t, adm, func() error {
		if err := commitOffset(ctx, pcl, id, pid, epoch, group, events, 9); err != nil {
			return err
		}
		return writePast(ctx, pcl, id, pid, epoch, deliveries, 1)
	})
	inOther(t, pcl, id, pid, epoch, other)
	testkit.WaitFor(t, time.Minute, "the coordinator's timeout abort", func() bool {
		d, err := m.describe(ctx, id)
		return err == nil && d.State == "CompleteAbort" && d.ProducerEpoch == epoch+1
	})
	if _, err := stable(); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("a stable fetch after the timeout, its marker lost: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	lookUntilEnded(t, m, pid)
	testkit.WaitFor(t, time.Minute, "the group's offsets settled by the abort", func() bool {
		got, err := stable()
		return err == nil && got == 7
	})
	closed(1)

	// Aborted, its offsets' marker written, deliveries partition 2's lost.
	id = txnIDPrefix + ns + "aborted"
	pcl, pid, epoch = producer(t, brokers, id, time.Minute)
	holdOffsets(t, pcl, id, pid, epoch, group, events, 11)
	withoutVerification(t, adm, func() error { return writePast(ctx, pcl, id, pid, epoch, deliveries, 2) })
	endTxn(t, pcl, id, pid, epoch, false)
	testkit.WaitFor(t, time.Minute, "the group's offsets settled by the abort's own marker", func() bool {
		got, err := stable()
		return err == nil && got == 7
	})
	if got := lso(2); got != 0 {
		t.Fatalf("deliveries partition 2's read-committed end with the marker lost: %d, want 0", got)
	}
	closed(2)

	// Ended as a shutdown would find it between its requests, its
	// context done: ended all the same, not left to the coordinator's
	// timeout, whose abort would drop records that had committed.
	id = txnIDPrefix + ns + "shutdown"
	pcl, pid, epoch = producer(t, brokers, id, time.Minute)
	holdOffsets(t, pcl, id, pid, epoch, group, events, 13)
	withoutVerification(t, adm, func() error { return writePast(ctx, pcl, id, pid, epoch, deliveries, 3) })
	endTxn(t, pcl, id, pid, epoch, true)
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.end(done, id, pid, epoch, true, map[string][]int32{deliveries: {3}}, false); err != nil {
		t.Fatalf("ending with the context done: %v", err)
	}
	testkit.WaitFor(t, time.Minute, "deliveries partition 3's records committed", func() bool { return lso(3) == 3 })
}

// producer is a transactional client of txnID, initialized, with its
// producer id and epoch.
func producer(t *testing.T, brokers []string, txnID string, timeout time.Duration) (*kgo.Client, int64, int16) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafka.TransactionsV1(), kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID), kgo.TransactionTimeout(timeout))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	pid, epoch, err := cl.ProducerID(testkit.Ctx(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return cl, pid, epoch
}

// withoutVerification turns the brokers' partition verification off for
// the time write takes, so that a producer may write past its coordinator
// as brokers before KIP-890 allowed: the coordinator writes no marker
// where it was not told, as it wrote none after the restart. write is
// tried until the brokers apply the change (refused until then,
// TRANSACTION_ABORTABLE).
func withoutVerification(t *testing.T, adm *kadm.Client, write func() error) {
	t.Helper()
	const verification = "transaction.partition.verification.enable"
	off := "false"
	if _, err := adm.AlterBrokerConfigs(testkit.Ctx(t, time.Minute), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: verification, Value: &off}}); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if _, err := adm.AlterBrokerConfigs(testkit.Ctx(t, time.Minute), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: verification}}); err != nil {
			t.Errorf("restoring %s: %v", verification, err)
		}
	}
	t.Cleanup(restore)
	testkit.WaitFor(t, time.Minute, "written past the coordinator", func() bool { return write() == nil })
	restore()
}

// writePast has producer pid write two records to the topic's partition p
// in its transaction, without telling its coordinator.
func writePast(ctx context.Context, cl *kgo.Client, txnID string, pid int64, epoch int16, topic string, p int32) error {
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, txnBatch(pid, epoch, "first", "second")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// txnBatch is a transactional record batch of values, the first of
// producer pid at epoch on its partition.
func txnBatch(pid int64, epoch int16, values ...string) []byte {
	var records []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the rest, after a one-byte zero length
		records = r.AppendTo(records)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, Attributes: 0x10, LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, NumRecords: int32(len(values)), Records: records}
	b.Length = int32(len(b.AppendTo(nil)) - 12) // after the first offset and the length
	out := b.AppendTo(nil)
	crc := crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)) // from the attributes on
	out[17], out[18], out[19], out[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return out
}

// inOther adds a partition of topic to the producer's transaction, as its
// coordinator knows it: the one partition it writes a marker on.
func inOther(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16, topic string) {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testkit.Ctx(t, time.Minute), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(partitionsAdded(resp)); err != nil {
		t.Fatalf("add partitions: %v", err)
	}
}

// endTxn ends the producer's transaction as commit says.
func endTxn(t *testing.T, cl *kgo.Client, txnID string, pid int64, epoch int16, commit bool) {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
	resp, err := req.RequestWith(testkit.Ctx(t, time.Minute), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("end: %v", err)
	}
}

// lookUntilEnded has m check until the transaction of producer pid
// (another dispatcher's) is no longer open on the group's offsets
// partition, and no longer tracked.
func lookUntilEnded(t *testing.T, m *markers, pid int64) {
	t.Helper()
	part := offsetsPart(t, m)
	testkit.WaitFor(t, 2*time.Minute, "the transaction ended again", func() bool {
		ctx := testkit.Ctx(t, time.Minute)
		if err := m.check(ctx); err != nil {
			t.Logf("check: %v", err)
		}
		open, err := m.openOn(ctx, part)
		_, tracked := m.seen[pid]
		return err == nil && open[pid].ProducerID != pid && !tracked
	})
}

// stableOffset is the group's committed offset of the topic's partition
// 0, fetched as franz-go's group consumers do (require_stable).
func stableOffset(ctx context.Context, cl *kgo.Client, group, topic string) (int64, error) {
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
