// Package deliverer consumes the deliveries topics (high, normal and low
// priority), and the redeliveries topic where the retrier releases due
// retries, and POSTs each delivery to its subscription's endpoint, signed
// (Standard Webhooks), in order per key, concurrently across keys. Every
// attempt yields an attempt record; failures go to a retry tier or the dlq.
// A record's offset is committed only after everything it caused was
// acknowledged by the broker.
package deliverer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

type deliverer struct {
	cfg     Config
	names   topics.Names
	log     *zap.Logger
	cl      *kgo.Client
	table   *table.Table
	holds   *holds
	tenants *table.TenantTable // the tenants' quota overrides
	parked  *parkedReader      // releases of ordered keys read the parked topic through it
	lanes   *lanes.Lanes
	sender  *send.Sender
	fatal   chan error
	m       *metrics
	prot    *protection // circuit breakers, rate limits, auto-disable; nil without Redis
	tracer  tracing.Tracer
	// alerts are the alert channels: an operational event one of them
	// hears of is published even when no subscription names it.
	alerts *table.AlertTable

	commitMu  sync.Mutex
	wms       *kafka.Watermarks
	unsettled *unsettled // records whose commit is not acknowledged yet
}

// Run delivers until ctx is done, then shuts down in order: stop fetching,
// drop records not started, let running attempts finish (within
// ShutdownTimeout), commit, leave the group.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	log = log.Named("deliverer")
	reg := ops.NewRegistry()
	srv, err := ops.Start(ctx, cfg.HTTPAddr, reg, log, ops.WithPprof(cfg.Pprof))
	if err != nil {
		return err
	}
	defer srv.Close() // last: metrics and health outlive the shutdown
	d := &deliverer{
		m:      newMetrics(reg, cfg.Kafka.Names),
		cfg:    cfg,
		names:  cfg.Kafka.Names,
		log:    log,
		lanes:  newLanes(cfg),
		sender: newSender(cfg),
		fatal:  make(chan error, 1),
		tracer: tracing.For(ctx, "github.com/hookpipe/hookpipe/deliverer"),

		unsettled: newUnsettled(cfg.MaxInFlight),
	}
	if d.prot, err = newProtection(cfg.Protection, cfg.MaxInFlight, log); err != nil {
		return err
	}
	defer d.prot.close()
	registerProtection(reg, d.prot)
	watchUnsettled(reg, d.unsettled)
	base := baseOpts(cfg, log)
	subs, err := table.NewTable(base, d.names.Subscriptions(), cfg.Secrets, log)
	if err != nil {
		return err
	}
	defer subs.Close()
	subs.Register(reg)
	d.table = subs
	tableCtx, stopTable := context.WithCancel(context.Background())
	defer stopTable()
	go subs.Run(tableCtx)
	tenants, err := table.NewTenantTable(base, d.names.Tenants(), log)
	if err != nil {
		return err
	}
	defer tenants.Close()
	d.tenants = tenants
	go tenants.Run(tableCtx)
	alerts, err := table.NewAlertTable(base, d.names.AlertChannels(), cfg.Secrets, log)
	if err != nil {
		return err
	}
	defer alerts.Close()
	d.alerts = alerts
	go alerts.Run(tableCtx)
	holdTable, err := table.NewHoldTable(base, d.names.Holds(), log)
	if err != nil {
		return err
	}
	defer holdTable.Close()
	d.holds = newHolds(holdTable)
	watchHolds(reg, holdTable)
	go holdTable.Run(tableCtx)

	leaver := kafka.NewLeaver(log)
	cl, err := kgo.NewClient(append(d.opts(base), ops.KafkaMetrics(reg), leaver.Opt())...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	d.cl = cl
	d.wms = kafka.NewWatermarks(cl, d.log)
	// Releases read the parked topic through a client of their own. A
	// Fetch sent through the consumer's client goes on its fetch
	// connection, behind the consumer's long-polling fetch, and waits up
	// to fetchMaxWait for it to be answered: per parked delivery a release
	// reads.
	parkedCl, err := kgo.NewClient(base...)
	if err != nil {
		leaver.Close(cl)
		return fmt.Errorf("kafka client for the parked topic: %w", err)
	}
	defer parkedCl.Close()
	d.parked = newParkedReader(parkedCl, d.names.Parked())
	if err := kafka.WaitReady(ctx, cl, cfg.Kafka, d.names.All(), log); err != nil || ctx.Err() != nil {
		leaver.Close(cl)
		return err
	}
	// Deliveries are attempted with the subscriptions as they are now: an
	// older version of one (its URL, secret, enabled flag) may stand in the
	// topic before its latest.
	if !d.persist(ctx, "loading the subscriptions, the tenants' quotas and the alert channels", func() error {
		if err := subs.WaitCaughtUp(ctx); err != nil {
			return err
		}
		if err := tenants.WaitCaughtUp(ctx); err != nil {
			return err
		}
		return alerts.WaitCaughtUp(ctx)
	}) {
		leaver.Close(cl)
		return nil
	}
	srv.Watch(cl, cfg.Group, d.consumed()...)
	log.Info("started", zap.Strings("brokers", cfg.Kafka.Brokers), zap.String("group", cfg.Group),
		zap.Int("max_in_flight", cfg.MaxInFlight), zap.Int("max_per_subscription", cfg.MaxPerSubscription))

	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	var workers sync.WaitGroup
	for i := range cfg.MaxInFlight {
		workers.Go(func() { d.work(workCtx, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))) })
	}
	go d.paceRetries(workCtx)
	commitCtx, stopCommits := context.WithCancel(context.Background())
	var committer sync.WaitGroup
	committer.Go(func() { d.commitLoop(commitCtx) })

	runErr := d.poll(ctx)

	// Shutdown: nothing new starts; running attempts finish and commit.
	cl.PauseFetchTopics(d.consumed()...)
	dropped := d.lanes.HandOffAll() // what started is finished, so nothing is redone
	budget, cancelBudget := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	if err := d.lanes.WaitIdle(budget, nil); err != nil {
		log.Warn("shutdown budget exceeded; abandoning running attempts", zap.Duration("budget", cfg.ShutdownTimeout))
		stopWork()
	}
	cancelBudget()
	dropped += d.lanes.DropAll() // records kept to run that the budget left unstarted
	d.lanes.Close()
	stopWork() // nothing runs: workers waiting for a slot return
	workers.Wait()
	d.sender.Close()
	stopCommits()
	committer.Wait()
	finalCtx, cancelFinal := context.WithTimeout(context.Background(), 10*time.Second)
	_ = d.commit(finalCtx, nil)
	cancelFinal()
	leaver.Close(cl) // leaves the group
	log.Info("stopped", zap.Int("dropped_unstarted", dropped))
	return runErr
}

// newLanes returns the lanes of cfg, the priority classes set by topic; due
// retries share the normal class's turns, paced (paceRetries).
func newLanes(cfg Config) *lanes.Lanes {
	l := lanes.New(cfg.MaxPerSubscription, cfg.MaxQueuedPerSubscription, cfg.MaxBuffered, cfg.Kafka.Names.Tiers[0])
	l.SetClass(cfg.Kafka.Names.DeliveriesHigh(), lanes.High)
	l.SetClass(cfg.Kafka.Names.DeliveriesLow(), lanes.Low)
	l.SetClass(cfg.Kafka.Names.Redeliveries(), lanes.Retry)
	return l
}

func baseOpts(cfg Config, log *zap.Logger) []kgo.Opt {
	opts := append(cfg.Kafka.ClientOpts(), // brokers, TLS, SASL
		kgo.ClientID("webhooks-deliverer"),
		kafka.Logger(log),
	)
	if cfg.dial != nil { // tests only, never with TLS (kgo refuses Dialer with DialTLSConfig)
		opts = append(opts, kgo.Dialer(cfg.dial))
	}
	return opts
}

// opts are the consumer-and-producer options of the main client.
func (d *deliverer) opts(base []kgo.Opt) []kgo.Opt {
	return append(append([]kgo.Opt(nil), base...),
		kgo.ConsumerGroup(d.cfg.Group),
		kgo.ConsumeTopics(d.consumed()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A fetch waits at most this long for records. Resuming the
		// redeliveries topic takes effect with the next fetch, so with
		// the deliveries topic idle this bounds how long due retries wait
		// after their share freed up (with the default 5 s, a storm
		// drained in steps of 5 s).
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes),
		kgo.SessionTimeout(d.cfg.Kafka.SessionTimeout),
		kgo.HeartbeatInterval(max(d.cfg.Kafka.SessionTimeout/10, 100*time.Millisecond)),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// Partition i of every consumed topic goes to one member, so each
		// key's records come to one process (ADR 0027).
		kgo.Balancers(kafka.CopartitionedBalancer(), kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(d.assigned),
		kgo.OnPartitionsRevoked(d.revoked),
		kgo.OnPartitionsLost(d.lost),
		kgo.RecordPartitioner(topics.Partitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
	)
}

// consumed are the topics the deliverer group consumes: fresh deliveries,
// high priority first, and due retries.
func (d *deliverer) consumed() []string {
	return append(d.names.DeliveryTopics(), d.names.Redeliveries())
}

// share bounds the records held from some topics: past pauseAt they are
// paused, until no more than resumeAt are held, and no poll takes them
// past limit.
type share struct {
	topics            []string
	limit             int
	pauseAt, resumeAt int
	paused            bool
}

// shares are the bounds poll keeps. Due retries take at most half of the
// buffer and low-priority deliveries a quarter: past three quarters of
// their share they are paused until down to half of it, so neither a
// storm of due retries nor a low-priority backlog keeps fresh or
// high-priority deliveries from being fetched. (An eighth kept free for
// high-priority deliveries by pausing every other topic cost the fresh
// deliveries of fast endpoints more than half their throughput, pausing
// and refetching all the time: BenchmarkDeployed, ADR 0019.)
func (d *deliverer) shares() []*share {
	mb := d.cfg.MaxBuffered
	capped := func(limit int, topic string) *share {
		limit = max(1, limit)
		return &share{topics: []string{topic}, limit: limit, pauseAt: limit * 3 / 4, resumeAt: limit / 2}
	}
	return []*share{
		capped(mb/2, d.names.Redeliveries()),
		capped(mb/4, d.names.DeliveriesLow()),
	}
}

// bound pauses the topics of the shares past their pause mark and resumes
// those back at their resume mark; a topic stays paused while any share
// pauses it. paused holds the topics paused, and is updated. It returns how
// many records the next poll may take without filling the buffer or taking
// a share past its limit.
func (d *deliverer) bound(shares []*share, paused map[string]bool) int {
	n := d.cfg.MaxBuffered - d.lanes.Buffered()
	now := map[string]bool{}
	for _, s := range shares {
		held := 0
		for _, t := range s.topics {
			held += d.lanes.BufferedIn(t)
		}
		switch {
		case !s.paused && held > s.pauseAt:
			s.paused = true
		case s.paused && held <= s.resumeAt:
			s.paused = false
		}
		if !s.paused {
			n = min(n, s.limit-held)
			continue
		}
		for _, t := range s.topics {
			now[t] = true
		}
	}
	var pause, resume []string
	for _, t := range d.consumed() {
		switch {
		case now[t] && !paused[t]:
			pause = append(pause, t)
		case !now[t] && paused[t]:
			resume = append(resume, t)
		}
	}
	if len(pause) > 0 {
		d.cl.PauseFetchTopics(pause...)
	}
	if len(resume) > 0 {
		d.cl.ResumeFetchTopics(resume...)
	}
	clear(paused)
	maps.Copy(paused, now)
	return max(1, n)
}

// poll feeds the lanes until ctx is done or a worker hit a fatal error.
// When MaxBuffered records are held it stops polling and pauses fetching
// (backpressure) until a quarter of them are done. Below that, the shares
// pause some topics while the others are fetched on: a storm of due
// retries, or a backlog of low-priority deliveries, never stands between
// fresh deliveries and the workers, and high-priority deliveries always
// find room. A fast subscription holding half the buffer has its
// partitions paused until it is down to a quarter (see crowd).
func (d *deliverer) poll(ctx context.Context) error {
	shares := d.shares()
	paused := map[string]bool{}   // topics paused for a share
	var crowded map[lanes.TP]bool // partitions paused for a crowding subscription
	// A fatal error ends polling at once, even while no records arrive
	// (PollRecords blocks until some do) or the buffer is full.
	pctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		select {
		case err := <-d.fatal:
			stop(err)
		case <-pctx.Done():
		}
	}()
	for {
		if n := d.lanes.Buffered(); n >= d.cfg.MaxBuffered {
			d.cl.PauseFetchTopics(d.consumed()...)
			// At least 1: with MaxBuffered 1, 3/4 of it is 0, which
			// Buffered never goes below.
			err := d.lanes.WaitBelow(pctx, max(1, d.cfg.MaxBuffered*3/4))
			for _, t := range d.consumed() {
				if !paused[t] {
					d.cl.ResumeFetchTopics(t)
				}
			}
			if err != nil {
				return fatalCause(ctx, pctx)
			}
		}
		n := d.bound(shares, paused)
		crowded = d.crowd(crowded)
		pollCtx, cancel := pctx, context.CancelFunc(func() {})
		if len(paused) > 0 || len(crowded) > 0 {
			// Nothing else would wake a poll with the other partitions
			// idle when the paused topics' or a crowding subscription's
			// records are worked off.
			pollCtx, cancel = context.WithTimeout(pctx, pausedPoll)
		}
		fs := d.cl.PollRecords(pollCtx, n)
		cancel()
		if pctx.Err() != nil || fs.IsClientClosed() {
			d.cl.AllowRebalance()
			return fatalCause(ctx, pctx)
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) {
				return // the short poll while partitions are paused
			}
			d.log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
		})
		fs.EachRecord(func(r *kgo.Record) {
			d.lanes.Add(r, string(topics.LaneOfKey(r.Key)), d.shape(r.Key))
		})
		d.cl.AllowRebalance()
	}
}

// shape is what the subscription of a delivery key asks of its lane now:
// how many shards it is spread over, its lane in this process getting that
// share of the per-subscription limits (ADR 0020), and its batches (ADR
// 0040). A subscription not in the table (deleted) has the zero shape; its
// deliveries are skipped anyway.
func (d *deliverer) shape(key []byte) lanes.Shape {
	sub, ok := d.table.Get(string(topics.SubscriptionOfKey(key)))
	if !ok {
		return lanes.Shape{}
	}
	s := lanes.Shape{Width: sub.Width()}
	if sub.Batch != nil {
		s.Batch, s.BatchWait = sub.Batch.MaxEvents, sub.Batch.MaxWait()
	}
	return s
}

// crowd pauses fetching the partitions a fast subscription holding half
// the buffer takes its records from (lanes.Crowded), and resumes those
// paused that are no longer crowded. It returns the partitions paused now.
// A burst to one fast endpoint then waits in its partitions instead of
// taking the buffer from every other subscription, or spilling.
func (d *deliverer) crowd(paused map[lanes.TP]bool) map[lanes.TP]bool {
	now := map[lanes.TP]bool{}
	for _, tp := range d.lanes.Crowded() {
		now[tp] = true
	}
	pause, resume := map[string][]int32{}, map[string][]int32{}
	for tp := range now {
		if !paused[tp] {
			pause[tp.Topic] = append(pause[tp.Topic], tp.Partition)
		}
	}
	for tp := range paused {
		if !now[tp] {
			resume[tp.Topic] = append(resume[tp.Topic], tp.Partition)
		}
	}
	if len(pause) > 0 {
		d.cl.PauseFetchPartitions(pause)
		d.log.Debug("paused fetching for a subscription holding half the buffer", zap.Any("partitions", pause))
	}
	if len(resume) > 0 {
		d.cl.ResumeFetchPartitions(resume)
	}
	return now
}

// fetchMaxWait bounds how long a fetch waits for records (see opts).
const fetchMaxWait = 250 * time.Millisecond

// fetchMaxPartitionBytes bounds what one fetch takes of a partition: a few
// hundred deliveries. Pausing a topic for its share drops what was fetched
// of it and not yet polled, and a high-priority record fetched behind that
// waits for it to be read and decoded: with kgo's default of 1 MiB per
// partition, that put the high-priority p99 of BenchmarkPriorities at ten
// times its idle figure, with this at about its idle figure.
const fetchMaxPartitionBytes = 128 << 10

// pausedPoll bounds a poll while a topic is paused for its share, so that
// it is resumed soon after its records are worked off.
const pausedPoll = 50 * time.Millisecond

// fatalCause is the fatal error that ended polling, or nil when shutdown
// (ctx) did.
func fatalCause(ctx, pctx context.Context) error {
	if c := context.Cause(pctx); c != nil && c != context.Cause(ctx) {
		return c
	}
	return nil
}

// work runs records until the lanes close. It takes a slot of the bound on
// unsettled records before it takes a record (or a batch: one request, one
// slot) from the lanes, so that a worker waiting for a slot holds no
// record of a subscription's share (ADR 0029).
func (d *deliverer) work(ctx context.Context, rng *rand.Rand) {
	for {
		if !d.unsettled.take(ctx) {
			return
		}
		d.unsettled.idle.Add(1)
		it, ok := d.lanes.Next()
		d.unsettled.idle.Add(-1)
		if !ok {
			d.unsettled.giveBack()
			return
		}
		handle := d.handle
		if it.Batch != nil {
			handle = d.handleBatch
		}
		handle(ctx, it, rng, func(acked bool) {
			d.lanes.Done(it, acked)
			d.unsettled.finished()
		})
	}
}

// handle does what a delivery record asks and calls done once, with whether
// everything it caused was acknowledged, so that its offset may be
// committed. A plain attempt's records are acknowledged while the worker
// goes on to its next record, and its subscription to its next request
// (lanes.Sent); the other paths wait.
func (d *deliverer) handle(ctx context.Context, it *lanes.Item, rng *rand.Rand, done func(bool)) {
	del, dead := d.decode(ctx, it.Rec)
	if dead != nil {
		done(d.produce(ctx, []*kgo.Record{dead}))
		return
	}
	if del.Key != "" {
		var owned bool
		if ctx, owned = d.withSlot(ctx, it.Rec); !owned {
			done(false) // its partition was revoked or lost: the next owner's
			return
		}
		// A key held while its subscription was ordered stays on the
		// ordered path until released, whatever the ordering is now, so
		// that its parked deliveries are drained, in order.
		sub, found, ok := d.subscription(ctx, del.SubscriptionID)
		if !ok {
			done(false) // shutting down: left for the next owner
			return
		}
		if found && sub.Ordering == topics.OrderingKey || d.held(ctx, it.Rec) {
			done(d.ordered(ctx, it, del, rng))
			return
		}
	}
	if it.Spill {
		done(d.produce(ctx, d.spill(ctx, it.Rec, del, it.Wait)))
		return
	}
	recs, v := d.attempt(ctx, it.Rec, del, rng)
	if v == cut {
		done(false)
		return
	}
	// The request is over: the subscription's next record may go while
	// this one's outcome is acknowledged.
	d.lanes.Sent(it)
	d.produceThen(ctx, recs, done)
}

// produce waits until the broker acknowledged every record. kgo retries
// retriable errors itself, so an error here is fatal (or shutdown).
func (d *deliverer) produce(ctx context.Context, recs []*kgo.Record) bool {
	recs = d.withNotices(recs)
	var err error
	for _, r := range d.cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			err = cmp.Or(err, r.Err)
			continue
		}
		d.m.acked(r.Record)
	}
	if err != nil {
		d.produceFailed(ctx, err)
	}
	return err == nil
}

// produceThen produces recs without waiting and calls done once every one
// was acknowledged (true) or one failed (false; fatal unless shutting down,
// as for produce).
func (d *deliverer) produceThen(ctx context.Context, recs []*kgo.Record, done func(bool)) {
	recs = d.withNotices(recs)
	if len(recs) == 0 {
		done(true)
		return
	}
	var left atomic.Int32
	var failed atomic.Bool
	left.Store(int32(len(recs)))
	for _, r := range recs {
		d.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(true)
				d.produceFailed(ctx, err)
			} else {
				d.m.acked(r)
			}
			if left.Add(-1) == 0 {
				done(!failed.Load())
			}
		})
	}
}

// produceFailed makes a produce error fatal, unless shutdown caused it.
func (d *deliverer) produceFailed(ctx context.Context, err error) {
	if ctx.Err() == nil && !errors.Is(err, kgo.ErrClientClosed) {
		select {
		case d.fatal <- fmt.Errorf("producing delivery outcome: %w", err):
		default:
		}
	}
}

// commitLoop commits every CommitInterval, and sooner when records wait
// for their commit (unsettled). After a failed commit it waits
// for the interval, or commitRetry at least, before the next.
func (d *deliverer) commitLoop(ctx context.Context) {
	t := time.NewTicker(d.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.unsettled.wake:
		}
		if d.commit(ctx, nil) != nil {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-time.After(commitRetry):
			}
		}
	}
}

// commitRetry is the least time between a failed commit and the next.
const commitRetry = 100 * time.Millisecond

// commit commits the watermarks of the given partitions (all when nil)
// that moved since the last commit. A commit of every partition that the
// broker acknowledged frees the slots of the records it covers.
func (d *deliverer) commit(ctx context.Context, parts []lanes.TP) error {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	return d.commitLocked(ctx, parts)
}

func (d *deliverer) commitLocked(ctx context.Context, parts []lanes.TP) error {
	// Counted before the lanes are read: every record counted is done,
	// so in the watermarks or runs read below.
	covered := d.unsettled.covered()
	wms := map[string]map[int32]kgo.EpochOffset{}
	for tp, wm := range d.lanes.Watermarks(parts) {
		if wms[tp.Topic] == nil {
			wms[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		wms[tp.Topic][tp.Partition] = wm
	}
	finished := map[string]map[int32][]kafka.Run{}
	for tp, runs := range d.lanes.Finished(parts) {
		if finished[tp.Topic] == nil {
			finished[tp.Topic] = map[int32][]kafka.Run{}
		}
		finished[tp.Topic][tp.Partition] = runs
	}
	err := d.wms.CommitFinished(ctx, wms, finished)
	if err == nil && parts == nil {
		d.unsettled.settle(covered)
	}
	return err
}

// assigned reads the group's commits of the partitions assigned, before
// their records are fetched, for the records their previous owner finished
// above its watermark (records that finished while one below them still
// ran): the lanes skip those instead of redoing them. Without the commits
// (an error), they are redone.
func (d *deliverer) assigned(ctx context.Context, cl *kgo.Client, added map[string][]int32) {
	parts := d.ours(added)
	if len(parts) == 0 {
		return
	}
	d.fenceSlots(ctx, parts)
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, d.cfg.Group)
	if err != nil {
		d.log.Warn("reading the commits of assigned partitions; what finished above their watermarks is redone", zap.Error(err))
		return
	}
	skipped := 0
	for _, tp := range parts {
		o, ok := offs.Lookup(tp.Topic, tp.Partition)
		if !ok || o.Err != nil {
			continue
		}
		runs := kafka.FinishedAbove(o.Metadata, o.At)
		d.lanes.Resume(tp, runs)
		for _, r := range runs {
			skipped += int(r.To - r.From + 1)
		}
	}
	if skipped > 0 {
		d.log.Info("partitions assigned with records finished above their watermarks", zap.Int("offsets_skipped", skipped))
	}
}

// revoked hands partitions over cleanly: records not started are dropped
// (the next owner starts from the committed watermark), running ones finish
// within the shutdown budget, and the watermark is committed.
func (d *deliverer) revoked(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := d.ours(lost)
	if len(parts) == 0 {
		return
	}
	dropped := d.lanes.HandOff(parts)
	// Running records may wait for a slot that the commit loop frees:
	// it must not wait for this callback meanwhile.
	wait, cancel := context.WithTimeout(ctx, d.cfg.ShutdownTimeout)
	_ = d.lanes.WaitIdle(wait, parts)
	cancel()
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	dropped += d.lanes.Drop(parts) // kept records the budget left unstarted
	_ = d.commitLocked(ctx, parts)
	d.lanes.Forget(parts)
	d.holds.forget(parts)
	d.wms.Forget(lost)
	d.log.Info("partitions revoked", zap.Any("partitions", lost), zap.Int("dropped_unstarted", dropped))
}

// ours are the partitions of consumed topics in a revoked or lost set.
func (d *deliverer) ours(m map[string][]int32) []lanes.TP {
	var out []lanes.TP
	for _, t := range d.consumed() {
		for _, p := range m[t] {
			out = append(out, lanes.TP{Topic: t, Partition: p})
		}
	}
	return out
}

// lost partitions cannot be committed: drop what has not started and forget
// them; the new owner redoes everything after the last commit.
func (d *deliverer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := d.ours(lost)
	if len(parts) == 0 {
		return
	}
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	d.lanes.Drop(parts)
	d.lanes.Forget(parts)
	d.holds.forget(parts)
	d.wms.Forget(lost)
	d.log.Warn("partitions lost", zap.Any("partitions", lost))
}
