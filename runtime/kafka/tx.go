package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Tx is a transactional producer that commits batches of records: every
// record of a batch is written, or none is.
type Tx struct {
	cl *kgo.Client
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
	all := append(conn[:len(conn):len(conn)], kgo.ProducerLinger(0), kgo.TransactionalID(id))
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("start the transactional producer %s: %w", id, err)
	}
	return &Tx{cl: cl}, nil
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
	if err := t.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
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
