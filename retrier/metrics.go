package retrier

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/retrier/internal/window"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

// metrics are the retrier's Prometheus metrics (charts/webhooks/README.md
// lists them). A nil *metrics counts nothing.
type metrics struct {
	released  prometheus.Counter
	scheduled *prometheus.CounterVec
	lateness  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, r *retrier) *metrics {
	m := &metrics{
		released: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "retrier",
			Name: "released_total", Help: "Due retries released to the redeliveries topic (acknowledged)."}),
		scheduled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "retrier",
			Name: "scheduled_total", Help: "Scheduled deliveries' waits that ended otherwise than in redeliveries (acknowledged): " +
				"action hop (into their next wait, deliver_at still ahead) or cancelled (recorded skipped, their event cancelled)."},
			[]string{"action"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ops.Namespace, Subsystem: "retrier",
			Name:    "release_lateness_seconds",
			Help:    "How long after its due time a retry was released (acknowledged); in steady state within 1 s + 1% of its delay.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 15, 60, 300, 1800, 3600}}),
	}
	reg.MustRegister(m.released, m.scheduled, m.lateness, &heldCollector{r: r,
		held: prometheus.NewDesc(ops.Namespace+"_retrier_held_records",
			"Records fetched from a retry tier and held in memory until due, by tier.", []string{"tier"}, nil),
		oldest: prometheus.NewDesc(ops.Namespace+"_retrier_oldest_due_timestamp_seconds",
			"Earliest due time (Unix seconds) among the records held from a tier; absent while none is held. "+
				"Far in the past means releases are stuck.", []string{"tier"}, nil),
		overrun: prometheus.NewDesc(ops.Namespace+"_retrier_overrun_partitions",
			"Partitions of a tier whose look-ahead window is full of records not yet due past the time a record "+
				"behind them could be due: those come out late. Raise WEBHOOKS_RETRIER_MAX_HELD_PER_PARTITION or add partitions.",
			[]string{"tier"}, nil),
	})
	return m
}

// forwarded counts the acknowledged records of a release: to redeliveries
// as released, a scheduled delivery's next wait as a hop, the attempt
// record of a cancelled one as cancelled.
func (m *metrics) forwarded(out []*kgo.Record, names topics.Names) {
	if m == nil {
		return
	}
	for _, r := range out {
		switch r.Topic {
		case names.Redeliveries():
			m.released.Inc()
		case names.Attempts():
			m.scheduled.WithLabelValues("cancelled").Inc()
		default:
			m.scheduled.WithLabelValues("hop").Inc()
		}
	}
}

// late observes how late the records released at released were, those
// due at now: not those released early for a recovered endpoint.
func (m *metrics) late(recs []window.Record, now, released time.Time) {
	if m == nil {
		return
	}
	for _, rec := range recs {
		if !rec.Due.After(now) {
			m.lateness.Observe(max(0, released.Sub(rec.Due).Seconds()))
		}
	}
}

// heldCollector reads the held records at scrape time.
type heldCollector struct {
	r                     *retrier
	held, oldest, overrun *prometheus.Desc
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.oldest
	ch <- c.overrun
}

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	tiers := make(map[string]string, len(r.names.Tiers))
	for _, d := range r.names.Tiers {
		tiers[r.names.Retry(d)] = topics.FormatDelay(d)
	}
	type stat struct {
		n       int
		oldest  float64 // Unix seconds; 0: nothing held
		overrun int
	}
	stats := map[string]*stat{}
	for _, tier := range tiers {
		stats[tier] = &stat{}
	}
	r.mu.Lock()
	for k, h := range r.held {
		s := stats[tiers[k.topic]]
		if s == nil {
			continue
		}
		s.n += h.Len()
		if r.overrun[k] {
			s.overrun++
		}
		if t, ok := h.Earliest(); ok {
			sec := float64(t.UnixNano()) / 1e9
			if s.oldest == 0 || sec < s.oldest {
				s.oldest = sec
			}
		}
	}
	r.mu.Unlock()
	for tier, s := range stats {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(s.n), tier)
		ch <- prometheus.MustNewConstMetric(c.overrun, prometheus.GaugeValue, float64(s.overrun), tier)
		if s.n > 0 {
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.oldest, tier)
		}
	}
}
