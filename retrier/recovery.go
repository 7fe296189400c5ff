package retrier

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/hookpipe/hookpipe/retrier/internal/window"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/topics"
)

// Recovery acceleration (docs/design.md, "Endpoint protection"). When a subscription's
// circuit breaker closes after being open, the deliverer that closed it
// writes a recovery mark (redisstate.Guard.MarkRecovering: the
// subscription and when). The retrier reads the marks once a second and
// releases the held records of marked subscriptions before they are due,
// if they were written to their tier before the mark (retries of the
// outage, not new failures of the recovered endpoint), at
// RecoveryRate per second per subscription, so the endpoint that just came
// back is not flooded. Only the look-ahead window of each partition is
// held; releasing from it makes room and the partition fetches on. A mark
// is forgotten when the breaker opens again (the deliverer removes it) or
// once no record written before it can still be waiting in a tier.
//
// The rate ramps: it starts at a tenth of RecoveryRate and grows linearly
// to all of it over RecoveryRamp, so an endpoint just back is not met with
// its whole backlog at once. When the endpoint fails again (its breaker
// counts new failures) the rate halves and ramps again from there; when
// its breaker opens again, the mark is gone and early releases stop.
//
// The rate is per retrier process: a subscription's retries sit on one
// partition per tier (deliveries are partitioned by subscription), so it
// is at most the number of tiers times the rate across all replicas.

// marksRefresh is how often the marks are read from Redis.
const marksRefresh = time.Second

// recoveryTick is how often the poll loop wakes while marked
// subscriptions have retries waiting for their turn.
const recoveryTick = 50 * time.Millisecond

type recovery struct {
	g       *redisstate.Guard
	rate    float64
	ramp    time.Duration
	horizon time.Duration // how long a mark can matter
	log     *zap.Logger

	mu          sync.Mutex
	marks       map[string]time.Time // subscription -> when its breaker closed
	limits      map[string]*ramped
	lastRefused time.Time // a candidate waited for its turn
	released    uint64
}

// newRecovery connects to Redis; nil when Redis is not configured or the
// rate is 0 (acceleration off).
func newRecovery(cfg Config, log *zap.Logger) (*recovery, error) {
	if cfg.RecoveryRate <= 0 {
		return nil, nil
	}
	g, err := redisstate.Open(cfg.Redis, log)
	if err != nil || g == nil {
		return nil, err
	}
	// A record waits in a tier at most about twice the tier's delay
	// (jitter, Retry-After clamped to 2x).
	longest := time.Duration(0)
	for _, t := range cfg.Kafka.Names.Tiers {
		longest = max(longest, t)
	}
	return &recovery{g: g, rate: cfg.RecoveryRate, ramp: cfg.RecoveryRamp, horizon: 2*longest + time.Minute, log: log,
		marks: map[string]time.Time{}, limits: map[string]*ramped{}}, nil
}

func (rc *recovery) close() {
	if rc != nil {
		_ = rc.g.Close()
	}
}

// run refreshes the marks until ctx is done.
func (rc *recovery) run(ctx context.Context) {
	if rc == nil {
		return
	}
	t := time.NewTicker(marksRefresh)
	defer t.Stop()
	for {
		rc.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (rc *recovery) refresh(ctx context.Context) {
	now := time.Now()
	marks, err := rc.g.Recovering(ctx, now.Add(-rc.horizon))
	if err != nil {
		return // Redis down (logged by the guard): keep the marks known
	}
	// The failures each marked subscription's breaker counts now: more
	// than last time means the endpoint fails again.
	failures := map[string]int64{}
	for sub := range marks {
		if st, err := rc.g.ReadBreaker(ctx, sub); err == nil {
			failures[sub] = st.Failures
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for sub, at := range marks {
		if old, ok := rc.marks[sub]; !ok || !old.Equal(at) {
			rc.log.Info("subscription recovered: releasing its pending retries early",
				zap.String("subscription", sub), zap.Time("breaker_closed", at), zap.Float64("per_second", rc.rate),
				zap.Duration("ramp", rc.ramp))
			rc.limits[sub] = newRamped(rc.rate, rc.ramp, now, failures[sub])
			continue
		}
		if l := rc.limits[sub]; l.failed(failures[sub], now) {
			rc.log.Info("recovering subscription fails again: halving its early releases",
				zap.String("subscription", sub), zap.Float64("per_second", l.base))
		}
	}
	for sub := range rc.limits {
		if _, ok := marks[sub]; !ok {
			delete(rc.limits, sub)
		}
	}
	rc.marks = marks
}

// ramped is the early-release rate of one recovering subscription: from
// base at from, linearly up to max over ramp.
type ramped struct {
	lim       *rate.Limiter
	max, base float64
	ramp      time.Duration
	from      time.Time
	failures  int64 // the breaker's failure count last seen
}

func newRamped(most float64, ramp time.Duration, now time.Time, failures int64) *ramped {
	base := most
	if ramp > 0 {
		base = most / 10
	}
	// A burst of a tenth of a second at the full rate.
	return &ramped{lim: rate.NewLimiter(rate.Limit(base), int(math.Max(1, math.Ceil(most/10)))), max: most, base: base,
		ramp: ramp, from: now, failures: failures}
}

// at is the rate at now.
func (r *ramped) at(now time.Time) float64 {
	if r.ramp <= 0 || !now.Before(r.from.Add(r.ramp)) {
		return r.max
	}
	return r.base + (r.max-r.base)*float64(now.Sub(r.from))/float64(r.ramp)
}

// failed notes the breaker's failure count; when it grew, the rate halves
// (down to a tenth of the most) and ramps again from now. It reports
// whether it did.
func (r *ramped) failed(failures int64, now time.Time) bool {
	grew := failures > r.failures
	r.failures = failures
	if !grew {
		return false
	}
	r.base, r.from = math.Max(r.max/10, r.at(now)/2), now
	if r.ramp <= 0 {
		r.ramp = time.Minute // a full-rate start still ramps back after a failure
	}
	return true
}

// allow takes one release at now, at the rate of now.
func (r *ramped) allow(now time.Time) bool {
	r.lim.SetLimitAt(now, rate.Limit(r.at(now)))
	return r.lim.AllowN(now, 1)
}

// early returns the held records of h that go out before they are due:
// those of marked subscriptions written before the mark, as far as the
// subscription's rate allows now. The caller holds the retrier's lock.
func (rc *recovery) early(h *window.Partition, now time.Time) []window.Record {
	if rc == nil {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.marks) == 0 {
		return nil
	}
	var out []window.Record
	for _, r := range h.NotDue(now) {
		sub := topics.SubscriptionOfKey(r.Rec.Key)
		at, ok := rc.marks[string(sub)]
		if !ok || !r.Rec.Timestamp.Before(at) {
			continue
		}
		if !rc.limits[string(sub)].allow(now) {
			rc.lastRefused = now
			continue
		}
		out = append(out, r)
	}
	rc.released += uint64(len(out))
	return out
}

// pending reports whether marked subscriptions have retries waiting for
// their turn: the poll loop then wakes every recoveryTick.
func (rc *recovery) pending() bool {
	if rc == nil {
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return time.Since(rc.lastRefused) < time.Second
}

// register adds the recovery metrics: Redis (package redisstate) and the
// records released early. Without Redis there are none.
func (rc *recovery) register(reg prometheus.Registerer) {
	if rc == nil {
		return
	}
	redisstate.Register(reg, rc.g)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "retrier",
		Name: "released_early_total", Help: "Retries released before they were due because their subscription's breaker closed (recovery acceleration)."},
		func() float64 { return float64(rc.ReleasedEarlyTotal()) }))
}

// ReleasedEarlyTotal counts the records released before they were due (a
// metric).
func (rc *recovery) ReleasedEarlyTotal() uint64 {
	if rc == nil {
		return 0
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.released
}
