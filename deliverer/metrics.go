package deliverer

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/deliverer/internal/breaker"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// metrics are the deliverer's Prometheus metrics (charts/webhooks/README.md
// lists them). No label carries a URL or a subscription id: per-endpoint
// detail lives in the attempts topic and ClickHouse. A nil *metrics counts
// nothing (tests that build a deliverer by hand).
type metrics struct {
	deliveries *prometheus.CounterVec // outcome
	responses  *prometheus.CounterVec // class
	duration   prometheus.Histogram
	inFlight   prometheus.Gauge
	retries    *prometheus.CounterVec // tier
	dlq        *prometheus.CounterVec // category
	parkedRead prometheus.Counter

	// byClass holds the responses series by class (classIndex), looked up
	// once rather than at every request.
	byClass [len(responseClasses)]prometheus.Counter
	// tallies holds, by counter and label (tallyAt), the context a record
	// carries to count on that series when acknowledged: one per label,
	// rather than a context and a series lookup per record.
	tallies sync.Map
}

// responseClasses label webhooks_http_responses_total: the status class,
// "acked" for a destination that acknowledged (no status), or "error" when
// no response came (timeout, connection, DNS, TLS, refused by the SSRF
// guard). classIndex depends on their order.
var responseClasses = [...]string{"2xx", "3xx", "4xx", "5xx", "error", "acked"}

// classError and classAcked are the indexes of "error" and "acked" in
// responseClasses.
const (
	classError = 4
	classAcked = 5
)

func newMetrics(reg prometheus.Registerer, names topics.Names) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "deliveries_total",
			Help: "Delivery records handled, by outcome (as in the attempts topic): success, retry, dead, blocked, throttled, skipped."},
			[]string{"outcome"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "http_responses_total",
			Help: "HTTP attempts by response class: 2xx, 3xx, 4xx, 5xx, or error when no response came."},
			[]string{"class"}),
		// From a receiver next door (a few milliseconds) to the default
		// subscription timeout (15s, the 15 bucket) and the longest one a
		// subscription may set (300s). Most endpoints answer in 50ms-1s,
		// where the buckets are densest; a pile-up at 15 means timeouts.
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ops.Namespace, Name: "delivery_duration_seconds",
			Help:    "Duration of HTTP attempts, from sending the request to reading the response (or failing).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300}}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ops.Namespace, Name: "deliveries_in_flight",
			Help: "HTTP attempts in progress."}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "retries_total",
			Help: "Deliveries sent to a retry tier, by tier delay (failed attempts, and overflow spilled unattempted)."},
			[]string{"tier"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "dlq_total",
			Help: "Records written to the dead-letter topic, by failure category."}, []string{"category"}),
	}
	m.parkedRead = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "parked_records_read_total",
		Help: "Records read from the parked topic to release ordered keys: what releases cost the broker."})
	reg.MustRegister(m.deliveries, m.responses, m.duration, m.inFlight, m.retries, m.dlq, m.parkedRead)
	// Series that exist from the start, so that rate() sees their first
	// increase.
	for _, o := range []string{topics.OutcomeSuccess, topics.OutcomeRetry, topics.OutcomeDead, topics.OutcomeBlocked,
		topics.OutcomeThrottled, topics.OutcomeSkipped} {
		m.deliveries.WithLabelValues(o)
	}
	for i, c := range responseClasses {
		m.byClass[i] = m.responses.WithLabelValues(c)
	}
	for _, t := range names.Tiers {
		m.retries.WithLabelValues(topics.FormatDelay(t))
	}
	for _, c := range []string{topics.FailureExhausted, topics.FailurePermanent4xx, topics.FailureInvalid} {
		m.dlq.WithLabelValues(c)
	}
	return m
}

// A record counts on a series once the broker has acknowledged it:
// counted when built, a record produced again after a failed produce (or
// by the replica that redoes the delivery) would count twice, and one
// never written would count once. The series rides in the record's
// context, under tallyKey.
type tallyKey struct{}

// tallyAt is a series: a counter and its label.
type tallyAt struct {
	counter *prometheus.CounterVec
	label   string
}

// tallied makes r count on counter's label when acknowledged (see acked).
// Without metrics r counts nothing.
func (m *metrics) tallied(r *kgo.Record, counter func(*metrics) *prometheus.CounterVec, label string) *kgo.Record {
	if m == nil {
		return r
	}
	at := tallyAt{counter(m), label}
	ctx, ok := m.tallies.Load(at)
	if !ok {
		ctx, _ = m.tallies.LoadOrStore(at, context.WithValue(context.Background(), tallyKey{}, at.counter.WithLabelValues(label)))
	}
	r.Context = ctx.(context.Context)
	return r
}

// acked counts a record the broker acknowledged.
func (m *metrics) acked(r *kgo.Record) {
	if m == nil || r.Context == nil {
		return
	}
	if c, ok := r.Context.Value(tallyKey{}).(prometheus.Counter); ok {
		c.Inc()
	}
}

func outcomes(m *metrics) *prometheus.CounterVec    { return m.deliveries }
func retries(m *metrics) *prometheus.CounterVec     { return m.retries }
func deadLetters(m *metrics) *prometheus.CounterVec { return m.dlq }

// classIndex is the index in responseClasses of an attempt's class: an
// HTTP status's class, "acked" for a destination that acknowledged (no
// status), or "error".
func classIndex(status int, err error) int {
	switch {
	case err == nil && status == 0:
		return classAcked
	case err != nil || status < 200 || status > 599:
		return classError
	}
	return status/100 - 2
}

// send is send.Sender.Send, metered (see metered).
func (d *deliverer) send(ctx context.Context, sub *topics.Subscription, del *topics.Delivery,
	traced []kgo.RecordHeader) (send.Response, error) {
	return d.metered(ctx, func() (send.Response, error) { return d.sender.Send(ctx, sub, del, traced) })
}

// sendBatch is send.Sender.SendBatch, metered (see metered): a batch is
// one request.
func (d *deliverer) sendBatch(ctx context.Context, sub *topics.Subscription, dels []*topics.Delivery,
	traced []kgo.RecordHeader) (send.Response, error) {
	return d.metered(ctx, func() (send.Response, error) { return d.sender.SendBatch(ctx, sub, dels, traced) })
}

// metered makes a request: in flight while it runs, then its class and
// duration, unless shutdown cut it short (those attempts do not count).
func (d *deliverer) metered(ctx context.Context, request func() (send.Response, error)) (send.Response, error) {
	m := d.m
	if m == nil {
		return request()
	}
	m.inFlight.Inc()
	resp, err := request()
	m.inFlight.Dec()
	if ctx.Err() == nil {
		m.byClass[classIndex(resp.Status, err)].Inc()
		m.duration.Observe(resp.Duration.Seconds())
	}
	return resp, err
}

// registerProtection adds the endpoint protection's metrics when Redis is
// configured: Redis itself (package redisstate), breaker transitions made
// by this replica, the breakers not closed across all replicas, and the
// rate limit's in-process waits. Deliveries delayed by a rate limit or an
// open breaker are webhooks_deliveries_total{outcome="throttled"|"blocked"}.
func registerProtection(reg prometheus.Registerer, p *protection) {
	if p == nil {
		return
	}
	redisstate.Register(reg, p.g)
	reg.MustRegister(
		&breakerCollector{b: p.breaker},
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "rate_limit_waits_total",
			Help: "Deliveries let through after waiting in-process for their subscription's rate limit."},
			func() float64 { return float64(p.limiter.WaitedTotal()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Name: "rate_limit_waiting",
			Help: "Deliveries waiting in-process for their subscription's rate limit now."},
			func() float64 { return float64(p.limiter.Waiting()) }),
	)
}

// openEvery is how long the breakers-open figures read from Redis are
// reused between scrapes.
const openEvery = 10 * time.Second

// breakerCollector serves webhooks_breaker_transitions_total{to} from the
// counts of this replica, and webhooks_breakers_open and
// webhooks_breaker_open_longest_seconds from Redis (the same on every
// replica: aggregate with max), read at most every openEvery and left out
// while Redis is unreachable.
type breakerCollector struct {
	b *breaker.Breaker

	mu      sync.Mutex
	read    time.Time
	ok      bool
	open    int64
	longest time.Duration
}

var (
	breakerTransitionsDesc = prometheus.NewDesc(ops.Namespace+"_breaker_transitions_total",
		"Circuit breaker transitions made by this replica, by the state entered: open (opened or reopened), half_open, closed.",
		[]string{"to"}, nil)
	breakersOpenDesc = prometheus.NewDesc(ops.Namespace+"_breakers_open",
		"Subscriptions whose circuit breaker is open or half-open, across all replicas (from Redis).", nil, nil)
	breakerOpenLongestDesc = prometheus.NewDesc(ops.Namespace+"_breaker_open_longest_seconds",
		"How long the breaker open longest has not been closed, across all replicas (from Redis); 0 when none is open.", nil, nil)
)

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerTransitionsDesc
	ch <- breakersOpenDesc
	ch <- breakerOpenLongestDesc
}

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for to, n := range map[string]uint64{"open": c.b.OpenedTotal(), "half_open": c.b.HalfOpenedTotal(), "closed": c.b.ClosedTotal()} {
		ch <- prometheus.MustNewConstMetric(breakerTransitionsDesc, prometheus.CounterValue, float64(n), to)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.read) >= openEvery {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, longest, err := c.b.Open(ctx)
		cancel()
		c.read, c.ok, c.open, c.longest = now, err == nil, n, longest
	}
	if c.ok {
		ch <- prometheus.MustNewConstMetric(breakersOpenDesc, prometheus.GaugeValue, float64(c.open))
		ch <- prometheus.MustNewConstMetric(breakerOpenLongestDesc, prometheus.GaugeValue, c.longest.Seconds())
	}
}

// readParked counts records read from the parked topic.
func (m *metrics) readParked(n int) {
	if m != nil {
		m.parkedRead.Add(float64(n))
	}
}

// watchUnsettled serves webhooks_deliveries_unsettled: the records no
// acknowledged commit covers yet, what a crash now would repeat (ADR 0029).
func watchUnsettled(reg prometheus.Registerer, u *unsettled) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Name: "deliveries_unsettled",
		Help: "Delivery records taken that no acknowledged commit covers yet: what a crash now would repeat (at most WEBHOOKS_DELIVERER_MAX_IN_FLIGHT)."},
		func() float64 { return float64(u.records()) }))
}

// watchHolds serves webhooks_held_keys and webhooks_oldest_hold_seconds
// from the hold table (the same on every replica: every replica reads the
// whole holds topic; aggregate with max). A key held far longer than its
// subscription's retry schedule may be stuck: the chart's
// WebhooksOrderedKeyHeldLong alert fires on it.
func watchHolds(reg prometheus.Registerer, t *table.HoldTable) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Name: "held_keys",
			Help: "Ordered keys held behind a failed delivery now."},
			func() float64 { return float64(t.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Name: "oldest_hold_seconds",
			Help: "How long the longest-held ordered key has been held (0 with none)."},
			func() float64 {
				if _, h, ok := t.Oldest(); ok {
					return time.Since(h.Since).Seconds()
				}
				return 0
			}),
	)
}
