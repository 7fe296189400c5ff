package recorder

import (
	"context"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// assigned reads, for each new partition, which of its records the
// previous owner may have inserted without committing (the mark of the
// group's last commit, ADR 0044): they are read as suspect.
func (r *recorder) assigned(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	windows := r.windows(ctx, cl, parts)
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.fresh, windows)
}

// revoked inserts and commits what was read from the partitions before
// they go, if ClickHouse is up; what cannot be inserted is dropped for the
// next owner.
func (r *recorder) revoked(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settle(ctx, r.cfg.ShutdownTimeout, func() bool { return r.b.Has(parts) })
	r.forget(parts)
}

// lost partitions cannot be committed: their records are dropped (an
// insert in flight lands first, as it may cover them).
func (r *recorder) lost(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wait(ctx, r.cfg.InsertTimeout)
	r.forget(parts)
}

// settle lands the insert in flight, then, if ClickHouse is up and want
// says so, inserts the filling batch too and waits for it, all within
// limit. Called with mu held.
func (r *recorder) settle(ctx context.Context, limit time.Duration, want func() bool) bool {
	deadline := time.Now().Add(limit)
	if !r.wait(ctx, limit) {
		return false
	}
	if r.down || r.flight != nil || r.b.Empty() || !want() {
		return r.flight == nil && r.b.Empty()
	}
	r.handOver()
	r.launch()
	return r.wait(ctx, time.Until(deadline)) && r.flight == nil
}

// forget drops the records of partitions this recorder no longer owns.
// Called with mu held and nothing in flight.
func (r *recorder) forget(parts map[string][]int32) {
	if r.running != nil {
		return // the insert did not finish: leave everything to the next owners
	}
	r.b.Drop(parts)
	if r.flight != nil {
		r.flight.Drop(parts)
		if r.flight.Empty() {
			r.flight, r.spare = nil, r.flight
		}
	}
	for t, ps := range parts {
		for _, p := range ps {
			delete(r.fresh, tp{t, p})
		}
	}
	if r.flight == nil && r.down {
		// Nothing left to retry: fetch again (the next insert shows
		// whether ClickHouse is back).
		r.down, r.failures = false, 0
		r.downGauge.Store(false)
	}
}

// shutdown lands the insert in flight and inserts the batch in hand, if
// ClickHouse is up, within the shutdown timeout; what is left is read
// again by the next owner.
func (r *recorder) shutdown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.flight == nil && r.b.Empty() {
		return
	}
	if r.down && r.running == nil {
		r.log.Info("ClickHouse is down: the records in hand are left to the next owner", zap.Int("records", r.inHand()))
		return
	}
	if !r.settle(context.Background(), r.cfg.ShutdownTimeout, func() bool { return true }) {
		r.log.Warn("could not insert the last records: they are read again by the next owner", zap.Int("records", r.inHand()))
	}
}
