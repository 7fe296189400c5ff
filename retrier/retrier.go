// Package retrier holds back the records of the retry tiers until they are
// due and then releases them to the redeliveries topic. Each tier partition is
// held on its own: a partition whose look-ahead window is full of records
// not yet due is paused, and no other partition waits for it. The poll loop
// never sleeps: it polls with a deadline at the next due time. Offsets are
// committed only up to the first record not yet released, after the release
// was acknowledged, so a killed retrier loses nothing and releases nothing
// early. A scheduled delivery's wait (header webhooks-deliver-at) is
// released into its next wait while its deliver_at is ahead, to
// redeliveries once it has come, and as an attempt record of its
// cancellation when its event was cancelled (the cancellations table).
package retrier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/retrier/internal/window"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

type tp struct {
	topic     string
	partition int32
}

type retrier struct {
	cfg   Config
	names topics.Names
	log   *zap.Logger
	cl    *kgo.Client
	m     *metrics
	// recovery releases retries of recovered subscriptions early; nil
	// without Redis (recovery.go).
	recovery *recovery
	// cancels is the cancellations table, read before a scheduled
	// delivery's wait is released.
	cancels *table.Keyed[topics.Cancellation]
	tracer  tracing.Tracer

	tiers map[string]time.Duration // by topic

	mu      sync.Mutex
	held    map[tp]*window.Partition
	paused  map[tp]bool
	overrun map[tp]bool // paused past the horizon: records behind may be late
	atBound bool        // holding MaxHeld records or MaxHeldMB
	wms     *kafka.Watermarks
}

// Run releases due retries until ctx is done, then commits what it
// released and leaves the group.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	r := &retrier{
		cfg:     cfg,
		names:   cfg.Kafka.Names,
		log:     log.Named("retrier"),
		tracer:  tracing.For(ctx, "github.com/hookpipe/hookpipe/retrier"),
		tiers:   map[string]time.Duration{},
		held:    map[tp]*window.Partition{},
		paused:  map[tp]bool{},
		overrun: map[tp]bool{},
	}
	for _, t := range r.names.Tiers {
		r.tiers[r.names.Retry(t)] = t
	}
	reg := ops.NewRegistry()
	srv, err := ops.Start(ctx, cfg.HTTPAddr, reg, r.log, ops.WithPprof(cfg.Pprof))
	if err != nil {
		return err
	}
	defer srv.Close() // last: metrics and health outlive the shutdown
	r.m = newMetrics(reg, r)
	leaver := kafka.NewLeaver(r.log)
	cl, err := kgo.NewClient(append(r.opts(), ops.KafkaMetrics(reg), leaver.Opt())...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	r.cl = cl
	r.wms = kafka.NewWatermarks(cl, r.log)
	if err := kafka.WaitReady(ctx, cl, cfg.Kafka, append(r.names.RetryTopics(), r.names.Redeliveries(), r.names.Attempts(), r.names.Cancellations()), r.log); err != nil || ctx.Err() != nil {
		leaver.Close(cl)
		return err
	}
	r.cancels, err = table.NewKeyed(r.baseOpts(), r.names.Cancellations(), r.log, topics.DecodeCancellation)
	if err != nil {
		leaver.Close(cl)
		return err
	}
	defer r.cancels.Close()
	cancelsCtx, stopCancels := context.WithCancel(ctx)
	var cancels sync.WaitGroup
	cancels.Go(func() { r.cancels.Run(cancelsCtx) })
	defer cancels.Wait()
	defer stopCancels()
	srv.Watch(cl, cfg.Group, r.names.RetryTopics()...)
	r.log.Info("started", zap.Strings("tiers", r.names.RetryTopics()), zap.String("group", cfg.Group))
	if r.recovery, err = newRecovery(cfg, r.log); err != nil {
		leaver.Close(cl)
		return err
	}
	defer r.recovery.close()
	r.recovery.register(reg)
	marksCtx, stopMarks := context.WithCancel(ctx)
	var marks sync.WaitGroup
	marks.Go(func() { r.recovery.run(marksCtx) })
	runErr := r.loop(ctx)
	stopMarks()
	marks.Wait()
	final, cancelFinal := context.WithTimeout(context.Background(), 10*time.Second)
	r.commit(final, nil)
	cancelFinal()
	leaver.Close(cl) // leaves the group
	r.log.Info("stopped")
	return runErr
}

// baseOpts connect to the brokers: what the cancellations table gets.
func (r *retrier) baseOpts() []kgo.Opt {
	opts := append(r.cfg.Kafka.ClientOpts(), // brokers, TLS, SASL
		kafka.Logger(r.log))
	if r.cfg.dial != nil { // tests only, never with TLS (kgo refuses Dialer with DialTLSConfig)
		opts = append(opts, kgo.Dialer(r.cfg.dial))
	}
	return opts
}

func (r *retrier) opts() []kgo.Opt {
	return append(r.baseOpts(),
		kgo.ClientID("webhooks-retrier"),
		kgo.ConsumerGroup(r.cfg.Group),
		kgo.ConsumeTopics(r.names.RetryTopics()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(r.cfg.Kafka.SessionTimeout),
		kgo.HeartbeatInterval(max(r.cfg.Kafka.SessionTimeout/10, 100*time.Millisecond)),
		// A partition resumed after a pause joins the next fetch: a short
		// long-poll keeps releases within a second of their due time.
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.RecordPartitioner(topics.Partitioner()),
		kgo.ProducerLinger(time.Millisecond),
	)
}

// cancelsWait bounds how long a release waits for the cancellations table.
const cancelsWait = 5 * time.Second

// cancelsCaughtUp waits for the cancellations table to apply every record
// written before the call.
func (r *retrier) cancelsCaughtUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cancelsWait)
	defer cancel()
	return r.cancels.WaitCaughtUp(ctx)
}

// idleWait bounds a poll when nothing is held, so commits still happen.
const idleWait = time.Second

func (r *retrier) loop(ctx context.Context) error {
	lastCommit := time.Now()
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	// A release in progress when shutdown begins may finish within the
	// budget: what reached the broker is then committed too, instead of
	// being released a second time by the partition's next owner.
	defer context.AfterFunc(ctx, func() { time.AfterFunc(r.cfg.ShutdownTimeout, cancelWork) })()
	for {
		// Wake at least every commit interval: a release that comes just
		// after a commit is committed at the next wake.
		wake := time.Now().Add(min(idleWait, r.cfg.CommitInterval))
		if t, ok := r.earliest(); ok && t.Before(wake) {
			wake = t
		}
		if t := time.Now().Add(recoveryTick); r.recovery.pending() && t.Before(wake) {
			wake = t
		}
		pollCtx, cancel := context.WithDeadline(ctx, wake)
		fs := r.cl.PollRecords(pollCtx, 10_000)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			r.cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				r.log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
			}
		})
		r.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			k := tp{rec.Topic, rec.Partition}
			h := r.held[k]
			if h == nil {
				h = &window.Partition{}
				r.held[k] = h
			}
			h.Add(rec)
		})
		r.mu.Unlock()
		released, err := r.release(work)
		r.cl.AllowRebalance()
		if err != nil {
			return err
		}
		// A release is committed at once: a retrier killed after it
		// repeats it only if the commit was not acknowledged yet (ADR 0029).
		if released > 0 || time.Since(lastCommit) >= r.cfg.CommitInterval {
			r.commit(ctx, nil)
			lastCommit = time.Now()
		}
	}
}

// earliest is the soonest due time of any held record.
func (r *retrier) earliest() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out time.Time
	found := false
	for _, h := range r.held {
		if t, ok := h.Earliest(); ok && (!found || t.Before(out)) {
			out, found = t, true
		}
	}
	return out, found
}

// redelivery is the record that releases a due retry: the tier record's
// key and value, and its trace context, passed on through a "retry
// released" span when tracing is on.
func (r *retrier) redelivery(ctx context.Context, rec window.Record) *kgo.Record {
	out := &kgo.Record{Topic: r.names.Redeliveries(), Key: rec.Rec.Key, Value: rec.Rec.Value}
	if id, n, ok := topics.BatchOf(rec.Rec.Headers); ok {
		// A failed batch's records keep its mark, so that the deliverer
		// batches them again as they were (ADR 0040).
		out.Headers = append(out.Headers, topics.BatchHeader(id, n))
	}
	ctx, span := r.tracer.Start(r.tracer.Extract(ctx, rec.Rec.Headers), tracing.SpanRetryReleased, trace.SpanKindProducer)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrTier.String(rec.Rec.Topic), tracing.AttrNotBefore.Int64(rec.Due.UnixMilli()))
	}
	tracing.Carry(ctx, &out.Headers, rec.Rec.Headers)
	span.End()
	return out
}

// forward is the record a due record is released as: a retry's
// redelivery; for a scheduled delivery's wait, the attempt record of its
// cancellation when its event was cancelled, else its next wait
// (topics.Names.Wait) while its deliver_at is ahead, else its redelivery,
// its first attempt due. A wait whose value does not decode is released
// as it is: the deliverer dead-letters it.
func (r *retrier) forward(ctx context.Context, rec window.Record, now time.Time) *kgo.Record {
	if rec.DeliverAt.IsZero() {
		return r.redelivery(ctx, rec)
	}
	d, err := topics.DecodeDelivery(rec.Rec.Value)
	if err != nil {
		return r.redelivery(ctx, rec)
	}
	if c, ok := r.cancelled(&d); ok {
		a := cancelledAttempt(&d, c, r.names, now)
		tracing.Carry(ctx, &a.Headers, rec.Rec.Headers)
		return a
	}
	if !rec.DeliverAt.After(now) {
		return r.redelivery(ctx, rec)
	}
	w := r.names.Wait(rec.Rec.Key, &d, now)
	tracing.Carry(ctx, &w.Headers, rec.Rec.Headers)
	return w
}

// cancelled returns the cancellation of d's event by an administrator or
// its tenant, if any.
func (r *retrier) cancelled(d *topics.Delivery) (topics.Cancellation, bool) {
	for _, k := range topics.CancellationKeys(d) {
		if c, ok := r.cancels.Get(k); ok {
			return c, true
		}
	}
	return topics.Cancellation{}, false
}

// cancelledAttempt is the attempt record that ends a scheduled delivery
// whose event was cancelled: outcome skipped, category cancelled, so the
// message log shows it.
func cancelledAttempt(d *topics.Delivery, c topics.Cancellation, names topics.Names, now time.Time) *kgo.Record {
	by := "an administrator"
	if c.Tenant != "" {
		by = "its tenant"
	}
	a := topics.Attempt{
		AttemptID: topics.NewAttemptID(), EventID: d.EventID, EventType: d.EventType, SubscriptionID: d.SubscriptionID,
		Tenant: d.Tenant, Attempt: d.Attempt, Outcome: topics.OutcomeSkipped, FailureCategory: topics.FailureCancelled,
		TS: now.UTC(), PublishedAt: d.PublishedAt,
		Error: "cancelled by " + by + " at " + c.CancelledAt.UTC().Format(time.RFC3339) + ", before its deliver_at " + d.DeliverAt.Format(time.RFC3339),
	}
	return &kgo.Record{Topic: names.Attempts(), Key: []byte(d.SubscriptionID), Value: a.Encode()}
}

// release produces every due record to the redeliveries topic (or, for a
// scheduled delivery's wait, as forward says), waits for the
// acknowledgement, then forgets them, and returns how many; it pauses partitions whose window is
// full of records not yet due and resumes the others. At the process bound
// a partition's window is its share of the bound: the partitions holding
// the most pause, and the others go on fetching. Scheduled deliveries' waits
// are released once the cancellations table has caught up, so a
// cancellation acknowledged before their release is never missed; while it
// cannot, they stay held.
func (r *retrier) release(ctx context.Context) (int, error) {
	now := time.Now()
	r.mu.Lock()
	due := map[tp][]window.Record{}
	scheduled := false
	for k, h := range r.held {
		d := append(h.Due(now), r.recovery.early(h, now)...)
		if len(d) == 0 {
			continue
		}
		due[k] = d
		for _, rec := range d {
			scheduled = scheduled || !rec.DeliverAt.IsZero()
		}
	}
	r.mu.Unlock()
	if scheduled {
		if err := r.cancelsCaughtUp(ctx); err != nil {
			r.log.Warn("reading the cancellations table; scheduled deliveries stay held", zap.Error(err))
			for k, d := range due {
				if due[k] = slices.DeleteFunc(d, func(rec window.Record) bool { return !rec.DeliverAt.IsZero() }); len(due[k]) == 0 {
					delete(due, k)
				}
			}
		}
	}
	var out []*kgo.Record
	for _, d := range due {
		for _, rec := range d {
			out = append(out, r.forward(ctx, rec, now))
		}
	}
	if len(out) > 0 {
		if err := r.cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
			if ctx.Err() != nil {
				return 0, nil
			}
			return 0, fmt.Errorf("releasing %d due retries: %w", len(out), err)
		}
		r.log.Debug("released", zap.Int("records", len(out)))
		r.m.forwarded(out, r.names)
		released := time.Now()
		for _, d := range due {
			r.m.late(d, now, released)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	records, bytes := 0, 0
	for k, h := range r.held {
		if d, ok := due[k]; ok {
			h.Released(d)
		}
		records, bytes = records+h.Len(), bytes+h.Bytes()
	}
	atBound := r.cfg.atBound(records, bytes)
	var pause, resume map[string][]int32
	for k, h := range r.held {
		switch full := r.cfg.full(h, atBound, len(r.held)); {
		case full && !r.paused[k]:
			pause = add(pause, k)
			r.paused[k] = true
		case !full && r.paused[k]:
			resume = add(resume, k)
			delete(r.paused, k)
		}
	}
	r.checkOverrun(now)
	if pause != nil {
		r.cl.PauseFetchPartitions(pause)
	}
	if resume != nil {
		r.cl.ResumeFetchPartitions(resume)
	}
	if atBound != r.atBound {
		r.atBound = atBound
		if atBound {
			r.log.Warn("holding the most records allowed; the partitions holding the most are paused until some are released",
				zap.Int("held", records), zap.Int("held_bytes", bytes), zap.Int("max_held", r.cfg.MaxHeld), zap.Int("max_held_mb", r.cfg.MaxHeldMB))
		} else {
			r.log.Info("below the bound on held records again", zap.Int("held", records), zap.Int("held_bytes", bytes))
		}
	}
	return len(out), nil
}

// checkOverrun notes the paused partitions whose horizon has passed: a
// record behind their windows, not fetched, may be due already and comes
// out late. The window (WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION) is then
// smaller than what the partition receives over its tier's spread of due
// times. Called with r.mu held.
func (r *retrier) checkOverrun(now time.Time) {
	for k := range r.overrun {
		if !r.paused[k] {
			delete(r.overrun, k)
		}
	}
	for k := range r.paused {
		h := r.held[k]
		if r.overrun[k] || h == nil || !overrun(h, r.tiers[k.topic], now) {
			continue
		}
		r.overrun[k] = true
		r.log.Warn("look-ahead window full of records not yet due past its horizon; records behind it may be released late",
			zap.String("topic", k.topic), zap.Int32("partition", k.partition), zap.Int("held", h.Len()),
			zap.Int("max_held_per_partition", r.cfg.MaxHeldPerPartition))
	}
}

// overrun reports whether a record not fetched behind the paused partition
// h of tier may be due at now.
func overrun(h *window.Partition, tier time.Duration, now time.Time) bool {
	return h.Len() > 0 && !now.Before(h.Horizon(tier))
}

// atBound reports whether the process holds as many records, or bytes, as
// it may.
func (c *Config) atBound(records, bytes int) bool {
	return records >= c.MaxHeld || bytes >= c.MaxHeldMB<<20
}

// full reports whether the partition holding h must pause: its window is
// full, or the process is at its bound and h holds its share of it, one of
// the n partitions held.
func (c *Config) full(h *window.Partition, atBound bool, n int) bool {
	return h.Len() >= c.MaxHeldPerPartition ||
		atBound && (h.Len() >= c.MaxHeld/n || h.Bytes() >= c.MaxHeldMB<<20/n)
}

func add(m map[string][]int32, k tp) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[k.topic] = append(m[k.topic], k.partition)
	return m
}

// commit commits the watermarks that moved, with the runs released above
// them, for the given partitions (all held ones when nil).
func (r *retrier) commit(ctx context.Context, only map[string][]int32) {
	r.mu.Lock()
	wms := map[string]map[int32]kgo.EpochOffset{}
	finished := map[string]map[int32][]kafka.Run{}
	for k, h := range r.held {
		if only != nil && !contains(only[k.topic], k.partition) {
			continue
		}
		if wm, ok := h.Watermark(); ok {
			if wms[k.topic] == nil {
				wms[k.topic], finished[k.topic] = map[int32]kgo.EpochOffset{}, map[int32][]kafka.Run{}
			}
			wms[k.topic][k.partition], finished[k.topic][k.partition] = wm, h.Finished()
		}
	}
	r.mu.Unlock()
	_ = r.wms.CommitFinished(ctx, wms, finished)
}

// assigned reads the group's commits of the partitions assigned, before
// their records are fetched, for the records their previous owner released
// above its watermark (a record not due yet holds the watermark back while
// later ones are released): they are not released again. Without the
// commits (an error), they are.
func (r *retrier) assigned(ctx context.Context, cl *kgo.Client, added map[string][]int32) {
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, r.cfg.Group)
	if err != nil {
		r.log.Warn("reading the commits of assigned partitions; what was released above their watermarks is released again", zap.Error(err))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, ps := range added {
		for _, p := range ps {
			o, ok := offs.Lookup(t, p)
			if !ok || o.Err != nil {
				continue
			}
			if runs := kafka.FinishedAbove(o.Metadata, o.At); len(runs) > 0 {
				h := &window.Partition{}
				h.Resume(runs)
				r.held[tp{t, p}] = h
			}
		}
	}
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// revoked commits what was released from the revoked partitions and drops
// what they still held: the next owner fetches it again from the watermark.
func (r *retrier) revoked(ctx context.Context, _ *kgo.Client, gone map[string][]int32) {
	r.commit(ctx, gone)
	r.forget(gone)
}

// lost partitions cannot be committed; their held records are dropped.
func (r *retrier) lost(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
	r.forget(gone)
}

func (r *retrier) forget(gone map[string][]int32) {
	r.mu.Lock()
	var resume map[string][]int32
	for t, ps := range gone {
		for _, p := range ps {
			k := tp{t, p}
			if r.paused[k] {
				resume = add(resume, k)
			}
			delete(r.held, k)
			delete(r.paused, k)
			delete(r.overrun, k)
		}
	}
	r.mu.Unlock()
	r.wms.Forget(gone)
	// The client keeps a pause across rebalances: lift it, or a partition
	// assigned back to this member would never be fetched again.
	if resume != nil {
		r.cl.ResumeFetchPartitions(resume)
	}
}
