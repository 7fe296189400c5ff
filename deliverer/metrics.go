package deliverer

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookpipe/hookpipe/topics"
	"github.com/hookpipe/hookpipe/topics/ops"
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
}

// responseClasses label webhooks_http_responses_total: the status class, or
// "error" when no response came (timeout, connection, DNS, TLS, refused by
// the SSRF guard).
var responseClasses = []string{"2xx", "3xx", "4xx", "5xx", "error"}

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
	reg.MustRegister(m.deliveries, m.responses, m.duration, m.inFlight, m.retries, m.dlq)
	// Series that exist from the start, so that rate() sees their first
	// increase.
	for _, o := range []string{topics.OutcomeSuccess, topics.OutcomeRetry, topics.OutcomeDead, topics.OutcomeBlocked,
		topics.OutcomeThrottled, topics.OutcomeSkipped} {
		m.deliveries.WithLabelValues(o)
	}
	for _, c := range responseClasses {
		m.responses.WithLabelValues(c)
	}
	for _, t := range names.Tiers {
		m.retries.WithLabelValues(topics.FormatDelay(t))
	}
	for _, c := range []string{topics.FailureExhausted, topics.FailurePermanent4xx, topics.FailureInvalid} {
		m.dlq.WithLabelValues(c)
	}
	return m
}

func (m *metrics) outcome(o string) {
	if m != nil {
		m.deliveries.WithLabelValues(o).Inc()
	}
}

func (m *metrics) retry(tier time.Duration) {
	if m != nil {
		m.retries.WithLabelValues(topics.FormatDelay(tier)).Inc()
	}
}

func (m *metrics) deadLetter(category string) {
	if m != nil {
		m.dlq.WithLabelValues(category).Inc()
	}
}

// responseClass is the class label of an HTTP attempt.
func responseClass(status int, err error) string {
	if err != nil || status < 200 || status > 599 {
		return "error"
	}
	return strconv.Itoa(status/100) + "xx"
}

// send is sender.send, metered: in flight while it runs, then its class and
// duration, unless shutdown cut it short (those attempts do not count).
func (d *deliverer) send(ctx context.Context, sub *topics.Subscription, del *topics.Delivery, keys [][]byte) (response, error) {
	m := d.m
	if m == nil {
		return d.sender.send(ctx, sub, del, keys)
	}
	m.inFlight.Inc()
	resp, err := d.sender.send(ctx, sub, del, keys)
	m.inFlight.Dec()
	if ctx.Err() == nil {
		m.responses.WithLabelValues(responseClass(resp.status, err)).Inc()
		m.duration.Observe(resp.duration.Seconds())
	}
	return resp, err
}
