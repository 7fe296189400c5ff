package deliverer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/deliverer/internal/breaker"
	"github.com/hookpipe/hookpipe/deliverer/internal/ratelimit"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// Endpoint protection around an attempt (docs/design.md, "Endpoint protection",
// invariants 5 and 7). Before an attempt, gate asks the subscription's
// circuit breaker and rate limit; a delivery they hold back is not
// attempted and does not use up its schedule: it goes to a retry tier with
// its attempt number unchanged and an attempt record saying why (blocked
// breaker_open, or throttled rate_limited_local), like a spilled one, and
// an ordered key is held behind it. After the attempt, settle counts the
// result in the breaker, logs its transitions once (only the replica that
// made one sees it) and sets or clears the subscription's recovery mark
// for the retrier. A delivery dead-lettered by exhausted retries feeds
// auto-disable. With Redis unreachable all of it fails open.

// protection is the deliverer's endpoint protection; nil when Redis is not
// configured.
type protection struct {
	cfg     Protection
	g       *redisstate.Guard
	breaker *breaker.Breaker
	limiter *ratelimit.Limiter
	log     *zap.Logger

	stopFlush context.CancelFunc
	flushed   chan struct{}
}

// newProtection connects to Redis (without waiting for it); nil when no
// Redis is configured.
func newProtection(cfg Protection, maxInFlight int, log *zap.Logger) (*protection, error) {
	g, err := redisstate.Open(cfg.Redis, log)
	if err != nil || g == nil {
		return nil, err
	}
	p := &protection{
		cfg:     cfg,
		g:       g,
		breaker: breaker.New(g, cfg.Breaker),
		// A quarter of the workers at most wait for a rate limit, so
		// throttled subscriptions never take the workers of the others.
		limiter: ratelimit.New(g, cfg.RateLimitMaxWait, max(1, maxInFlight/4)),
		log:     log,
		flushed: make(chan struct{}),
	}
	var ctx context.Context
	ctx, p.stopFlush = context.WithCancel(context.Background())
	go p.flushLoop(ctx)
	return p, nil
}

// finalFlush bounds the last count of successes at shutdown.
const finalFlush = time.Second

// flushLoop counts the breakers' gathered successes every
// breaker.FlushInterval, and once more when stopped.
func (p *protection) flushLoop(ctx context.Context) {
	defer close(p.flushed)
	tick := time.NewTicker(breaker.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.breaker.Flush(ctx)
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.Background(), finalFlush)
			p.breaker.Flush(last)
			cancel()
			return
		}
	}
}

// close counts the last successes and disconnects; the workers have
// stopped.
func (p *protection) close() {
	if p != nil {
		p.stopFlush()
		<-p.flushed
		_ = p.g.Close()
	}
}

// gate decides whether a delivery is attempted now. When it is not, it
// returns the records that park it in a retry tier and the verdict
// (delayed, or cut when ctx ended during a rate-limit wait).
func (d *deliverer) gate(ctx context.Context, rec *kgo.Record, sub *topics.Subscription, del *topics.Delivery) (breaker.Ticket, []*kgo.Record, verdict, bool) {
	t, hb, ok := d.admit(ctx, sub, charge{del.Tenant, 1})
	switch {
	case !ok:
		return t, nil, cut, false
	case hb != nil:
		return t, d.delay(ctx, rec, del, hb.wait, hb.outcome, hb.category, hb.why), delayed, false
	}
	return t, nil, finished, true
}

// holdBack is why, and for how long, a request may not go now.
type holdBack struct {
	wait                   time.Duration
	outcome, category, why string
}

// charge is what a request counts against a tenant's delivery quota: its
// events of the tenant, each a delivery (a batch carries several).
type charge struct {
	tenant string
	events int
}

// admit decides whether a request to sub, carrying the deliveries
// charged, goes now: nil, or what holds it back; ok is false when ctx
// ended during a rate-limit wait. The subscription's rate limit counts
// requests, a batch once; a tenant's quota counts its deliveries.
func (d *deliverer) admit(ctx context.Context, sub *topics.Subscription, charges ...charge) (breaker.Ticket, *holdBack, bool) {
	p := d.prot
	if p == nil {
		return breaker.Ticket{}, nil, true
	}
	dec := p.breaker.Allow(ctx, sub.ID)
	if dec.Transition == breaker.HalfOpen {
		p.log.Info("circuit breaker half-open: probing the endpoint", zap.String("subscription", sub.ID),
			zap.Int("probes", p.cfg.Breaker.Probes))
	}
	if !dec.Allowed {
		// Blocked until the breaker may let it through, and at least as
		// long as the endpoint has been failing: over a long outage a
		// delivery backs off as its retries would, instead of coming back
		// every sleep window (a blocked record and an attempt record each
		// time). When the breaker closes, the retrier releases the waiting
		// deliveries early (recovery acceleration). Spread a little, so a
		// crowd of blocked deliveries does not come back at one instant.
		wait := max(dec.RetryIn, dec.OpenFor)
		wait += rand.N(wait/5 + time.Millisecond)
		return dec.Ticket, &holdBack{wait, topics.OutcomeBlocked, topics.FailureBreakerOpen,
			"circuit breaker open: endpoint failing"}, true
	}
	if dec.Ticket.Probe != 0 {
		// A half-open probe goes now: delayed by the rate limit it would
		// never report, and the breaker would stay half-open for a whole
		// sleep window.
		return dec.Ticket, nil, true
	}
	if wait := p.limiter.Take(ctx, sub.ID, sub.RateLimitPerS); wait > 0 {
		if ctx.Err() != nil {
			return dec.Ticket, nil, false
		}
		return dec.Ticket, &holdBack{wait, topics.OutcomeThrottled, topics.FailureThrottled,
			"rate limit of " + strconv.FormatFloat(sub.RateLimitPerS, 'g', -1, 64) + "/s reached"}, true
	}
	for _, c := range charges {
		quota := d.tenants.Get(c.tenant).Rate(p.cfg.TenantRate)
		if c.tenant == "" || quota <= 0 {
			continue
		}
		if wait := p.limiter.TakeTenant(ctx, c.tenant, quota, c.events); wait > 0 {
			if ctx.Err() != nil {
				return dec.Ticket, nil, false
			}
			return dec.Ticket, &holdBack{wait, topics.OutcomeThrottled, topics.FailureTenantQuota,
				"tenant quota of " + strconv.FormatFloat(quota, 'g', -1, 64) + "/s reached"}, true
		}
	}
	return dec.Ticket, nil, true
}

// delay parks a delivery unattempted in the retry tier for wait (capped
// at the longest tier), attempt number unchanged.
func (d *deliverer) delay(ctx context.Context, rec *kgo.Record, del *topics.Delivery, wait time.Duration, outcome, category, why string) []*kgo.Record {
	now := time.Now()
	wait = min(wait, d.names.Tiers[len(d.names.Tiers)-1])
	next := *del
	next.NotBefore = topics.DueAt(now, wait)
	att := newAttempt(del, now)
	att.Outcome, att.FailureCategory, att.NextAttemptAt, att.Error = outcome, category, next.NotBefore, why
	return []*kgo.Record{d.attemptRecord(ctx, rec, &att), d.retryRecord(ctx, rec, &next, d.names.TierFor(wait), category)}
}

// headAttempt is the attempt number a held key waits for after a delivery
// went to a retry tier: the next one when it was attempted, the same one
// when it was delayed unattempted.
func headAttempt(del *topics.Delivery, v verdict) int {
	if v == delayed {
		return del.Attempt
	}
	return del.Attempt + 1
}

// settle counts an attempt's result in the subscription's breaker.
func (d *deliverer) settle(ctx context.Context, sub *topics.Subscription, t breaker.Ticket, res classify.Result) {
	p := d.prot
	if p == nil {
		return
	}
	r := breaker.Neutral
	switch res.Action {
	case classify.Success:
		r = breaker.Success
	case classify.Retry:
		r = breaker.Failure
	}
	o, err := p.breaker.Record(ctx, sub.ID, t, r)
	if err != nil || o.Transition == "" {
		return
	}
	log := p.log.With(zap.String("subscription", sub.ID), zap.String("url", topics.RedactURL(sub.URL)))
	switch o.Transition {
	case breaker.Opened, breaker.Reopened:
		what := "circuit breaker opened: endpoint failing"
		if o.Transition == breaker.Reopened {
			what = "circuit breaker reopened: a probe failed"
		}
		log.Warn(what, zap.Int64("calls", o.Calls), zap.Int64("failures", o.Failures),
			zap.Duration("probe_in", p.cfg.Breaker.SleepWindow))
		if o.Transition == breaker.Opened {
			d.breakerNotice(ctx, sub, topics.NoticeFailing, fmt.Sprintf("circuit breaker opened: %d of the last %d attempts failed; "+
				"deliveries wait in the retry tiers, a probe in %s", o.Failures, o.Calls, p.cfg.Breaker.SleepWindow), time.Now().UTC())
		}
		if err := p.g.ClearRecovering(ctx, sub.ID); err != nil {
			log.Debug("clearing the recovery mark", zap.Error(err))
		}
	case breaker.Closed:
		log.Info("circuit breaker closed: endpoint recovered; its pending retries are released early")
		d.breakerNotice(ctx, sub, topics.NoticeRecovered, "circuit breaker closed: the probes succeeded", time.Now().UTC())
		if err := p.g.MarkRecovering(ctx, sub.ID, time.Now()); err != nil {
			log.Warn("cannot mark the subscription recovering; its retries wait out their tiers", zap.Error(err))
		}
	}
}

// failingSinceScript sets a subscription's failing-since mark unless it
// is set, and returns it. KEYS[1] the mark, ARGV[1] now (unix ms),
// ARGV[2] its TTL (ms): long enough to outlive the window, short enough
// that subscriptions gone quiet are forgotten.
var failingSinceScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
return redis.call('GET', KEYS[1])
`)

// exhausted notes a delivery dead-lettered by exhausted retries. When the
// subscription has had no success for AutoDisableAfter (counted from its
// last update at the latest, so re-enabling it starts afresh), it returns
// the record that disables it and says why in the attempt record.
func (d *deliverer) exhausted(ctx context.Context, sub *topics.Subscription, att *topics.Attempt, now time.Time) []*kgo.Record {
	p := d.prot
	if p == nil || p.cfg.AutoDisableAfter <= 0 {
		return nil
	}
	var ms int64
	err := p.g.Do(ctx, func(ctx context.Context, rdb redis.UniversalClient) error {
		var err error
		ms, err = failingSinceScript.Run(ctx, rdb, []string{p.g.Keys().FailingSince(sub.ID)},
			now.UnixMilli(), (2*p.cfg.AutoDisableAfter + 24*time.Hour).Milliseconds()).Int64()
		return err
	})
	if err != nil {
		return nil
	}
	since := time.UnixMilli(ms)
	if sub.UpdatedAt.After(since) {
		since = sub.UpdatedAt
	}
	if now.Sub(since) < p.cfg.AutoDisableAfter {
		return nil
	}
	disabled := *sub
	disabled.Enabled = false
	disabled.DisabledReason = fmt.Sprintf("auto-disabled: deliveries failing since %s (over %s) after exhausting retries",
		since.UTC().Format(time.RFC3339), p.cfg.AutoDisableAfter)
	disabled.UpdatedAt = now
	att.Error += " (subscription " + disabled.DisabledReason + ")"
	p.log.Warn("disabling subscription: "+disabled.DisabledReason, zap.String("subscription", sub.ID),
		zap.String("url", topics.RedactURL(sub.URL)))
	return []*kgo.Record{d.subscriptionRecord(&disabled)}
}
