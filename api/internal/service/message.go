package service

import (
	"encoding/json"
	"time"
)

// Attempt is one attempt of a message, as the recorder stored it.
type Attempt struct {
	Attempt         int        `json:"attempt" doc:"1 for the first attempt, then one more per retry."`
	Outcome         string     `json:"outcome" doc:"success, retry, dead, blocked, throttled, skipped or scheduled (the dispatcher's record of a delivery waiting for its deliver_at)."`
	At              time.Time  `json:"at"`
	HTTPStatus      int        `json:"http_status,omitempty"`
	DurationMS      float64    `json:"duration_ms"`
	FailureCategory string     `json:"failure_category,omitempty"`
	Error           string     `json:"error,omitempty"`
	ResponseSample  string     `json:"response_sample,omitempty" doc:"The first 1 KiB of the endpoint's answer."`
	NextAttemptAt   *time.Time `json:"next_attempt_at,omitempty"`
}

// MessageDelivery is what became of a message for one subscription.
type MessageDelivery struct {
	SubscriptionID string     `json:"subscription_id"`
	Status         string     `json:"status" enum:"delivered,retrying,pending,scheduled,dead,skipped" doc:"From the last attempt: delivered, retrying (a retry is scheduled), pending (held back: breaker, rate limit, an ordered key), scheduled (not attempted before the event's deliver_at, next_attempt_at), dead or skipped (also when cancelled)."`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"`
	Attempts       []Attempt  `json:"attempts"`
}

// Message is an event and what became of it for each subscription it
// matched.
type Message struct {
	EventID     string            `json:"event_id"`
	EventType   string            `json:"event_type"`
	Tenant      string            `json:"tenant,omitempty"`
	PublishedAt time.Time         `json:"published_at"`
	Event       *MessageEvent     `json:"event,omitempty" doc:"The event as published; absent when the events topic no longer holds it (retention) or the event was expunged."`
	ExpungedAt  *time.Time        `json:"expunged_at,omitempty" doc:"When the event was expunged (POST /v1/messages/{event_id}/expunge): its payload and response samples are no longer shown or sent."`
	Deliveries  []MessageDelivery `json:"deliveries"`
}

// MessageEvent is an event as it was published.
type MessageEvent struct {
	Key       string          `json:"key,omitempty"`
	CreatedAt string          `json:"created_at,omitempty"`
	Data      json.RawMessage `json:"data"`
}

// MessageSummary is one message for one subscription in the message list.
type MessageSummary struct {
	EventID        string    `json:"event_id"`
	EventType      string    `json:"event_type"`
	Tenant         string    `json:"tenant,omitempty"`
	SubscriptionID string    `json:"subscription_id"`
	Status         string    `json:"status" enum:"delivered,retrying,pending,scheduled,dead,skipped"`
	Attempts       uint64    `json:"attempts"`
	LastAttemptAt  time.Time `json:"last_attempt_at"`
}

// ListMessagesOutput is the answer of GET /v1/messages.
type ListMessagesOutput struct {
	Body struct {
		Data       []MessageSummary `json:"data"`
		NextCursor string           `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last."`
	}
}
