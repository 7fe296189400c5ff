package service

import (
	"encoding/json"
	"time"
)

// DeadLetter is a dead letter as the API shows it.
type DeadLetter struct {
	Partition           int32           `json:"partition" doc:"Where it is on the dlq topic."`
	Offset              int64           `json:"offset"`
	DeadAt              time.Time       `json:"dead_at"`
	Reason              string          `json:"reason"`
	FailureCategory     string          `json:"failure_category"`
	LastFailureCategory string          `json:"last_failure_category,omitempty" doc:"For an exhausted schedule: the last failure's category."`
	HTTPStatus          int             `json:"http_status,omitempty"`
	Attempts            int             `json:"attempts"`
	Redriven            bool            `json:"redriven" doc:"A redrive already sent it back."`
	EventID             string          `json:"event_id,omitempty"`
	EventType           string          `json:"event_type,omitempty"`
	Tenant              string          `json:"tenant,omitempty"`
	SubscriptionID      string          `json:"subscription_id,omitempty"`
	Data                json.RawMessage `json:"data,omitempty" doc:"The event's data, as published; absent when the event was expunged."`
	Expunged            bool            `json:"expunged,omitempty" doc:"The event was expunged (privacy): its data is not shown and a redrive skips it."`
	DataWithheld        bool            `json:"data_withheld,omitempty" doc:"The data is not shown: whether the event was expunged could not be read from ClickHouse."`
}

// ListDLQOutput is the answer of GET /v1/dlq.
type ListDLQOutput struct {
	Body struct {
		Data       []DeadLetter   `json:"data" doc:"Newest first."`
		Matched    int            `json:"matched" doc:"How many passed the filters, before the limit."`
		ByCategory map[string]int `json:"by_category" doc:"Of those matched, how many per failure category."`
	}
}
