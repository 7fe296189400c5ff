package recorder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookpipe/hookpipe/recorder/internal/store"
	"github.com/hookpipe/hookpipe/runtime/ops"
)

// metrics are the recorder's Prometheus metrics. A nil *metrics counts
// nothing.
type metrics struct {
	inserted    prometheus.Counter
	lookedUp    prometheus.Counter
	present     prometheus.Counter
	undecodable prometheus.Counter
	failures    prometheus.Counter
	insertTime  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, r *recorder) *metrics {
	m := &metrics{
		inserted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "rows_inserted_total", Help: "Attempt rows inserted into ClickHouse (acknowledged)."}),
		lookedUp: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "rows_looked_up_total", Help: "Attempt records looked up in ClickHouse before their insert: those the previous owner of their partition marked in flight, and those of an insert that failed in a way that may have landed."}),
		present: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "rows_already_present_total", Help: "Attempt records read again (after a rebalance, restart or failed insert) and found already inserted: skipped."}),
		undecodable: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "undecodable_records_total", Help: "Records on the attempts topic that are not valid attempts: skipped."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "insert_failures_total", Help: "Inserts that failed or timed out; the batch is held and retried."}),
		// A batch of thousands of rows takes milliseconds on a healthy
		// server; the top buckets reach the default insert timeout (30s),
		// where a pile-up means ClickHouse is overloaded.
		insertTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "insert_duration_seconds", Help: "Duration of successful inserts, lookup of possible copies included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
	}
	reg.MustRegister(m.inserted, m.lookedUp, m.present, m.undecodable, m.failures, m.insertTime,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "clickhouse_up", Help: "1 while inserts succeed, 0 from a failed insert until one succeeds again."},
			func() float64 {
				if r.downGauge.Load() {
					return 0
				}
				return 1
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ops.Namespace, Subsystem: "recorder",
			Name: "held_records", Help: "Records read and not yet inserted (at most WEBHOOKS_RECORDER_BATCH_ROWS)."},
			func() float64 { return float64(r.held.Load()) }),
	)
	return m
}

func (m *metrics) insert(res store.Result, took time.Duration) {
	if m != nil {
		m.inserted.Add(float64(res.Inserted))
		m.lookedUp.Add(float64(res.LookedUp))
		m.present.Add(float64(res.Present))
		m.insertTime.Observe(took.Seconds())
	}
}

func (m *metrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *metrics) skipped() {
	if m != nil {
		m.undecodable.Inc()
	}
}
