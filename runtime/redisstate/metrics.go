package redisstate

import "github.com/prometheus/client_golang/prometheus"

// Register adds the Redis metrics of g to reg: webhooks_redis_up (1 while
// calls go to Redis, 0 while they fail open), webhooks_redis_fail_open_total
// webhooks_redis_outages_total and webhooks_redis_calls_total{op} (commands
// sent, by name: with a delivery counter, the Redis operations a delivery
// costs). A nil g (no Redis configured) adds none.
func Register(reg prometheus.Registerer, g *Guard) {
	if g == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "webhooks_redis_up",
			Help: "1 while calls go to Redis, 0 while Redis is unreachable and protection fails open."},
			func() float64 {
				if g.Available() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "webhooks_redis_fail_open_total",
			Help: "Redis calls skipped or failed while Redis was unreachable: each went ahead without the protection."},
			func() float64 { return float64(g.FailOpenTotal()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "webhooks_redis_outages_total",
			Help: "Times Redis (on a Cluster: a node) went from reachable to unreachable."},
			func() float64 { return float64(g.OutagesTotal()) }),
		g.byOp,
	)
}
