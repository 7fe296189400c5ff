package service

import "time"

// Operation is a bulk operation as the API shows it.
type Operation struct {
	ID             string    `json:"id"`
	Kind           string    `json:"kind" enum:"redrive,replay,recover"`
	State          string    `json:"state" enum:"pending,running,done,failed"`
	Error          string    `json:"error,omitempty" doc:"Why it failed."`
	Tenant         string    `json:"tenant,omitempty"`
	SubscriptionID string    `json:"subscription_id,omitempty"`
	EventType      string    `json:"event_type,omitempty"`
	Category       string    `json:"category,omitempty"`
	DeadLetters    int       `json:"dead_letters,omitempty" doc:"How many dead letters it was limited to, when named."`
	Since          time.Time `json:"since,omitzero"`
	Until          time.Time `json:"until,omitzero"`
	Rate           float64   `json:"rate" doc:"Deliveries per second at most."`
	Matched        int       `json:"matched" doc:"Records to look at: the dead letters that passed the filters, or the events in the time range (known once running)."`
	Done           int       `json:"done" doc:"Records looked at so far."`
	Sent           int       `json:"sent" doc:"Deliveries sent back to the pipeline."`
	Skipped        int       `json:"skipped" doc:"Records not for it: already redriven, or events the subscription does not take."`
	Failed         int       `json:"failed" doc:"Records that could not be sent: undecodable."`
	Progress       float64   `json:"progress" doc:"done / matched, from 0 to 1; 1 once done."`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// DeadLetterRef names a dead letter by its place on the dlq topic.
type DeadLetterRef struct {
	Partition int32 `json:"partition" minimum:"0"`
	Offset    int64 `json:"offset" minimum:"0"`
}

// ListOperationsOutput is the answer of GET /v1/operations.
type ListOperationsOutput struct {
	Body struct {
		Data []Operation `json:"data" doc:"Newest first."`
	}
}
