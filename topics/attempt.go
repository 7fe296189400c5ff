package topics

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Outcomes of an attempt record.
const (
	OutcomeSuccess   = "success"   // 2xx
	OutcomeRetry     = "retry"     // failed, sent to a retry tier
	OutcomeDead      = "dead"      // failed, sent to the dlq
	OutcomeBlocked   = "blocked"   // not attempted: breaker open or key held
	OutcomeThrottled = "throttled" // not attempted: rate limited, delayed
	OutcomeSkipped   = "skipped"   // not attempted: subscription deleted or disabled
)

// Failure categories of an attempt or dead letter.
const (
	FailureNone         = ""
	FailureTimeout      = "timeout"
	FailureConnection   = "connection"
	FailureDNS          = "dns"
	FailureTLS          = "tls"
	FailureRedirect     = "redirect"      // 3xx: redirects are not followed
	FailureRateLimited  = "rate_limited"  // 429
	FailureServerError  = "server_error"  // 5xx
	FailureRetryable4xx = "retryable_4xx" // 408, 425
	FailurePermanent4xx = "permanent_4xx" // 400, 401, 403, 404, 405, 413, 414, 415, 422
	FailureOther4xx     = "other_4xx"     // other 4xx, retried
	FailureGone         = "gone"          // 410: the subscription is disabled
	FailureBlockedAddr  = "blocked_address"
	FailureAuth         = "auth" // the endpoint's auth could not be used: no OAuth2 token, say
	FailureDeleted      = "subscription_deleted"
	FailureDisabled     = "subscription_disabled"
	FailureInvalid      = "invalid_record"
	FailureExhausted    = "exhausted"
	FailureKeyHeld      = "key_held"           // parked behind a failed delivery of the same ordered key
	FailureBusy         = "subscription_busy"  // spilled: the subscription had its queue limit held
	FailureBreakerOpen  = "breaker_open"       // blocked: the subscription's circuit breaker is open
	FailureThrottled    = "rate_limited_local" // throttled: the subscription's own rate limit
	FailureTenantQuota  = "tenant_quota"       // throttled: the tenant's delivery quota
)

// Attempt is the value on the attempts topic, keyed by subscription id.
type Attempt struct {
	// AttemptID is unique per attempt, so replaying the attempts topic into
	// ClickHouse cannot double count.
	AttemptID       string    `json:"attempt_id"`
	EventID         string    `json:"event_id"`
	EventType       string    `json:"event_type"`
	SubscriptionID  string    `json:"subscription_id"`
	Tenant          string    `json:"tenant,omitempty"`
	Attempt         int       `json:"attempt"`
	Outcome         string    `json:"outcome"`
	FailureCategory string    `json:"failure_category,omitempty"`
	HTTPStatus      int       `json:"http_status,omitempty"`
	DurationMS      float64   `json:"duration_ms"`
	TS              time.Time `json:"ts"`
	// Error is a short, secret-free description of the failure.
	Error string `json:"error,omitempty"`
	// NextAttemptAt is when a retried delivery becomes due.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// PublishedAt is the event's publish time, for publish-to-receipt latency.
	PublishedAt time.Time `json:"published_at,omitzero"`
	// ResponseSample is the first 1 KiB of the endpoint's answer, valid
	// UTF-8, with the subscription's secrets and header values redacted.
	ResponseSample string `json:"response_sample,omitempty"`
}

// NewAttemptID returns 16 random bytes in hex.
func NewAttemptID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// Encode renders the record value.
func (a *Attempt) Encode() []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	return b
}

// DecodeAttempt decodes an attempt value.
func DecodeAttempt(b []byte) (Attempt, error) {
	var a Attempt
	if err := decodeStrict("attempt", b, &a); err != nil {
		return Attempt{}, err
	}
	if a.AttemptID == "" || a.SubscriptionID == "" || a.Outcome == "" {
		return Attempt{}, invalid("attempt", "", "attempt_id, subscription_id and outcome are required")
	}
	return a, nil
}
