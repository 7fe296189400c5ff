package retrier

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookpipe/hookpipe/topics"
	"github.com/hookpipe/hookpipe/topics/ops"
)

// metrics are the retrier's Prometheus metrics (charts/webhooks/README.md
// lists them). A nil *metrics counts nothing.
type metrics struct {
	released prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, r *retrier) *metrics {
	m := &metrics{
		released: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "retrier",
			Name: "released_total", Help: "Due retries released to the deliveries topic (acknowledged)."}),
	}
	reg.MustRegister(m.released, &heldCollector{r: r,
		held: prometheus.NewDesc(ops.Namespace+"_retrier_held_records",
			"Records fetched from a retry tier and held in memory until due, by tier.", []string{"tier"}, nil),
		oldest: prometheus.NewDesc(ops.Namespace+"_retrier_oldest_due_timestamp_seconds",
			"Earliest due time (Unix seconds) among the records held from a tier; absent while none is held. "+
				"Far in the past means releases are stuck.", []string{"tier"}, nil),
	})
	return m
}

func (m *metrics) release(n int) {
	if m != nil {
		m.released.Add(float64(n))
	}
}

// heldCollector reads the held records at scrape time.
type heldCollector struct {
	r            *retrier
	held, oldest *prometheus.Desc
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.oldest
}

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	tiers := make(map[string]string, len(r.names.Tiers))
	for _, d := range r.names.Tiers {
		tiers[r.names.Retry(d)] = topics.FormatDelay(d)
	}
	type stat struct {
		n      int
		oldest float64 // Unix seconds; 0: nothing held
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
		if s.n > 0 {
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.oldest, tier)
		}
	}
}
