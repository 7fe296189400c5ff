package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// markers finds and ends a transaction of this dispatcher that its
// transaction coordinator has completed but whose marker never reached the
// group's offsets partition (ADR 0045). Apache Kafka 4.4 leaves one so
// after a broker restart: the group's offsets stay pending, every offset
// fetch answers UNSTABLE_OFFSET_COMMIT, and the group dispatches nothing
// until a marker of this producer lands there. Ending an empty transaction
// of the producer that holds the group's offsets partition writes one,
// with the outcome the coordinator recorded.
type markers struct {
	cl    *kgo.Client
	adm   *kadm.Client
	txnID string
	group string
	log   *zap.Logger
	// mu is held by every transaction of the dispatcher: none begins
	// while markers ends one.
	mu *sync.Mutex
	// seen is the start offset of the transaction of this producer the
	// last check found open on the group's offsets partition, -1 for none.
	seen int64
	// repaired counts the transactions ended.
	repaired func()
}

// markerCheck is how often markers looks: a transaction found open at two
// checks in a row, while its coordinator calls it complete, is repaired;
// a marker on its way takes milliseconds.
const markerCheck = 10 * time.Second

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

// check looks once, and repairs a transaction left open twice in a row.
func (m *markers) check(ctx context.Context) error {
	pid, epoch, err := m.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	start, err := m.openAt(ctx, pid)
	if err != nil {
		return err
	}
	if start < 0 || start != m.seen {
		m.seen = start
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Again with no transaction of ours under way: one may have ended
	// since, with its marker.
	if start, err = m.openAt(ctx, pid); err != nil || start != m.seen {
		m.seen = start
		return err
	}
	state, err := m.coordinatorState(ctx)
	if err != nil {
		return err
	}
	var commit bool
	switch state {
	case "CompleteCommit":
		commit = true
	case "CompleteAbort":
	default:
		return nil // the coordinator is still at it
	}
	if err := m.end(ctx, pid, epoch, commit); err != nil {
		return fmt.Errorf("ending the transaction left open on the group's offsets: %w", err)
	}
	m.seen = -1
	m.repaired()
	m.log.Warn("a transaction the coordinator completed was still open on the group's offsets partition; wrote its marker again",
		zap.Int64("producer_id", pid), zap.Int64("open_since_offset", start), zap.String("coordinator_state", state))
	return nil
}

// openAt is the offset at which a transaction of producer pid opened on
// the group's offsets partition, -1 when none is open there.
func (m *markers) openAt(ctx context.Context, pid int64) (int64, error) {
	part, err := m.offsetsPartition(ctx)
	if err != nil {
		return -1, err
	}
	set := kadm.TopicsSet{}
	set.Add(offsetsTopic, part)
	described, err := m.adm.DescribeProducers(ctx, set)
	if err != nil {
		return -1, err
	}
	p, ok := described[offsetsTopic].Partitions[part]
	if !ok {
		return -1, fmt.Errorf("no answer for %s/%d", offsetsTopic, part)
	}
	if p.Err != nil {
		return -1, p.Err
	}
	for _, pr := range p.ActiveProducers.Sorted() {
		if pr.ProducerID == pid && pr.CurrentTxnStartOffset >= 0 {
			return pr.CurrentTxnStartOffset, nil
		}
	}
	return -1, nil
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

// coordinatorState is the state the transaction coordinator holds for this
// dispatcher's transactional id.
func (m *markers) coordinatorState(ctx context.Context) (string, error) {
	described, err := m.adm.DescribeTransactions(ctx, m.txnID)
	if err != nil {
		return "", err
	}
	d, ok := described[m.txnID]
	if !ok {
		return "", errors.New("the transaction coordinator did not describe it")
	}
	return d.State, d.Err
}

// end adds the group's offsets partition to a transaction of the producer
// and ends that transaction as commit says: the coordinator writes a
// marker there, which settles the offsets left pending. A coordinator
// still busy with the producer (CONCURRENT_TRANSACTIONS) is asked again
// until ctx is done.
func (m *markers) end(ctx context.Context, pid int64, epoch int16, commit bool) error {
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = m.txnID, pid, epoch, m.group
	if err := retryBusy(ctx, func() (int16, error) {
		resp, err := add.RequestWith(ctx, m.cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	}); err != nil {
		return fmt.Errorf("add offsets: %w", err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = m.txnID, pid, epoch, commit
	return retryBusy(ctx, func() (int16, error) {
		resp, err := end.RequestWith(ctx, m.cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
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

// busyRetry is the pause before asking a busy coordinator again.
const busyRetry = 100 * time.Millisecond
