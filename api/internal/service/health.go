package service

import "time"

// Window is a subscription's delivery figures over a time window.
type Window struct {
	Requests    uint64  `json:"requests" doc:"Attempts that made an HTTP request."`
	Succeeded   uint64  `json:"succeeded"`
	SuccessRate float64 `json:"success_rate" doc:"succeeded / requests; 0 without requests."`
	P50MS       float64 `json:"p50_ms" doc:"Median request duration."`
	P99MS       float64 `json:"p99_ms"`
	Retried     uint64  `json:"retried" doc:"Attempts sent to a retry tier."`
	Dead        uint64  `json:"dead" doc:"Deliveries dead-lettered."`
}

// LastAttempt is the last success or failure of a subscription.
type LastAttempt struct {
	At              time.Time `json:"at"`
	EventID         string    `json:"event_id"`
	HTTPStatus      int       `json:"http_status,omitempty"`
	FailureCategory string    `json:"failure_category,omitempty"`
}

// Breaker is a subscription's circuit breaker as every deliverer sees it.
type Breaker struct {
	State    string     `json:"state" enum:"closed,open,half_open,unknown" doc:"unknown: Redis did not answer."`
	Since    *time.Time `json:"since,omitempty"`
	Until    *time.Time `json:"until,omitempty" doc:"When an open breaker lets probes through."`
	Calls    int64      `json:"calls" doc:"Attempts counted over the breaker window."`
	Failures int64      `json:"failures"`
}

// Health is a subscription's delivery health.
type Health struct {
	SubscriptionID string       `json:"subscription_id"`
	Enabled        bool         `json:"enabled"`
	Breaker        Breaker      `json:"breaker"`
	LastHour       Window       `json:"last_hour"`
	LastDay        Window       `json:"last_day"`
	LastSuccess    *LastAttempt `json:"last_success,omitempty"`
	LastFailure    *LastAttempt `json:"last_failure,omitempty"`
}
