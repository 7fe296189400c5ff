package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// markers finds and ends a transaction of a dispatcher that its
// transaction coordinator has completed but whose marker never reached the
// group's offsets partition (ADR 0045). Apache Kafka 4.4 leaves one so
// after a broker restart: the group's offsets stay pending, every offset
// fetch answers UNSTABLE_OFFSET_COMMIT, and the group dispatches nothing
// until a marker of that producer lands there. Ending an empty transaction
// of the producer that holds the group's offsets partition writes one,
// with the outcome the coordinator recorded.
//
// It ends transactions of this dispatcher's producer, and of dispatchers
// gone since (their transactional ids have the default prefix, and no one
// else ends them: a restarted dispatcher has a new id). The same
// transaction left open on the partitions the dispatchers write (their
// last stable offset held at its first record, so read-committed consumers
// wait there for ever) is ended there too, when its coordinator recorded
// how it ended; one left open there alone (stranded) is committed.
type markers struct {
	cl    *kgo.Client
	adm   *kadm.Client
	txnID string
	group string
	// writes are the topics the dispatchers' transactions write.
	writes []string
	log    *zap.Logger
	// mu is held by every transaction of the dispatcher: none begins
	// while markers ends one of its producer.
	mu *sync.Mutex
	// seen holds the transactions open on the group's offsets partition
	// at the last check, by producer id; strands those open on the
	// partitions the dispatchers write.
	seen    map[int64]openTxn
	strands map[strandKey]openTxn
	// repaired counts the transactions ended.
	repaired func()
}

// openTxn is a transaction found open on the group's offsets partition.
type openTxn struct {
	kadm.DescribedProducer
	looks int // checks in a row that found it open at the same offset
}

// markerCheck is how often markers looks: a marker on its way takes
// milliseconds, so a transaction found open at ownLooks checks in a row
// while its coordinator calls it complete has lost its marker. Another
// dispatcher's transaction waits a look more, so that a dispatcher still
// running ends its own.
const (
	markerCheck = 10 * time.Second
	ownLooks    = 2
	otherLooks  = 3
)

// run checks every markerCheck until ctx is done.
func (m *markers) run(ctx context.Context) {
	t := time.NewTicker(markerCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, markerCheck)
		if err := m.check(cctx); err != nil && ctx.Err() == nil {
			m.log.Debug("checking the transaction markers of the group's offsets", zap.Error(err))
		}
		cancel()
	}
}

// check looks once, and ends the transactions left open long enough.
func (m *markers) check(ctx context.Context) error {
	part, err := m.offsetsPartition(ctx)
	if err != nil {
		return err
	}
	open, err := m.openOn(ctx, part)
	if err != nil {
		return err
	}
	m.seen = track(m.seen, open)
	pid, _, err := m.producer(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for id, o := range m.seen {
		switch {
		case id == pid && o.looks >= ownLooks:
			errs = append(errs, m.endOwn(ctx, part, o))
		case id != pid && o.looks >= otherLooks:
			errs = append(errs, m.endOther(ctx, part, o))
		}
	}
	return errors.Join(append(errs, m.checkWritten(ctx, open, pid))...)
}

// strandKey is a producer on a partition.
type strandKey struct {
	topic     string
	partition int32
	producer  int64
}

// checkWritten looks at the partitions the dispatchers write, and commits
// the transactions left open there long enough by producers not open on
// the group's offsets partition (onOffsets), whose coordinators hold them
// ended: their markers were lost there alone. The outcome is commit
// whatever the coordinator holds, which loses nothing: had the transaction
// aborted, its offsets were not committed and its events were dispatched
// again, so its records are duplicates, where an abort of records that
// had committed would lose them. The coordinator's outcome is not enough
// to abort them on: it is the producer's last transaction's, which is this
// one only if that last one wrote here too.
func (m *markers) checkWritten(ctx context.Context, onOffsets map[int64]kadm.DescribedProducer, pid int64) error {
	written, err := m.openWritten(ctx)
	if err != nil {
		return err
	}
	next := make(map[strandKey]openTxn, len(written))
	due := map[int64][]openTxn{}
	for k, pr := range written {
		o := openTxn{DescribedProducer: pr, looks: 1}
		if prev, ok := m.strands[k]; ok && prev.CurrentTxnStartOffset == pr.CurrentTxnStartOffset {
			o.looks = prev.looks + 1
		}
		next[k] = o
		if _, also := onOffsets[k.producer]; also {
			continue // ended there first, and here with it
		}
		if k.producer == pid && o.looks >= ownLooks || k.producer != pid && o.looks >= otherLooks {
			due[k.producer] = append(due[k.producer], o)
		}
	}
	m.strands = next
	var errs []error
	for producer, open := range due {
		errs = append(errs, m.endStranded(ctx, producer == pid, open))
	}
	return errors.Join(errs...)
}

// endStranded commits the transaction of one producer left open on the
// partitions open lists (this dispatcher's own when own), once its
// coordinator holds it ended and the partitions, looked at again, still
// hold it open.
func (m *markers) endStranded(ctx context.Context, own bool, open []openTxn) error {
	pid, epoch := open[0].ProducerID, open[0].ProducerEpoch
	id := m.txnID
	if own {
		m.mu.Lock()
		defer m.mu.Unlock()
		if now, _, err := m.cl.ProducerID(ctx); err != nil || now != pid {
			return err
		}
	} else {
		var err error
		if id, err = m.txnIDOf(ctx, pid); id == "" || err != nil {
			return err
		}
	}
	d, err := m.describe(ctx, id)
	if err != nil {
		return err
	}
	settled := d.State == "Empty" || d.State == "CompleteCommit" || d.State == "CompleteAbort"
	if d.ProducerID != pid || d.ProducerEpoch < epoch || !settled {
		return nil // under way, or not provably this producer's
	}
	if own {
		if _, now, err := m.cl.ProducerID(ctx); err != nil || now != d.ProducerEpoch {
			return err // initialized again by another process of the same id
		}
	}
	again, err := m.openWritten(ctx)
	if err != nil {
		return err
	}
	parts := map[string][]int32{}
	for _, o := range open {
		k := strandKey{o.Topic, o.Partition, pid}
		if pr, ok := again[k]; ok && pr.CurrentTxnStartOffset == o.CurrentTxnStartOffset {
			parts[o.Topic] = append(parts[o.Topic], o.Partition)
		}
		delete(m.strands, k)
	}
	if len(parts) == 0 {
		return nil
	}
	if err := m.end(ctx, id, pid, d.ProducerEpoch, true, parts, false); err != nil {
		return fmt.Errorf("committing the transaction left open on the partitions the dispatchers write: %w", err)
	}
	m.repaired()
	m.log.Warn("a transaction its coordinator had ended was still open on partitions the dispatchers write, "+
		"where read-committed consumers wait at its first record; committed it there (records of an aborted one are delivered again, never lost)",
		zap.String("of_transactional_id", id), zap.Int64("producer_id", pid), zap.Int16("producer_epoch", epoch),
		zap.String("coordinator_state", d.State), zap.Any("partitions", parts))
	return nil
}

// txnIDOf is the transactional id of a dispatcher's producer pid (with the
// default prefix); "" for a producer of another id.
func (m *markers) txnIDOf(ctx context.Context, pid int64) (string, error) {
	listed, err := m.adm.ListTransactions(ctx, []int64{pid}, nil)
	if err != nil {
		return "", err
	}
	for id, l := range listed {
		if l.ProducerID == pid && strings.HasPrefix(id, txnIDPrefix) {
			return id, nil
		}
	}
	return "", nil
}

// openWritten describes the transactions open on the partitions of the
// topics the dispatchers write, by partition and producer.
func (m *markers) openWritten(ctx context.Context) (map[strandKey]kadm.DescribedProducer, error) {
	open := map[strandKey]kadm.DescribedProducer{}
	if len(m.writes) == 0 {
		return open, nil // listing no topics would list them all
	}
	listed, err := m.adm.ListTopics(ctx, m.writes...)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, t := range listed {
		if t.Err == nil {
			set.Add(t.Topic, t.Partitions.Numbers()...)
		}
	}
	described, err := m.adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	for _, p := range described.SortedPartitions() {
		if p.Err != nil {
			return nil, fmt.Errorf("describing the producers of %s/%d: %w", p.Topic, p.Partition, p.Err)
		}
		for _, pr := range p.ActiveProducers {
			if pr.CurrentTxnStartOffset >= 0 {
				open[strandKey{p.Topic, p.Partition, pr.ProducerID}] = pr
			}
		}
	}
	return open, nil
}

// track is what seen becomes after a check found open: each transaction
// open, with the checks in a row that found it open at the same offset.
func track(seen map[int64]openTxn, open map[int64]kadm.DescribedProducer) map[int64]openTxn {
	next := make(map[int64]openTxn, len(open))
	for id, pr := range open {
		o := openTxn{DescribedProducer: pr, looks: 1}
		if prev, ok := seen[id]; ok && prev.CurrentTxnStartOffset == pr.CurrentTxnStartOffset {
			o.looks = prev.looks + 1
		}
		next[id] = o
	}
	return next
}

// producer is this dispatcher's producer id and epoch, read with no
// transaction of its own under way: reading them may initialize the
// producer, which must not happen in the middle of one.
func (m *markers) producer(ctx context.Context) (int64, int16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cl.ProducerID(ctx)
}

// endOwn ends a transaction of this dispatcher's producer left open on the
// group's offsets partition.
func (m *markers) endOwn(ctx context.Context, part int32, o openTxn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The producer's epoch now, and the partition again, with no
	// transaction of ours under way: one may have ended since, with its
	// marker, or initialized the producer again.
	pid, epoch, err := m.cl.ProducerID(ctx)
	if err != nil || pid != o.ProducerID {
		return err
	}
	d, err := m.describe(ctx, m.txnID)
	if err != nil {
		return err
	}
	v := ownOutcome(o.DescribedProducer, d, epoch)
	if v == underWay {
		return nil // the coordinator is still at it
	}
	if still, err := m.stillOpen(ctx, part, o); !still || err != nil {
		return err
	}
	parts, err := m.alsoOpen(ctx, o, v)
	if err != nil {
		return err
	}
	return m.ended(o, d.State, parts, m.end(ctx, m.txnID, o.ProducerID, epoch, v == committed, parts, true))
}

// stillOpen looks at the partition again after the coordinator was
// described: a coordinator holds a transaction complete only once its
// markers are written, so the transaction still open at the same offset
// after that has lost its marker, where one open before it may only have
// had its marker on the way. Closed since, it is no longer tracked.
func (m *markers) stillOpen(ctx context.Context, part int32, o openTxn) (bool, error) {
	open, err := m.openOn(ctx, part)
	if err != nil {
		return false, err
	}
	if again, ok := open[o.ProducerID]; !ok || again.CurrentTxnStartOffset != o.CurrentTxnStartOffset {
		delete(m.seen, o.ProducerID)
		return false, nil
	}
	return true, nil
}

// endOther ends the transaction of another dispatcher's producer left open
// on the group's offsets partition, when its coordinator holds it
// complete.
func (m *markers) endOther(ctx context.Context, part int32, o openTxn) error {
	id, err := m.txnIDOf(ctx, o.ProducerID)
	if id == "" || err != nil {
		return err
	}
	d, err := m.describe(ctx, id)
	if err != nil {
		return err
	}
	v := outcome(o.DescribedProducer, d)
	if v == underWay {
		return nil
	}
	if still, err := m.stillOpen(ctx, part, o); !still || err != nil {
		return err
	}
	parts, err := m.alsoOpen(ctx, o, v)
	if err != nil {
		return err
	}
	// As the producer is now: at the transaction's epoch, or at the
	// later one its coordinator moved to when it ended it.
	err = m.end(ctx, id, o.ProducerID, d.ProducerEpoch, v == committed, parts, true)
	if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		m.log.Error("a transaction the coordinator completed is still open on the group's offsets partition, "+
			"and the dispatcher may not end it (no WRITE on its transactional id): the group's partitions it holds dispatch nothing "+
			"until an operator ends it with kafka-transactions.sh abort (operations.md)",
			zap.String("of_transactional_id", id), zap.Int64("producer_id", o.ProducerID),
			zap.String("partition", fmt.Sprintf("%s-%d", offsetsTopic, o.Partition)), zap.Int64("open_since_offset", o.CurrentTxnStartOffset))
	}
	return m.ended(o, d.State, parts, err, zap.String("of_transactional_id", id))
}

// ended records a transaction ended by end, which returned err, on the
// group's offsets partition and on parts.
func (m *markers) ended(o openTxn, state string, parts map[string][]int32, err error, fields ...zap.Field) error {
	if err != nil {
		return fmt.Errorf("ending the transaction left open on the group's offsets: %w", err)
	}
	delete(m.seen, o.ProducerID)
	m.repaired()
	m.log.Warn("a transaction the coordinator completed was still open on the group's offsets partition; wrote its marker again",
		append(fields, zap.Int64("producer_id", o.ProducerID), zap.Int64("open_since_offset", o.CurrentTxnStartOffset),
			zap.String("coordinator_state", state), zap.Any("also_on", parts))...)
	return nil
}

// verdict is how a transaction found open ended, by its coordinator.
type verdict int8

const (
	// underWay: not ended yet, or not provably this transaction.
	underWay verdict = iota
	// committed and aborted: the outcome the coordinator recorded.
	committed
	aborted
	// dropped: ended, its outcome no longer kept. The coordinator moved the
	// producer to a later epoch (a timeout or an initialization ends the
	// transaction under way first) and has nothing under way. Ending it
	// as an abort is safe on the group's offsets partition only: offsets
	// dropped are events dispatched again, where records aborted after a
	// commit would be deliveries lost.
	dropped
)

// outcome is how the transaction open on the partition ended, by its
// coordinator d. Under the first transaction protocol, which dispatchers
// use, every transaction of a producer has the same epoch, so the outcome
// recorded at the open transaction's epoch is that of the producer's last
// transaction: a dispatcher's every transaction writes to the group's
// offsets partition, and the marker of a later one would have closed the
// one still open there, so that last one is it.
func outcome(open kadm.DescribedProducer, d kadm.DescribedTransaction) verdict {
	if d.ProducerID != open.ProducerID {
		return underWay
	}
	switch {
	case d.ProducerEpoch == open.ProducerEpoch && d.State == "CompleteCommit":
		return committed
	case d.ProducerEpoch == open.ProducerEpoch && d.State == "CompleteAbort":
		return aborted
	case d.ProducerEpoch > open.ProducerEpoch && (d.State == "Empty" || d.State == "CompleteCommit" || d.State == "CompleteAbort"):
		return dropped
	}
	return underWay
}

// ownOutcome is outcome for a transaction of this dispatcher's producer,
// now at epoch. One dropped (the process restarted with the same
// WEBHOOKS_DISPATCHER_TXN_ID, or the producer was fenced) is ended only
// while the coordinator holds the producer at the epoch it has now: at
// another, a process of the same id has initialized it since, and ends
// it itself.
func ownOutcome(open kadm.DescribedProducer, d kadm.DescribedTransaction, epoch int16) verdict {
	v := outcome(open, d)
	if v == dropped && d.ProducerEpoch != epoch {
		return underWay
	}
	return v
}

// alsoOpen is where else than on the group's offsets partition the
// transaction o ended as v is open: the partitions the dispatchers write
// where its producer, at its epoch, has one open, which are ended with it
// when the outcome is the one its coordinator recorded. Those of a
// transaction dropped are not: its offsets are aborted, which loses
// nothing, where its records may have committed; checkWritten commits
// them once the producer is no longer open on the offsets partition.
func (m *markers) alsoOpen(ctx context.Context, o openTxn, v verdict) (map[string][]int32, error) {
	if v == dropped {
		return nil, nil
	}
	written, err := m.openWritten(ctx)
	if err != nil {
		return nil, err
	}
	parts := map[string][]int32{}
	for k, pr := range written {
		if k.producer == o.ProducerID && pr.ProducerEpoch == o.ProducerEpoch {
			parts[k.topic] = append(parts[k.topic], k.partition)
		}
	}
	return parts, nil
}

// openOn describes the transactions open on the group's offsets
// partition part, by producer id.
func (m *markers) openOn(ctx context.Context, part int32) (map[int64]kadm.DescribedProducer, error) {
	set := kadm.TopicsSet{}
	set.Add(offsetsTopic, part)
	described, err := m.adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	p, ok := described[offsetsTopic].Partitions[part]
	if !ok {
		return nil, fmt.Errorf("no answer for %s/%d", offsetsTopic, part)
	}
	if p.Err != nil {
		return nil, p.Err
	}
	open := map[int64]kadm.DescribedProducer{}
	for _, pr := range p.ActiveProducers {
		if pr.CurrentTxnStartOffset >= 0 {
			open[pr.ProducerID] = pr
		}
	}
	return open, nil
}

// offsetsTopic holds the consumer groups' offsets.
const offsetsTopic = "__consumer_offsets"

// offsetsPartition is the partition of offsetsTopic holding the group's
// offsets, as the brokers place it.
func (m *markers) offsetsPartition(ctx context.Context) (int32, error) {
	td, err := m.adm.ListTopicsWithInternal(ctx, offsetsTopic)
	if err != nil {
		return 0, err
	}
	t, ok := td[offsetsTopic]
	if !ok || t.Err != nil || len(t.Partitions) == 0 {
		return 0, fmt.Errorf("%s not described: %v", offsetsTopic, t.Err)
	}
	return groupPartition(m.group, len(t.Partitions)), nil
}

// groupPartition is Kafka's placement of a group's offsets among n
// partitions: the absolute value of the Java hash code of its id, modulo n.
func groupPartition(group string, n int) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(c)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(n)
}

// describe is what the transaction coordinator holds for the
// transactional id.
func (m *markers) describe(ctx context.Context, txnID string) (kadm.DescribedTransaction, error) {
	described, err := m.adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		return kadm.DescribedTransaction{}, err
	}
	d, ok := described[txnID]
	if !ok {
		return kadm.DescribedTransaction{}, errors.New("the transaction coordinator did not describe it")
	}
	return d, d.Err
}

// end adds parts, and with offsets the group's offsets partition, to a
// transaction of the producer (txnID, pid, epoch) and ends that
// transaction as commit says: the coordinator writes a marker on each,
// which settles the offsets left pending and closes the records left open.
// A coordinator still busy with the producer (CONCURRENT_TRANSACTIONS) is
// asked again, for endBound at most.
//
// Once begun, it ignores ctx's end: a transaction begun and not ended is
// aborted by its coordinator's timeout, and an abort would drop records
// left open that had committed, whose offsets are the group's. So a
// shutdown waits for it (Run waits for the markers' goroutine); only a
// crash between its requests leaves that to the timeout (ADR 0045).
func (m *markers) end(ctx context.Context, txnID string, pid int64, epoch int16, commit bool, parts map[string][]int32, offsets bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endBound)
	defer cancel()
	if len(parts) > 0 {
		addp := kmsg.NewPtrAddPartitionsToTxnRequest()
		addp.TransactionalID, addp.ProducerID, addp.ProducerEpoch = txnID, pid, epoch
		for topic, ps := range parts {
			t := kmsg.NewAddPartitionsToTxnRequestTopic()
			t.Topic, t.Partitions = topic, ps
			addp.Topics = append(addp.Topics, t)
		}
		if err := retryBusy(ctx, func() (int16, error) {
			resp, err := addp.RequestWith(ctx, m.cl)
			if err != nil {
				return 0, err
			}
			return partitionsAdded(resp), nil
		}); err != nil {
			return fmt.Errorf("add partitions: %w", err)
		}
	}
	if offsets {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, m.group
		if err := retryBusy(ctx, func() (int16, error) {
			resp, err := add.RequestWith(ctx, m.cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, commit
	return retryBusy(ctx, func() (int16, error) {
		resp, err := end.RequestWith(ctx, m.cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
}

// partitionsAdded is the first error code of an AddPartitionsToTxn answer
// (one per partition), 0 for none.
func partitionsAdded(resp *kmsg.AddPartitionsToTxnResponse) int16 {
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// retryBusy sends a request until its answer is not
// CONCURRENT_TRANSACTIONS, or ctx is done.
func retryBusy(ctx context.Context, send func() (int16, error)) error {
	for {
		code, err := send()
		if err != nil {
			return err
		}
		err = kerr.ErrorForCode(code)
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(busyRetry):
		}
	}
}

// busyRetry is the pause before asking a busy coordinator again; endBound
// bounds the requests of end, below the transaction timeouts dispatchers
// set (10 s by default).
const (
	busyRetry = 100 * time.Millisecond
	endBound  = 5 * time.Second
)
