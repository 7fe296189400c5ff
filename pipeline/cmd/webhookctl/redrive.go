package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// redriveReason is the reason of every redrive marker.
const redriveReason = "redriven by webhookctl"

// redriveSummary is what dlq redrive did, or with --dry-run would do; it
// is the JSON shape of its output.
type redriveSummary struct {
	DryRun bool `json:"dry_run"`
	// ToRedrive counts the matching dead letters that have a delivery and
	// were not redriven before.
	ToRedrive int `json:"to_redrive"`
	// Redriven counts those sent back (0 with --dry-run).
	Redriven int `json:"redriven"`
	// AlreadyRedriven counts matching dead letters skipped because a
	// redrive marker points at them.
	AlreadyRedriven int `json:"already_redriven"`
	// Undecodable counts matching dead letters skipped because they hold
	// no delivery (an event or record that could not be decoded).
	Undecodable int `json:"undecodable"`
	// DeadLetters are the ones to redrive, oldest first; redriven is true
	// for those sent back.
	DeadLetters []*deadLetter `json:"dead_letters"`
}

func redriveCmd(fs *flag.FlagSet) runFunc {
	var f dlqFilter
	f.define(fs)
	perSecond := defineRate(fs, 50, "dead letters redriven")
	dryRun := fs.Bool("dry-run", false, "list what would be redriven; produce nothing")
	return func(ctx context.Context, c *cli, _ []string) error {
		p, err := newPace(*perSecond)
		if err != nil {
			return err
		}
		if err := f.resolve(time.Now()); err != nil {
			return err
		}
		k, err := c.connect(ctx)
		if err != nil {
			return err
		}
		defer k.close()
		var tx *kgo.Client
		if !*dryRun {
			// Before reading the dlq: see redriver.
			if tx, err = k.redriver(ctx); err != nil {
				return err
			}
			defer tx.Close()
		}
		found, err := k.readDLQ(ctx, &f)
		if err != nil {
			return err
		}
		sum := redriveSummary{DryRun: *dryRun, DeadLetters: []*deadLetter{}}
		for _, e := range found {
			switch {
			case e.Redriven:
				sum.AlreadyRedriven++
			case e.DeadLetter.Delivery == nil:
				sum.Undecodable++
			default:
				sum.DeadLetters = append(sum.DeadLetters, e)
			}
		}
		sum.ToRedrive = len(sum.DeadLetters)
		if !*dryRun {
			if err := c.redrive(ctx, k, tx, p, sum.DeadLetters); err != nil {
				return err
			}
			sum.Redriven = sum.ToRedrive
		}
		return c.printRedrive(&sum)
	}
}

// redriver returns the transactional producer of dlq redrive, ready.
//
// Its transactional id is fixed per dlq topic, and it is initialised before
// the dlq is read: that fences any other redrive still running (its open
// transaction is aborted, it can commit nothing more) and waits until what
// that one committed is readable, so two redrives, even concurrent ones,
// never both redrive one dead letter. It also ends at once a transaction
// left open by a redrive that died, instead of holding back read-committed
// consumers of the deliveries and dlq topics for the transaction timeout.
func (k *kafka) redriver(ctx context.Context) (*kgo.Client, error) {
	// Not bound to ctx (no kgo.WithContext): an interrupted redrive must
	// still be able to abort its transaction.
	tx, err := kgo.NewClient(append(k.conn[:len(k.conn):len(k.conn)],
		kgo.ProducerLinger(0),
		kgo.TransactionalID("webhookctl-redrive-"+k.names.DLQ()),
		kgo.RecordPartitioner(topics.Partitioner()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if _, _, err := tx.ProducerID(ctx); err != nil {
		tx.Close()
		return nil, fmt.Errorf("start the transactional producer: %w", err)
	}
	return tx, nil
}

// redrive sends dls back in transactions of up to p.batch dead letters,
// paced by p.
func (c *cli) redrive(ctx context.Context, k *kafka, tx *kgo.Client, p *pace, dls []*deadLetter) error {
	var done atomic.Int64
	stop := c.progress(func() string { return fmt.Sprintf("redriven %d of %d", done.Load(), len(dls)) })
	defer stop()
	for batch := range slices.Chunk(dls, p.batch) {
		err := p.wait(ctx, len(batch))
		if err == nil {
			err = k.redriveBatch(ctx, tx, batch)
		}
		if err != nil {
			return fmt.Errorf("redriven %d of %d, then: %w", done.Load(), len(dls), err)
		}
		done.Add(int64(len(batch)))
	}
	return nil
}

// redriveBatch sends each dead letter back to the deliveries topic as the
// first attempt of a new schedule, and writes a marker pointing at it to the
// dlq, all in one transaction: either every dead letter of the batch is
// redriven and marked, or none is.
func (k *kafka) redriveBatch(ctx context.Context, tx *kgo.Client, batch []*deadLetter) error {
	now := time.Now().UTC()
	recs := make([]*kgo.Record, 0, 2*len(batch))
	for _, e := range batch {
		d := *e.DeadLetter.Delivery
		d.Attempt = 1
		d.FirstAttemptAt = time.Time{}
		d.NotBefore = time.Time{}
		marker := topics.DeadLetter{
			Redriven: &topics.Source{Topic: k.names.DLQ(), Partition: e.Partition, Offset: e.Offset},
			Reason:   redriveReason,
			DeadAt:   now,
		}
		key := []byte(e.Key)
		if len(key) == 0 {
			key = []byte(d.SubscriptionID + "/" + d.EventID)
		}
		recs = append(recs,
			&kgo.Record{Topic: k.names.Deliveries(), Key: key, Value: d.Encode()},
			&kgo.Record{Topic: k.names.DLQ(), Key: key, Value: marker.Encode()})
	}
	if err := tx.BeginTransaction(); err != nil {
		return fencedErr(fmt.Errorf("begin transaction: %w", err))
	}
	if err := tx.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		abort(tx)
		return fencedErr(topicErr(k.names.Deliveries(), fmt.Errorf("produce: %w", err)))
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		abort(tx)
		return fencedErr(fmt.Errorf("commit: %w", err))
	}
	for _, e := range batch {
		e.Redriven = true
	}
	return nil
}

// abort ends the open transaction without committing it, even when the
// command's context is done.
func abort(tx *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if tx.AbortBufferedRecords(ctx) == nil {
		// On failure the broker aborts it after the transaction timeout,
		// or the next redrive does at once.
		_ = tx.EndTransaction(ctx, kgo.TryAbort)
	}
}

// fencedErr explains the error of a redrive that another one fenced.
func fencedErr(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("another dlq redrive started and took over: %w", err)
	}
	return err
}

func (c *cli) printRedrive(s *redriveSummary) error {
	if c.output == outputJSON {
		return c.printJSON(s)
	}
	skipped := fmt.Sprintf("skipped already-redriven %d, skipped undecodable %d", s.AlreadyRedriven, s.Undecodable)
	if !s.DryRun {
		fmt.Fprintf(c.stdout, "redriven %d, %s\n", s.Redriven, skipped)
		return nil
	}
	if s.ToRedrive > 0 {
		if err := c.printDeadLetters(s.DeadLetters, false); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout)
	}
	fmt.Fprintf(c.stdout, "would redrive %d, %s (dry run: nothing produced)\n", s.ToRedrive, skipped)
	return nil
}
