package tracing

import "go.opentelemetry.io/otel/attribute"

// The attributes of hookpipe's spans, besides the standard
// http.response.status_code and server.address. None carries a secret, a
// URL (its query may hold a token), a header value or a payload.
const (
	// AttrEventID is the event's id (the webhook-id endpoints receive).
	AttrEventID = attribute.Key("hookpipe.event.id")
	// AttrEventType is the event's type.
	AttrEventType = attribute.Key("hookpipe.event.type")
	// AttrTenant is the event's tenant.
	AttrTenant = attribute.Key("hookpipe.tenant")
	// AttrDeliveries is how many deliveries an event fanned out to.
	AttrDeliveries = attribute.Key("hookpipe.deliveries")
	// AttrSubscription is the subscription's id.
	AttrSubscription = attribute.Key("hookpipe.subscription.id")
	// AttrAttempt is the 1-based attempt number.
	AttrAttempt = attribute.Key("hookpipe.attempt")
	// AttrOutcome is the attempt's outcome, as in its attempt record.
	AttrOutcome = attribute.Key("hookpipe.outcome")
	// AttrCategory is the failure category, as in the attempt record.
	AttrCategory = attribute.Key("hookpipe.failure_category")
	// AttrDurationMS is how long the HTTP attempt took, in milliseconds.
	AttrDurationMS = attribute.Key("hookpipe.duration_ms")
	// AttrTier is the retry tier topic a record went to or came from.
	AttrTier = attribute.Key("hookpipe.retry.tier")
	// AttrNotBefore is when a retry is due, in unix milliseconds.
	AttrNotBefore = attribute.Key("hookpipe.retry.not_before")
)

// The names of hookpipe's spans.
const (
	// SpanFanOut is the dispatcher's work on one event.
	SpanFanOut = "fan-out"
	// SpanAttempt is one HTTP attempt of a delivery.
	SpanAttempt = "attempt"
	// SpanRetryScheduled is a delivery sent to a retry tier.
	SpanRetryScheduled = "retry scheduled"
	// SpanRetryReleased is a due retry the retrier released.
	SpanRetryReleased = "retry released"
)
