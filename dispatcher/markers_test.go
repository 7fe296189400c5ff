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
	m := &markers{cl: cl, adm: adm, txnID: txnID, group: group, log: testkit.Logger(t), mu: &sync.Mutex{},
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

		if err := m.end(ctx, txnID, pid, epoch, commit); err != nil {
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
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(otherID), kafka.TransactionsV1())
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
	if err := m.end(ctx, otherID, opid, oepoch, false); err != nil {
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
// offset, and ended only with the outcome its coordinator holds for that
// producer and epoch; one of this dispatcher's producer opened before the
// producer was initialized again is aborted once its coordinator has
// settled.
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
		name          string
		d             kadm.DescribedTransaction
		epoch         int16 // of this dispatcher's producer now
		commit, ok    bool
		own, ownCommt bool
	}{
		{"aborted", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "CompleteAbort"}, 3, false, true, true, false},
		{"committed", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "CompleteCommit"}, 3, true, true, true, true},
		{"under way", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "Ongoing"}, 3, false, false, false, false},
		{"being committed", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "PrepareCommit"}, 3, false, false, false, false},
		{"another producer now", kadm.DescribedTransaction{ProducerID: 9, ProducerEpoch: 3, State: "CompleteCommit"}, 3, false, false, false, false},
		{"initialized again", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "Empty"}, 4, false, false, true, false},
		{"initialized again, committed since", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "CompleteCommit"}, 4, false, false, true, false},
		{"initialized again, under way", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "Ongoing"}, 4, false, false, false, false},
		{"initialized again by another process", kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 5, State: "Empty"}, 4, false, false, false, false},
	} {
		if commit, ok := outcome(at, c.d); commit != c.commit || ok != c.ok {
			t.Errorf("%s: outcome = %v, %v; want %v, %v", c.name, commit, ok, c.commit, c.ok)
		}
		if commit, ok := ownOutcome(at, c.d, c.epoch); commit != c.ownCommt || ok != c.own {
			t.Errorf("%s: ownOutcome = %v, %v; want %v, %v", c.name, commit, ok, c.ownCommt, c.own)
		}
	}
}
