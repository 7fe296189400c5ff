package service

// TestEventType is the type of the events test-send sends.
const TestEventType = "webhook.test"

// TestSendOutput is the answer of POST /v1/subscriptions/{id}/test.
type TestSendOutput struct {
	Body struct {
		EventID         string  `json:"event_id" doc:"The test event's id: its webhook-id."`
		Delivered       bool    `json:"delivered" doc:"The endpoint answered 2xx."`
		Status          int     `json:"status,omitempty" doc:"The HTTP status; absent when no answer came."`
		DurationMS      float64 `json:"duration_ms" doc:"From sending the request to reading the answer."`
		FailureCategory string  `json:"failure_category,omitempty" doc:"The failure category the deliverer would record (timeout, server_error, blocked_address, ...)."`
		Error           string  `json:"error,omitempty" doc:"Why no answer came."`
		ResponseBody    string  `json:"response_body,omitempty" doc:"The first 1 KiB of the answer's body."`
	}
}
