// Package oprunner carries out the API's bulk operations (redrives,
// replays, recovers) on the one replica the consumer group elects: each
// batch of deliveries in a transaction with the operation's progress, so a
// new runner resumes where the last committed batch left it.
package oprunner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/runtime/dlq"
	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// Options are what a Runner reads and writes with.
type Options struct {
	Kafka kafka.Config
	// Group is the consumer group electing the runner.
	Group string
	// Client reads the topics' offsets (the API's producer).
	Client *kgo.Client
	// Operations and Subscriptions are running tables (Run).
	Operations    *table.OpTable
	Subscriptions *table.Table
	// ClickHouse is where a recover finds the failed events and every
	// operation the expunged ones; nil: no recovers, nothing expunged.
	ClickHouse retention.Conn
	Database   string
	Log        *zap.Logger
}

// Runner carries out the bulk operations.
type Runner struct {
	kafka    kafka.Config
	group    string
	names    topics.Names
	cl       *kgo.Client
	ops      *table.OpTable
	subs     *table.Table
	ch       retention.Conn
	database string
	log      *zap.Logger
}

// New builds a Runner; Run runs it.
func New(o Options) *Runner {
	return &Runner{kafka: o.Kafka, group: o.Group, names: o.Kafka.Names, cl: o.Client, ops: o.Operations, subs: o.Subscriptions,
		ch: o.ClickHouse, database: o.Database, log: o.Log}
}

// Run carries out the bulk operations until ctx is done. Every
// replica runs it; the consumer group Options.Group on the one-partition
// operations topic makes one of them, the one assigned the partition, the
// runner. The runner writes each operation's progress in the transaction
// of the records it produced, with a transactional id it takes over from
// any earlier runner (fencing it), so an operation resumes after a restart
// or a new assignment where the last committed batch left it: nothing
// sent twice, nothing lost.
func (rn *Runner) Run(ctx context.Context) error {
	var (
		mu   sync.Mutex
		stop func()
	)
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			stop()
			stop = nil
		}
	}
	assigned := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		if len(m[rn.names.Operations()]) == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			return
		}
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			rn.lead(lctx)
		}()
		stop = func() { cancel(); <-done }
	}
	revoked := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		if len(m[rn.names.Operations()]) > 0 {
			release()
		}
	}
	leaver := kafka.NewLeaver(rn.log)
	cl, err := kgo.NewClient(append(rn.kafka.ClientOpts(),
		leaver.Opt(),
		kgo.ConsumerGroup(rn.group),
		kgo.ConsumeTopics(rn.names.Operations()),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(assigned),
		kgo.OnPartitionsRevoked(revoked),
		kgo.OnPartitionsLost(revoked),
	)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer release()
	defer leaver.Close(cl)
	// The records are not used (the operations table holds the state): the
	// group only elects the runner.
	for ctx.Err() == nil {
		cl.PollFetches(ctx)
	}
	return nil
}

// lead runs the unfinished operations, oldest first, until ctx is done.
func (rn *Runner) lead(ctx context.Context) {
	rn.log.Info("running the bulk operations")
	defer rn.log.Info("no longer running the bulk operations")
	for {
		all, changed := rn.ops.All()
		i := slices.IndexFunc(all, func(o topics.Operation) bool { return !o.Finished() })
		if i < 0 {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		err := rn.runOperation(ctx, all[i].ID)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			continue
		case errors.Is(err, kafka.ErrFenced):
			// webhookctl dlq redrive took the dlq's transactional id: the
			// operation resumes after it.
			rn.log.Warn("operation interrupted; resuming it", zap.String("operation", all[i].ID), zap.Error(err))
		default:
			// Marked failed, or, when even that could not be written, tried
			// again.
			rn.log.Error("operation failed", zap.String("operation", all[i].ID), zap.Error(err))
		}
		// Not at once: Kafka may be down.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// runOperation carries out operation id from where its last record left
// it. It returns once the operation is finished and the table shows it.
func (rn *Runner) runOperation(ctx context.Context, id string) error {
	var (
		run    func(*opRun) error
		commit func(*kgo.Record) error
	)
	switch o, _ := rn.ops.Get(id); o.Kind {
	case topics.OperationRedrive:
		rd, err := dlq.NewRedriver(ctx, rn.kafka.ClientOpts(), rn.names, "redriven by the API, operation "+id)
		if err != nil {
			return err
		}
		defer rd.Close()
		run = func(r *opRun) error { return rn.redrive(ctx, r, rd) }
		commit = func(rec *kgo.Record) error { return rd.Batch(ctx, nil, rec) }
	default:
		tx, err := kafka.NewTx(ctx, rn.kafka.ClientOpts(), "webhooks-api-"+rn.names.Operations(), kgo.RecordPartitioner(topics.Partitioner()))
		if err != nil {
			return err
		}
		defer tx.Close()
		run = func(r *opRun) error { return rn.replay(ctx, r, tx) }
		if o.Kind == topics.OperationRecover {
			run = func(r *opRun) error { return rn.recoverFailed(ctx, r, tx) }
		}
		commit = func(rec *kgo.Record) error { return tx.Commit(ctx, rec) }
	}
	// The producer above fenced any earlier runner: what that one committed
	// is readable now, and the table shows the operation as it left it.
	if err := rn.ops.WaitCaughtUp(ctx); err != nil {
		return err
	}
	o, ok := rn.ops.Get(id)
	if !ok || o.Finished() {
		return nil
	}
	r := &opRun{o: o, topic: rn.names.Operations(), batch: int(min(math.Ceil(o.Rate), 100))}
	r.lim = rate.NewLimiter(rate.Limit(o.Rate), r.batch)
	err := run(r)
	if err != nil && ctx.Err() == nil && !errors.Is(err, kafka.ErrFenced) {
		r.o.State, r.o.Error = topics.OperationFailed, err.Error()
		if cerr := commit(r.progress(false)); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	if err != nil {
		return err
	}
	return rn.ops.WaitCaughtUp(ctx)
}

// opRun is an operation being carried out.
type opRun struct {
	o     topics.Operation
	topic string
	// batch is how many deliveries one transaction carries at most: about
	// a second's worth at the operation's rate.
	batch int
	lim   *rate.Limiter
}

// wait returns when n more deliveries may go.
func (r *opRun) wait(ctx context.Context, n int) error { return r.lim.WaitN(ctx, n) }

// progress is the operation's record as it stands, done when last.
func (r *opRun) progress(last bool) *kgo.Record {
	if r.o.State != topics.OperationFailed {
		r.o.State = topics.OperationRunning
	}
	if last {
		r.o.State, r.o.Done = topics.OperationDone, r.o.Matched
	}
	r.o.UpdatedAt = time.Now().UTC()
	return &kgo.Record{Topic: r.topic, Key: []byte(r.o.ID), Value: r.o.Encode()}
}

// redrive sends back the operation's dead letters that no redrive sent
// back yet, each batch in a transaction with the progress.
func (rn *Runner) redrive(ctx context.Context, r *opRun, rd *dlq.Redriver) error {
	o := &r.o
	f := dlq.Filter{Subscription: o.Subscription, Type: o.EventType, Category: o.Category, Tenant: o.Tenant, Since: o.Since, Until: o.Until}
	found, err := dlq.Read(ctx, rn.kafka.ClientOpts(), kadm.NewClient(rn.cl), rn.names, &f)
	if err != nil {
		return fmt.Errorf("reading the dead letters: %w", err)
	}
	if len(o.DeadLetters) > 0 {
		found = slices.DeleteFunc(found, func(e *dlq.Entry) bool {
			return !slices.Contains(o.DeadLetters, topics.Position{Partition: e.Partition, Offset: e.Offset})
		})
	}
	todo, already, undecodable := dlq.ToRedrive(found)
	expunged, err := rn.expungedAmong(ctx, eventIDs(todo))
	if err != nil {
		return err
	}
	n := len(todo)
	todo = slices.DeleteFunc(todo, func(e *dlq.Entry) bool { return expunged[eventID(e)] })
	already += n - len(todo)
	if o.State == topics.OperationPending {
		o.Matched, o.Skipped, o.Failed = len(found), already, undecodable
	}
	// When resumed, what it sent before is marked redriven, and in Sent.
	o.Done = o.Skipped + o.Failed + o.Sent
	for batch := range slices.Chunk(todo, r.batch) {
		if err := r.wait(ctx, len(batch)); err != nil {
			return err
		}
		o.Done += len(batch)
		o.Sent += len(batch)
		if err := rd.Batch(ctx, batch, r.progress(o.Done >= o.Matched)); err != nil {
			return err
		}
	}
	if len(todo) == 0 {
		return rd.Batch(ctx, nil, r.progress(true))
	}
	return nil
}

// replay reads the events of the operation's time range from where it
// left off and sends those its subscription takes as new deliveries, each
// batch in a transaction with the progress (the offsets read so far).
func (rn *Runner) replay(ctx context.Context, r *opRun, tx *kafka.Tx) error {
	o := &r.o
	sub, err := rn.operationSubscription(o)
	if err != nil {
		return err
	}
	if o.State == topics.OperationPending {
		if err := rn.startWindow(ctx, o, o.Since, o.Until); err != nil {
			return err
		}
	}
	expunged, err := rn.expungedSince(ctx, o.Since)
	if err != nil {
		return err
	}
	filters := filter.NewCache()
	return rn.sendEvents(ctx, r, tx, sub, func(ev *topics.Event) bool {
		// As the dispatcher matches: types, tenant, filter.
		ok, _ := filters.Matches(sub, filter.NewInput(ev))
		return ok && (o.EventType == "" || topics.MatchType(o.EventType, ev.Type)) && !expunged[ev.ID]
	})
}

// operationSubscription is the subscription an operation sends to, which
// must still exist and be enabled.
func (rn *Runner) operationSubscription(o *topics.Operation) (*topics.Subscription, error) {
	sub, ok := rn.subs.Get(o.Subscription)
	switch {
	case !ok:
		return nil, fmt.Errorf("subscription %s was deleted", o.Subscription)
	case !sub.Enabled:
		return nil, fmt.Errorf("subscription %s was disabled", o.Subscription)
	}
	return sub, nil
}

// startWindow sets a pending operation's window of the events topic: the
// offsets of the records published from since to until, and how many.
func (rn *Runner) startWindow(ctx context.Context, o *topics.Operation, since, until time.Time) error {
	w, err := kafka.ReadWindow(ctx, kadm.NewClient(rn.cl), rn.names.Events(), since, until)
	if err != nil {
		return fmt.Errorf("reading the events: %w", err)
	}
	o.Next, o.Stop, o.Matched = w.Start, w.Stop, 0
	for p, stop := range w.Stop {
		o.Matched += int(max(0, stop-w.Start[p]))
	}
	return nil
}

// sendEvents reads the operation's window of the events topic from where
// it left off and sends the events take keeps to sub as new deliveries,
// each batch in a transaction with the progress (the offsets read so far).
func (rn *Runner) sendEvents(ctx context.Context, r *opRun, tx *kafka.Tx, sub *topics.Subscription, take func(*topics.Event) bool) error {
	o := &r.o
	var (
		batch   []*kgo.Record
		pending int // records read since the last commit
	)
	flush := func(last bool) error {
		if err := r.wait(ctx, len(batch)); err != nil {
			return err
		}
		if err := tx.Commit(ctx, append(batch, r.progress(last))...); err != nil {
			return err
		}
		batch, pending = batch[:0], 0
		return nil
	}
	w := kafka.Window{Topic: rn.names.Events(), Start: o.Next, Stop: o.Stop}
	err := kafka.Scan(ctx, rn.kafka.ClientOpts(), w, func(rec *kgo.Record) error {
		o.Done++
		o.Next[rec.Partition] = rec.Offset + 1
		pending++
		ev, err := topics.DecodeEvent(rec.Value, topics.DefaultMaxEventBytes)
		switch {
		case err != nil:
			o.Failed++
		case !take(&ev):
			o.Skipped++
		default:
			o.Sent++
			batch = append(batch, topics.DeliveryRecord(rec, &ev, sub, rn.names))
		}
		if len(batch) >= r.batch || pending >= 1000 {
			return flush(false)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush(true)
}
