// Package dispatcher fans events out to deliveries: it consumes the events
// topic in a consumer group and, for every event, produces one delivery per
// matching subscription, inside one Kafka transaction with the consumed
// offsets, so a crash never duplicates or drops a delivery record. Events
// that cannot be decoded go to the dead-letter topic in the same
// transaction, and operational events are copied to the notices topic in
// it (for the alerter).
package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// maxBatchEvents bounds the events of one transaction, so a backlog is
// dispatched in transactions of bounded size and duration.
const maxBatchEvents = 1000

// retryWait is the pause before retrying after a failure that repeats at
// once otherwise (brokers unreachable, a record the broker refuses).
const retryWait = time.Second

// subscriptionTable is the part of table.Table the loop needs.
type subscriptionTable interface {
	matcher
	table.Tailed
}

// Run dispatches events until ctx is done, then finishes the transaction in
// progress (for at most cfg.ShutdownTimeout), leaves the group, closes its
// clients and returns nil. It returns an error when the brokers or topics
// are not ready within cfg.Kafka.StartupTimeout, or when the transactional
// producer fails beyond recovery (for example, fenced by another dispatcher
// with the same transactional id).
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("dispatcher config: %w", err)
	}
	log = log.Named("dispatcher")
	reg := ops.NewRegistry()
	m := newMetrics(reg)
	srv, err := ops.Start(ctx, cfg.HTTPAddr, reg, log, ops.WithPprof(cfg.Pprof))
	if err != nil {
		return err
	}
	defer srv.Close() // last: metrics and health outlive the shutdown
	base, session := kafkaOpts(cfg, log)

	ready, err := kgo.NewClient(base...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	n := cfg.Kafka.Names
	err = kafka.WaitReady(ctx, ready, cfg.Kafka, append([]string{n.Events(), n.Subscriptions(), n.EventTypes(), n.Deliveries(), n.DLQ(), n.Attempts(), n.Notices()}, n.RetryTopics()...), log)
	ready.Close()
	if err != nil || ctx.Err() != nil {
		return err
	}

	table, err := table.NewTable(base, cfg.Kafka.Names.Subscriptions(), cfg.Secrets, log)
	if err != nil {
		return err
	}
	defer table.Close()
	table.Register(reg)
	cat, err := catalog.New(base, n.EventTypes(), cfg.UnknownEventTypes, log)
	if err != nil {
		return err
	}
	defer cat.Close()
	tableCtx, stopTable := context.WithCancel(ctx)
	var tableDone sync.WaitGroup
	tableDone.Go(func() { table.Run(tableCtx) })
	tableDone.Go(func() { cat.Run(tableCtx) })
	defer tableDone.Wait()
	defer stopTable()

	leaver := kafka.NewLeaver(log)
	sess, err := kgo.NewGroupTransactSession(append(session, ops.KafkaMetrics(reg), leaver.Opt())...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer leaver.Close(sess)
	srv.Watch(sess.Client(), cfg.Group, cfg.Kafka.Names.Events())

	dd, err := newDedup(cfg, log)
	if err != nil {
		return err
	}
	defer dd.close()
	dd.register(reg)
	d := &dispatcher{cfg: cfg, sess: sess, table: table, catalog: cat, m: m, dedup: dd, filters: filter.NewCache(), first: kafka.NewFirstWrites(),
		tracer: tracing.For(ctx, "github.com/hookpipe/hookpipe/dispatcher"),
		log:    log.With(zap.String("transactional_id", cfg.TransactionalID))}
	d.log.Info("dispatching", zap.String("events", cfg.Kafka.Names.Events()),
		zap.String("deliveries", cfg.Kafka.Names.Deliveries()), zap.String("group", cfg.Group))
	mk := &markers{cl: sess.Client(), adm: kadm.NewClient(sess.Client()), txnID: cfg.TransactionalID, group: cfg.Group,
		writes: append(append(n.DeliveryTopics(), n.DLQ(), n.Attempts(), n.Notices()), n.RetryTopics()...),
		log:    d.log, mu: &d.txMu, repaired: m.repaired}
	var repairs sync.WaitGroup
	mctx, stopMarkers := context.WithCancel(ctx)
	repairs.Go(func() { mk.run(mctx) })
	defer repairs.Wait()
	defer stopMarkers()
	err = d.run(ctx)
	d.log.Info("stopping")
	return err
}

// kafkaOpts builds every client option of the dispatcher: base connects
// (and is what the subscription table gets), session is the transactional
// group consumer.
func kafkaOpts(cfg Config, log *zap.Logger) (base, session []kgo.Opt) {
	base = append(cfg.Kafka.ClientOpts(), // brokers, TLS, SASL
		kafka.Logger(log),
	)
	// Stable offset fetches (KIP-447) need no option: franz-go always
	// requires them, so a new owner of a partition waits for a crashed
	// owner's open transaction to end before reading its offsets.
	session = append(base[:len(base):len(base)],
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Kafka.Names.Events()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A partition whose offsets load while a fetch is in flight (after
		// a rebalance) joins only the next fetch: a short long-poll (1s by
		// default) bounds that wait, at the cost of one empty fetch per
		// FetchMaxWait when idle.
		kgo.FetchMinBytes(cfg.FetchMinBytes),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		kgo.RecordPartitioner(topics.Partitioner()),
	)
	session = append(session, kafka.TransactionsV1()...)
	if cfg.Kafka.SessionTimeout > 0 {
		session = append(session, kgo.SessionTimeout(cfg.Kafka.SessionTimeout),
			kgo.HeartbeatInterval(max(cfg.Kafka.SessionTimeout/10, 100*time.Millisecond)))
	}
	return base, session
}

type dispatcher struct {
	cfg     Config
	sess    *kgo.GroupTransactSession
	table   subscriptionTable
	catalog *catalog.Catalog
	log     *zap.Logger
	m       *metrics
	dedup   *dedup // nil without Redis
	filters *filter.Cache
	tracer  tracing.Tracer
	// txMu is held through each transaction (see markers).
	txMu sync.Mutex
	// first waits, before a transaction ends, for the partitions of the
	// topics it wrote first (kafka.FirstWrites).
	first *kafka.FirstWrites
	// rewound is set by a transaction that did not commit: the
	// positions must come from the broker before the next poll (resume);
	// unconfirmed by one whose end failed, which may have committed.
	rewound, unconfirmed bool
}

// run is the poll loop. Work on a polled batch runs under a context that
// outlives ctx by cfg.ShutdownTimeout, so a shutdown commits the batch in
// progress instead of leaving its transaction to time out.
func (d *dispatcher) run(ctx context.Context) error {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(d.cfg.ShutdownTimeout, cancelWork) })
	defer stop()

	for {
		fs := d.sess.PollRecords(ctx, maxBatchEvents)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			d.log.Warn("fetching events", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
		})
		if fs.NumRecords() == 0 {
			continue
		}
		// Match against every subscription, and judge by every event
		// type, written before these events were polled, so an event
		// produced after a subscription was created is matched against
		// it, and one redriven after its schema was relaxed is judged by
		// the new schema.
		if !d.catchUp(ctx) {
			return nil
		}
		d.txMu.Lock()
		err := d.transact(ctx, work, fs)
		d.txMu.Unlock()
		if err != nil {
			return err
		}
		if d.rewound && !d.resume(ctx) {
			return nil
		}
	}
}

// catchUp waits for the subscription table and the catalog (one listing
// of both topics' end offsets), retrying on errors; false means ctx is
// done. The polled batch is kept meanwhile: dropping it would let a later
// commit skip its events.
func (d *dispatcher) catchUp(ctx context.Context) bool {
	return d.persist(ctx, "subscription table not caught up", func() error {
		return table.WaitAllCaughtUp(ctx, d.table, d.catalog)
	})
}

// persist runs fn until it succeeds (true) or ctx is done (false), logging
// each failure as what and pausing retryWait before the next try.
func (d *dispatcher) persist(ctx context.Context, what string, fn func() error) bool {
	for {
		err := fn()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d.log.Warn(what+"; retrying", zap.Error(err))
		select {
		case <-time.After(retryWait):
		case <-ctx.Done():
			return false
		}
	}
}

// resume sets the session's positions to the offsets the broker holds
// committed for the group, read stable, after a transaction that did not
// commit; false means ctx is done. The session rewinds itself to the
// offsets it last saw committed, which is wrong when the commit's outcome
// was unconfirmed (its EndTxn sent, the answer lost with the connection or
// UNKNOWN_SERVER_ERROR): franz-go then reports no commit, but the
// coordinator may have committed it, and its events would be dispatched a
// second time. After an end that failed the producer is initialized again
// first (franz-go would at its next write), which ends such a transaction
// at the coordinator: committed if its commit arrived, aborted if not; the
// stable offsets then say which (ADR 0046). Otherwise they wait for the
// transaction's timeout where it is still open.
func (d *dispatcher) resume(ctx context.Context) bool {
	cl := d.sess.Client()
	adm := kadm.NewClient(cl)
	if !d.persist(ctx, "reading the group's committed offsets after a transaction that did not commit", func() error {
		// Only after an end that failed: a producer initialized again
		// when it had nothing more to write could take its transactional
		// id back from the process that fenced it. An error here (a fenced
		// producer) surfaces at the next begin, as it did before.
		if d.unconfirmed {
			d.txMu.Lock()
			if _, _, err := cl.ProducerID(ctx); err != nil {
				d.log.Debug("initializing the producer again", zap.Error(err))
			}
			d.txMu.Unlock()
		}
		committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), d.cfg.Group)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return err
		}
		at := map[string]map[int32]kgo.EpochOffset{}
		committed.Each(func(o kadm.OffsetResponse) {
			if at[o.Topic] == nil {
				at[o.Topic] = map[int32]kgo.EpochOffset{}
			}
			at[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: o.LeaderEpoch, Offset: o.At}
		})
		cl.SetOffsets(at)
		return nil
	}) {
		return false
	}
	d.rewound, d.unconfirmed = false, false
	return true
}

// transact dispatches one polled batch in one transaction. It returns an
// error only when the transactional producer cannot go on. When the
// transaction does not commit, the session rewinds to the committed
// offsets and the batch is polled and dispatched again, here or by the
// partition's new owner.
func (d *dispatcher) transact(ctx, work context.Context, fs kgo.Fetches) error {
	if err := d.sess.Begin(); err != nil {
		return fmt.Errorf("begin transaction of %s: %w", d.cfg.TransactionalID, err)
	}
	var (
		pending    sync.WaitGroup
		mu         sync.Mutex
		produceErr error
	)
	promise := func(r *kgo.Record, err error) {
		defer pending.Done()
		if err != nil {
			mu.Lock()
			if produceErr == nil {
				produceErr = fmt.Errorf("produce to %s: %w", r.Topic, err)
			}
			mu.Unlock()
		}
	}
	now := time.Now()
	batch := judgeAll(fs, d.catalog, d.cfg.MaxEventBytes)
	dups := d.dedup.duplicates(work, batch)
	var deliveries, filterErrors int
	var dead dead
	validated := validationCounts{}
	filterFailed := func(sub *topics.Subscription, err error) {
		filterErrors++
		d.log.Debug("filter failed on an event: not matched", zap.String("subscription", sub.ID), zap.Error(err))
	}
	for i := range batch {
		p := &batch[i]
		r := p.r
		if dups[r] {
			continue // its idempotency key was used by another event (dedup.go)
		}
		validated.add(p)
		tctx, span := d.tracer.Start(d.tracer.Extract(work, r.Headers), tracing.SpanFanOut, trace.SpanKindConsumer)
		out, refused := fanOut(tctx, p, d.table, d.filters, d.cfg.Kafka.Names, now, filterFailed)
		span.End()
		if refused != nil {
			dead.add(p)
			d.log.Warn("dead-lettering an event", zap.String("topic", r.Topic),
				zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(refused))
		} else {
			for _, o := range out {
				if o.Topic != d.cfg.Kafka.Names.Attempts() { // a scheduled delivery's attempt record
					deliveries++
				}
			}
		}
		if n := noticeCopy(p, d.cfg.Kafka.Names); n != nil {
			out = append(out, n)
		}
		for _, o := range out {
			pending.Add(1)
			d.first.Note(o)
			d.sess.Produce(work, o, promise)
		}
	}
	if err := d.sess.Client().Flush(work); err != nil {
		d.log.Warn("shutdown timeout: abandoning the open transaction to the broker's transaction timeout")
		return nil
	}
	// Flush does not wait for records refused before buffering (too large,
	// say); their promises still come, and a commit must not race them.
	pending.Wait()
	if err := d.first.Wait(work, d.sess.Client()); err != nil {
		d.log.Warn("ending the transaction without the producer's partitions of a topic it wrote first", zap.Error(err))
	}

	end := kgo.TryCommit
	if produceErr != nil {
		d.log.Warn("aborting the transaction; its events will be dispatched again", zap.Error(produceErr))
		end = kgo.TryAbort
	}
	committed, err := d.sess.End(work, end)
	if err != nil {
		if work.Err() != nil {
			d.log.Warn("shutdown timeout: abandoning the transaction to the broker's transaction timeout", zap.Error(err))
			return nil
		}
		d.log.Warn("ending the transaction failed; aborting it, its events will be dispatched again", zap.Error(err))
		d.unconfirmed = true
		if _, err := d.sess.End(work, kgo.TryAbort); err != nil && work.Err() == nil {
			return fmt.Errorf("abort transaction of %s: %w", d.cfg.TransactionalID, err)
		}
	}
	d.rewound = !committed
	d.m.transaction(committed, len(batch), deliveries, dead, filterErrors, time.Since(now))
	if committed {
		d.m.validated(validated)
		d.dedup.countSchema(work, now, validated)
	}
	switch {
	case committed:
		d.log.Debug("dispatched", zap.Int("events", len(batch)), zap.Int("deliveries", deliveries), zap.Int("dead_letters", dead.invalid+dead.schema))
	case err == nil && end == kgo.TryCommit:
		d.log.Info("transaction aborted by a rebalance; its events will be dispatched again")
	default:
		// Pause before the batch is polled again, so a failure that
		// repeats (a record the broker keeps refusing) does not spin.
		select {
		case <-time.After(retryWait):
		case <-ctx.Done():
		}
	}
	return nil
}
