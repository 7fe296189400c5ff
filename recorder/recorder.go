// Package recorder copies the attempts topic into ClickHouse. It reads
// attempt records in batches (up to Config.BatchRows records, or what came
// within Config.BatchWait), inserts each batch with one native-protocol
// INSERT while the next one fills, and commits a batch's offsets only
// after ClickHouse acknowledged its insert: a crash or an outage loses
// nothing. Before the insert it commits the batch's first offsets marked
// in flight, so the next owner of a partition looks up, against copies,
// only what a crash may have left (ADR 0044, marks.go). While ClickHouse is down or too slow, the batches are held
// (fetching paused, so memory stays bounded by two batches) and the insert
// retried with backoff; the recorder catches up when ClickHouse is back.
// Undecodable records are counted, logged once per thousand and skipped.
// The schema is created and migrated at start (internal/schema).
package recorder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/recorder/internal/batch"
	"github.com/hookpipe/hookpipe/recorder/internal/store"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/ops"
)

type tp struct {
	topic     string
	partition int32
}

type recorder struct {
	cfg   Config
	topic string
	log   *zap.Logger
	cl    *kgo.Client
	ch    driver.Conn
	w     *store.Writer
	m     *metrics

	// mu is held by the poll loop while it handles what a poll returned
	// and by the rebalance callbacks; never by the insert in flight.
	mu sync.Mutex
	// b is the batch being filled; flight the batch handed to ClickHouse,
	// either being inserted (running is set) or waiting for a retry after
	// a failed insert (down). At most these two batches are in memory:
	// while b is full and flight not done the loop waits for the insert,
	// and while down fetching is paused.
	b, flight, spare *batch.Batch
	running          *insert // the insert of flight in progress
	paused           bool
	// fresh holds, per partition assigned, the records still to be read
	// as suspect: those the previous owner may have inserted without
	// committing (ADR 0044).
	fresh map[tp]window
	// topicID is the attempts topic's ID (commitMarked); only the insert
	// in flight and the callbacks it blocks use it, never at once.
	topicID   [16]byte
	down      bool // the last insert of flight failed
	downSince time.Time
	failures  int // consecutive failed inserts
	retryAt   time.Time

	// pollCancel ends the poll in progress: an insert that finishes wakes
	// the loop with it.
	pollCancel atomic.Pointer[context.CancelFunc]

	undecodable atomic.Int64
	inserted    atomic.Int64
	// Mirrors of down and the records in hand, for the metrics (a scrape
	// must not wait for mu).
	downGauge atomic.Bool
	held      atomic.Int64
}

// Run records attempts until ctx is done, then inserts the batch in hand
// if ClickHouse is up (within Config.ShutdownTimeout), commits and leaves
// the group. It waits for ClickHouse at start, creating or migrating the
// schema before it consumes anything.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	r := &recorder{
		cfg:   cfg,
		topic: cfg.Kafka.Names.Attempts(),
		log:   log.Named("recorder"),
		b:     batch.New(cfg.BatchRows),
		spare: batch.New(cfg.BatchRows),
		fresh: map[tp]window{},
	}
	reg := ops.NewRegistry()
	srv, err := ops.Start(ctx, cfg.HTTPAddr, reg, r.log, ops.WithPprof(cfg.Pprof))
	if err != nil {
		return err
	}
	defer srv.Close() // last: metrics and health outlive the shutdown
	r.m = newMetrics(reg, r)
	ch, err := openClickHouse(cfg)
	if err != nil {
		return err
	}
	r.ch = ch
	defer func() { _ = ch.Close() }()
	if !r.migrate(ctx) {
		return nil // canceled while waiting for ClickHouse
	}
	r.w = store.New(ch, cfg.Database)

	leaver := kafka.NewLeaver(r.log)
	cl, err := kgo.NewClient(append(r.opts(), ops.KafkaMetrics(reg), leaver.Opt())...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	r.cl = cl
	if err := kafka.WaitReady(ctx, cl, cfg.Kafka, []string{cfg.Kafka.Names.Attempts()}, r.log); err != nil || ctx.Err() != nil {
		leaver.Close(cl)
		return err
	}
	srv.Watch(cl, cfg.Group, r.topic)
	groupReady := ops.GroupReady(cl, cfg.Group)
	srv.SetReady(func(ctx context.Context) error {
		if r.downGauge.Load() {
			return errors.New("ClickHouse inserts are failing: holding the batch and retrying")
		}
		return groupReady(ctx)
	})
	r.log.Info("started", zap.String("topic", r.topic), zap.String("group", cfg.Group),
		zap.Int("batch_rows", cfg.BatchRows), zap.Duration("batch_wait", cfg.BatchWait))
	r.loop(ctx)
	r.shutdown()
	leaver.Close(cl) // leaves the group
	r.log.Info("stopped", zap.Int64("rows_inserted", r.inserted.Load()), zap.Int64("undecodable", r.undecodable.Load()))
	return nil
}

// Migrate creates or migrates the schema once, as Run does at start, and
// returns; for tools and tests that need the tables without a recorder.
func Migrate(ctx context.Context, cfg Config) error {
	ch, err := openClickHouse(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	_, err = schema.Migrate(ctx, ch, cfg.Database, cfg.RetentionDays)
	return err
}

func openClickHouse(cfg Config) (driver.Conn, error) { return cfg.Open(cfg.InsertTimeout) }

// fetchMinBytes is how much a fetch waits for (opts).
const fetchMinBytes = 1 << 20

func (r *recorder) opts() []kgo.Opt {
	return append(r.cfg.Kafka.ClientOpts(), // brokers, TLS, SASL
		kgo.ClientID("webhooks-recorder"),
		kafka.Logger(r.log),
		kgo.ConsumerGroup(r.cfg.Group),
		kgo.ConsumeTopics(r.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Records wait up to BatchWait for their batch anyway: fetches that
		// wait for a megabyte (or a quarter of BatchWait, at most half a
		// second) are fewer and larger, cheaper per record for the broker
		// and the client.
		kgo.FetchMinBytes(fetchMinBytes),
		kgo.FetchMaxWait(min(max(10*time.Millisecond, r.cfg.BatchWait/4), 500*time.Millisecond)),
		kgo.SessionTimeout(r.cfg.Kafka.SessionTimeout),
		kgo.HeartbeatInterval(max(r.cfg.Kafka.SessionTimeout/10, 100*time.Millisecond)),
		// An insert blocks rebalancing (BlockRebalanceOnPoll) for at most
		// InsertTimeout; the group waits that long and a little more.
		kgo.RebalanceTimeout(max(time.Minute, r.cfg.InsertTimeout+15*time.Second)),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	)
}

// migrate applies the schema, retrying with backoff until it succeeds or
// ctx is done (false). The first failure is logged as a warning, the
// retries at debug level.
func (r *recorder) migrate(ctx context.Context) bool {
	for failures := 0; ; failures++ {
		mctx, cancel := context.WithTimeout(ctx, r.cfg.InsertTimeout)
		res, err := schema.Migrate(mctx, r.ch, r.cfg.Database, r.cfg.RetentionDays)
		cancel()
		if err == nil {
			r.log.Info("schema ready", zap.String("database", r.cfg.Database), zap.Stringer("server", res.Server),
				zap.String("features", res.Features.String()), zap.Uint32s("applied", res.Applied),
				zap.Strings("ttl_changed", res.TTLChanged))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if failures == 0 {
			r.log.Warn("waiting for ClickHouse to create the schema; retrying with backoff", zap.Strings("addr", r.cfg.ClickHouse), zap.Error(err))
		} else {
			r.log.Debug("schema creation failed again", zap.Int("failures", failures+1), zap.Error(err))
		}
		t := time.NewTimer(backoff(failures+1, r.cfg.RetryMax, rand.Float64()))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
