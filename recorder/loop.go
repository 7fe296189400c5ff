package recorder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/recorder/internal/batch"
	"github.com/hookpipe/hookpipe/recorder/internal/decode"
	"github.com/hookpipe/hookpipe/recorder/internal/store"
)

// idleWait bounds a poll while nothing is due.
const idleWait = time.Second

// loop polls, fills batches and hands them to ClickHouse one at a time:
// while one is being inserted the next one fills, so decoding overlaps
// with the insert. It returns when ctx is done.
func (r *recorder) loop(ctx context.Context) {
	for {
		pollCtx, cancel := context.WithCancel(ctx)
		r.pollCancel.Store(&cancel)
		r.mu.Lock()
		r.step(ctx, time.Now())
		if ins := r.running; ins != nil && r.b.Records() >= r.cfg.BatchRows {
			// Both batches full: wait for the insert, outside any poll
			// (rebalances may go on meanwhile). Pausing instead would drop
			// what the client already fetched, to fetch it again.
			r.mu.Unlock()
			cancel()
			select {
			case <-ins.done:
			case <-ctx.Done():
				return
			}
			continue
		}
		wake, room := r.wake(time.Now()), max(1, r.cfg.BatchRows-r.b.Records())
		r.mu.Unlock()
		pollCtx, cancelDeadline := context.WithDeadline(pollCtx, wake)
		fs := r.cl.PollRecords(pollCtx, room)
		cancelDeadline()
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			r.cl.AllowRebalance()
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				r.log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
			}
		})
		r.mu.Lock()
		now := time.Now()
		fs.EachRecord(func(rec *kgo.Record) { r.add(rec, now) })
		r.step(ctx, now)
		r.mu.Unlock()
		r.cl.AllowRebalance()
	}
}

// step lands a finished insert, retries a failed one when due, hands the
// filling batch over when it is due and nothing is in flight, and pauses or
// resumes fetching. Called with mu held.
func (r *recorder) step(ctx context.Context, now time.Time) {
	if r.running != nil {
		select {
		case <-r.running.done:
			r.landed(ctx, now)
		default:
		}
	}
	switch {
	case r.flight != nil && r.running == nil && !now.Before(r.retryAt):
		r.launch()
	case r.flight == nil && !r.b.Empty() &&
		(r.b.Records() >= r.cfg.BatchRows || !now.Before(r.b.First().Add(r.cfg.BatchWait))):
		r.handOver()
		r.launch()
	}
	pause := r.down
	switch {
	case pause && !r.paused:
		r.cl.PauseFetchTopics(r.topic)
	case !pause && r.paused:
		r.cl.ResumeFetchTopics(r.topic)
	}
	r.paused = pause
	r.held.Store(int64(r.inHand()))
	if r.cfg.observe != nil {
		r.cfg.observe(r.inHand(), r.down)
	}
}

func (r *recorder) inHand() int {
	n := r.b.Records()
	if r.flight != nil {
		n += r.flight.Records()
	}
	return n
}

// wake is when the loop must act next, unless an insert finishing wakes
// it first: the retry time of a failed insert, or the filling batch's
// deadline.
func (r *recorder) wake(now time.Time) time.Time {
	switch {
	case r.running != nil:
		return now.Add(idleWait)
	case r.flight != nil:
		return r.retryAt
	case !r.b.Empty():
		return r.b.First().Add(r.cfg.BatchWait)
	}
	return now.Add(idleWait)
}

// undecodableLogEvery: the first undecodable record is logged, then one in
// this many.
const undecodableLogEvery = 1000

func (r *recorder) add(rec *kgo.Record, now time.Time) {
	a, err := decode.Attempt(rec.Value)
	if err != nil {
		n := r.undecodable.Add(1)
		if n == 1 || n%undecodableLogEvery == 0 {
			r.log.Warn("skipping undecodable attempt records", zap.Int64("total", n), zap.Int32("partition", rec.Partition),
				zap.Int64("offset", rec.Offset), zap.Error(err))
		}
		r.m.skipped()
		r.b.Skip(rec, now)
		return
	}
	k := tp{rec.Topic, rec.Partition}
	suspect := false
	if w, ok := r.fresh[k]; ok {
		var more bool
		suspect, more = w.suspect(rec.Offset)
		if more {
			r.fresh[k] = w
		} else {
			delete(r.fresh, k)
		}
	}
	r.b.Add(rec, &a, suspect, now)
}

// handOver makes the filling batch the one to insert.
func (r *recorder) handOver() {
	r.flight, r.b, r.spare = r.b, r.spare, nil
	if r.b == nil {
		r.b = batch.New(r.cfg.BatchRows)
	}
}

// insert is one insert of flight running in the background; done is
// closed when it finished, and then res, err, unmarked and took are set.
type insert struct {
	done chan struct{}
	res  store.Result
	err  error
	// unmarked: the batch could not be marked in flight, so nothing was
	// inserted.
	unmarked bool
	took     time.Duration
}

// launch inserts flight in the background and wakes the loop when done.
// The insert has its own deadline and is not canceled by shutdown: the
// last batch may still land. Called with mu held, flight set, nothing
// running.
func (r *recorder) launch() {
	f, ins := r.flight, &insert{done: make(chan struct{})}
	r.running = ins
	if len(f.Rows()) == 0 {
		close(ins.done) // only skipped records: nothing to insert
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.InsertTimeout)
		defer cancel()
		start := time.Now()
		if err := r.mark(ctx, f); err != nil {
			ins.err, ins.unmarked = fmt.Errorf("marking the batch in flight in the group's commits: %w", err), true
		} else {
			ins.res, ins.err = r.w.Write(ctx, f.Rows())
		}
		ins.took = time.Since(start)
		close(ins.done)
		if c := r.pollCancel.Load(); c != nil {
			(*c)()
		}
	}()
}

// landed handles the end of flight's insert: on success the offsets are
// committed and the batch recycled; on failure it is kept (its rows now
// suspect), fetching pauses and a retry is scheduled. Called with mu held
// once running.done is closed.
func (r *recorder) landed(ctx context.Context, now time.Time) {
	res := r.running
	r.running = nil
	f := r.flight
	if res.err != nil {
		if !res.unmarked {
			// It may have landed: look before inserting again.
			f.MarkSuspect()
		}
		r.failed(now, len(f.Rows()), res.err, res.unmarked)
		return
	}
	if len(f.Rows()) > 0 {
		r.m.insert(res.res, res.took)
	}
	if r.down {
		r.log.Info("ClickHouse is back: inserted the held batch, fetching resumed",
			zap.Duration("down_for", now.Sub(r.downSince).Round(time.Millisecond)), zap.Int("failed_inserts", r.failures))
		r.down, r.failures = false, 0
		r.downGauge.Store(false)
	}
	r.inserted.Add(int64(res.res.Inserted))
	r.log.Debug("inserted", zap.Int("rows", res.res.Inserted), zap.Int("looked_up", res.res.LookedUp), zap.Int("already_present", res.res.Present),
		zap.Int("records", f.Records()), zap.Duration("took", res.took))
	r.commit(ctx, f)
	f.Reset()
	r.flight, r.spare = nil, f
}

// wait lands the insert in flight, waiting for it up to limit; false if it
// did not finish in time. Called with mu held.
func (r *recorder) wait(ctx context.Context, limit time.Duration) bool {
	if r.running == nil {
		return true
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.running.done:
		r.landed(ctx, time.Now())
		return true
	case <-t.C:
		return false
	}
}

// failed holds the batch and schedules its retry after a failed insert, or
// a failed mark before it (unmarked: Kafka's group coordinator, not
// ClickHouse, refused).
func (r *recorder) failed(now time.Time, rows int, err error, unmarked bool) {
	r.failures++
	r.m.failed()
	r.retryAt = now.Add(backoff(r.failures, r.cfg.RetryMax, rand.Float64()))
	if r.down {
		r.log.Debug("insert failed again", zap.Int("failures", r.failures), zap.Time("retry_at", r.retryAt), zap.Error(err))
		return
	}
	r.down, r.downSince = true, now
	r.downGauge.Store(true)
	if unmarked {
		r.log.Warn("could not mark the batch in flight in the group's commits, so not inserting it: holding the batch, fetching paused, retrying with backoff",
			zap.Int("rows", rows), zap.String("group", r.cfg.Group), zap.Error(err))
		return
	}
	r.log.Warn("ClickHouse insert failed: holding the batch, fetching paused, retrying with backoff",
		zap.Int("rows", rows), zap.Strings("addr", r.cfg.ClickHouse), zap.Error(err))
}

// backoff is the wait before retry n (1-based): 100ms doubling up to
// limit, scaled by a jitter factor of 0.8 to 1.2 from u in [0, 1).
func backoff(n int, limit time.Duration, u float64) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return time.Duration(float64(d) * (0.8 + 0.4*u))
}

// commitTimeout bounds a commit: one stuck behind a rebalance must not hold
// the loop.
const commitTimeout = 15 * time.Second

// mark commits, before f's insert, the offset of f's first record of each
// partition marked in flight up to f's end (ADR 0044): a recorder that
// takes a partition over after a crash looks up exactly those records.
func (r *recorder) mark(ctx context.Context, f *batch.Batch) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	start, marks := map[tp]kgo.EpochOffset{}, map[tp]string{}
	f.Partitions(func(t string, p int32, first, next kgo.EpochOffset) {
		start[tp{t, p}] = first
		marks[tp{t, p}] = markInFlight + strconv.FormatInt(next.Offset, 10)
	})
	return r.commitMarked(ctx, start, func(k tp) string { return marks[k] })
}

// commit commits f's offsets, marked clean, after its records were
// inserted, also while shutting down. A failed commit is logged and left
// to the next one: the mark before the insert still names the records, so
// the next owner looks them up.
func (r *recorder) commit(ctx context.Context, f *batch.Batch) {
	if f.Empty() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	next := map[tp]kgo.EpochOffset{}
	f.Partitions(func(t string, p int32, _, n kgo.EpochOffset) { next[tp{t, p}] = n })
	if err := r.commitMarked(ctx, next, func(tp) string { return markClean }); err != nil {
		r.log.Warn("commit failed; the records are inserted, and looked up before they are inserted again", zap.Error(err))
	}
}
