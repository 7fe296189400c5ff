package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TransactionsV1 keeps a transactional client on the first transaction
// protocol (KIP-98, with the brokers' verification of KIP-890 part 1)
// where the brokers offer the second (transaction.version 2, the default
// of Kafka 4): the requests that would switch it (Produce v12, EndTxn v5,
// TxnOffsetCommit v5) are capped below, so franz-go adds partitions to a
// transaction itself and keeps the producer epoch across transactions.
//
// Why (docs/adr/0043-transactions-v1.md): on Apache Kafka 4.4.0 under the
// second protocol, a broker SIGKILLed after acknowledging a commit and
// before writing its markers had let the producer's next transaction
// append to the same partitions first; after the restart the committed
// transaction's markers never landed, the next transaction's abort marker
// aborted both, and the committed offsets stayed unstable, stalling the
// consumer group. Under the first protocol the next transaction cannot add
// a partition before the previous one completed.
//
// That refusal (CONCURRENT_TRANSACTIONS, while the coordinator writes the
// previous transaction's markers, about 2 ms) is asked again after
// concurrentTxnBackoff rather than franz-go's 20 ms, which every
// transaction begun at once after a commit paid (ADR 0043, amended).
func TransactionsV1() []kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	v.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 4)
	return []kgo.Opt{kgo.MaxVersions(v), kgo.ConcurrentTransactionsBackoff(concurrentTxnBackoff)}
}

// concurrentTxnBackoff is the first wait before adding partitions to a
// transaction again when the coordinator is still completing the previous
// one; franz-go lengthens it (to 200 ms after a second, up to 1 s) while
// the refusals last.
const concurrentTxnBackoff = time.Millisecond

// Tx is a transactional producer that commits batches of records: every
// record of a batch is written, or none is.
type Tx struct {
	cl    *kgo.Client
	first *FirstWrites
}

// NewTx returns a transactional producer with the transactional id id,
// initialised: that fences any producer still running with the same id (its
// open transaction is aborted, it can commit nothing more) and waits until
// what that one committed is readable. So a process that takes over work
// from another one, each committing its progress with the records it
// produces, never repeats or loses what the other one committed.
func NewTx(ctx context.Context, conn []kgo.Opt, id string, opts ...kgo.Opt) (*Tx, error) {
	// Not bound to ctx (no kgo.WithContext): an interrupted batch must
	// still be able to abort its transaction.
	all := append(append(conn[:len(conn):len(conn)], kgo.ProducerLinger(0), kgo.TransactionalID(id)), TransactionsV1()...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("start the transactional producer %s: %w", id, err)
	}
	return &Tx{cl: cl, first: NewFirstWrites()}, nil
}

// Close closes the producer.
func (t *Tx) Close() { t.cl.Close() }

// Commit writes recs in one transaction. On an error nothing of recs is
// committed; an error wrapping ErrFenced means another producer with the
// same id took over.
func (t *Tx) Commit(ctx context.Context, recs ...*kgo.Record) error {
	if err := t.cl.BeginTransaction(); err != nil {
		return fenced(fmt.Errorf("begin transaction: %w", err))
	}
	for _, r := range recs {
		t.first.Note(r)
	}
	err := t.cl.ProduceSync(ctx, recs...).FirstErr()
	if werr := t.first.Wait(ctx, t.cl); err == nil {
		err = werr // ending it now could leave a partition marked added (FirstWrites)
	}
	if err != nil {
		t.abort()
		return fenced(fmt.Errorf("produce: %w", err))
	}
	if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.abort()
		return fenced(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// abort ends the open transaction without committing it, even when the
// caller's context is done.
func (t *Tx) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if t.cl.AbortBufferedRecords(ctx) == nil {
		// On failure the broker aborts it after the transaction timeout,
		// or the next producer with the same id does at once.
		_ = t.cl.EndTransaction(ctx, kgo.TryAbort)
	}
}

// ErrFenced is wrapped by the errors of a producer that another one with
// the same transactional id fenced.
var ErrFenced = errors.New("another producer with the same transactional id took over")

func fenced(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}
