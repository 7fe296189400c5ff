package dispatcher

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

// metrics are the dispatcher's Prometheus metrics (docs/operations.md
// lists them). Everything is counted when its transaction committed, so the
// counters never include work that is dispatched again.
type metrics struct {
	events       prometheus.Counter
	deliveries   prometheus.Counter
	deadLetters  prometheus.Counter
	transactions *prometheus.CounterVec
	duration     prometheus.Histogram
	filterErrors prometheus.Counter
	schemaDead   prometheus.Counter
	validation   *prometheus.CounterVec
}

// dead counts a batch's dead letters by category.
type dead struct{ invalid, schema int }

func (d *dead) add(p *polled) {
	if p.bad != nil {
		d.invalid++
	} else {
		d.schema++
	}
}

// validationCounts counts a batch's events by type and catalog outcome;
// unchecked events are not counted, and unknown types are counted under
// the type "" (event types are not bounded, the catalog is).
type validationCounts map[[2]string]int

func (v validationCounts) add(p *polled) {
	if p.bad != nil || p.verdict.Outcome == "" || p.verdict.Outcome == catalog.OutcomeUnchecked {
		return
	}
	typ := ""
	if p.verdict.Known {
		typ = p.ev.Type
	}
	v[[2]string{typ, p.verdict.Outcome}]++
}

func newMetrics(reg prometheus.Registerer) *metrics {
	dlq := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Name: "dlq_total",
		Help: "Records written to the dead-letter topic, by failure category."}, []string{"category"})
	m := &metrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
			Name: "events_total", Help: "Events consumed, in committed transactions."}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
			Name: "deliveries_total", Help: "Delivery records produced (one per matching subscription), in committed transactions."}),
		// Undecodable events and the events their schemas refuse are
		// the dispatcher's only dead letters.
		deadLetters: dlq.WithLabelValues(topics.FailureInvalid),
		schemaDead:  dlq.WithLabelValues(topics.FailureSchema),
		validation: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
			Name: "events_validated_total", Help: "Events checked against the event catalog, in committed transactions, by type and outcome " +
				"(valid, invalid, unknown: a type not in the catalog, with WEBHOOKS_UNKNOWN_EVENT_TYPES warn or reject, counted under type \"\")."},
			[]string{"type", "outcome"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
			Name: "transactions_total", Help: "Transactions ended, by result: committed, aborted (the batch is dispatched again), or repaired (one whose marker was lost, ended again)."},
			[]string{"result"}),
		// A transaction is a batch of up to 1000 events: produce, flush,
		// commit. On a healthy cluster that takes a few to a few hundred
		// milliseconds; seconds mean a slow broker or a transaction coordinator
		// under load, and the transaction timeout (10s) caps it.
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
			Name: "transaction_duration_seconds", Help: "Time from the start of a transaction to its commit.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}),
		filterErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ops.Namespace, Subsystem: "dispatcher",
			Name: "filter_errors_total", Help: "Subscription filters that failed on an event (a missing field, a type they did not expect, the cost limit): the event was not delivered to that subscription."}),
	}
	reg.MustRegister(m.events, m.deliveries, dlq, m.transactions, m.duration, m.filterErrors, m.validation)
	return m
}

// repaired counts a transaction ended again to write a marker it lost
// (markers).
func (m *metrics) repaired() {
	if m != nil {
		m.transactions.WithLabelValues("repaired").Inc()
	}
}

func (m *metrics) transaction(committed bool, events, deliveries int, dead dead, filterErrors int, took time.Duration) {
	if m == nil {
		return
	}
	if !committed {
		m.transactions.WithLabelValues("aborted").Inc()
		return
	}
	m.transactions.WithLabelValues("committed").Inc()
	m.events.Add(float64(events))
	m.deliveries.Add(float64(deliveries))
	m.deadLetters.Add(float64(dead.invalid))
	m.schemaDead.Add(float64(dead.schema))
	m.filterErrors.Add(float64(filterErrors))
	m.duration.Observe(took.Seconds())
}

// validated counts a committed batch's catalog outcomes.
func (m *metrics) validated(v validationCounts) {
	if m == nil {
		return
	}
	for k, n := range v {
		m.validation.WithLabelValues(k[0], k[1]).Add(float64(n))
	}
}
