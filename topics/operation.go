package topics

import (
	"time"
)

// Operation is the value on the operations topic (compacted, one
// partition, keyed by the operation's id): a bulk operation the API
// carries out, its progress written as it goes (in the transaction of the
// records it produced), so any API replica can show it and the one that
// runs operations resumes it after a restart.
type Operation struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // OperationRedrive, OperationReplay or OperationRecover
	// Tenant, when set, limits the operation to that tenant's records (the
	// tenant key that started it).
	Tenant string `json:"tenant,omitempty"`
	// What it works on: the dead letters (redrive) or the events published
	// (replay, to this one subscription) that pass these filters; for a
	// recover, the events of the subscription whose last attempt between
	// Since and Until failed.
	Subscription string    `json:"subscription_id,omitempty"`
	EventType    string    `json:"event_type,omitempty"`
	Category     string    `json:"category,omitempty"`
	Since        time.Time `json:"since,omitzero"`
	Until        time.Time `json:"until,omitzero"`
	// DeadLetters, when set, limits a redrive to these dead letters (their
	// place on the dlq topic), of those that pass the filters.
	DeadLetters []Position `json:"dead_letters,omitempty"`
	// Rate is how many deliveries per second it produces at most.
	Rate float64 `json:"rate"`
	// State is OperationPending, OperationRunning, OperationDone or
	// OperationFailed; Error says why it failed.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Matched is how many records it has to look at (dead letters that
	// pass the filters, or events in the time range), Done how many of
	// them it has looked at; of those, Sent went out as deliveries,
	// Skipped were not for it (already redriven, another type or tenant)
	// and Failed could not be sent (undecodable).
	Matched int `json:"matched"`
	Done    int `json:"done"`
	Sent    int `json:"sent"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	// Next and Stop are, per partition of the events topic, the next
	// offset a replay or recover reads and the one it stops before.
	Next      map[int32]int64 `json:"next,omitempty"`
	Stop      map[int32]int64 `json:"stop,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// Position is a record's place in a topic's partition.
type Position struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Operation kinds and states.
const (
	OperationRedrive = "redrive"
	OperationReplay  = "replay"
	OperationRecover = "recover"

	OperationPending = "pending"
	OperationRunning = "running"
	OperationDone    = "done"
	OperationFailed  = "failed"
)

// Finished reports whether the operation has ended.
func (o *Operation) Finished() bool { return o.State == OperationDone || o.State == OperationFailed }

// Encode renders the record value.
func (o *Operation) Encode() []byte {
	return encodeRecord(o)
}

// DecodeOperation decodes an operations value strictly.
func DecodeOperation(b []byte) (Operation, error) {
	var o Operation
	if err := decodeStrict("operation", b, &o); err != nil {
		return Operation{}, err
	}
	if err := checkID("operation", "id", o.ID); err != nil {
		return Operation{}, err
	}
	switch {
	case o.Kind != OperationRedrive && o.Kind != OperationReplay && o.Kind != OperationRecover:
		return Operation{}, invalid("operation", "kind", "%q is not an operation kind", o.Kind)
	case o.Kind != OperationRedrive && o.Subscription == "":
		return Operation{}, invalid("operation", "subscription_id", "a %s needs its subscription", o.Kind)
	case o.Kind != OperationRedrive && len(o.DeadLetters) > 0:
		return Operation{}, invalid("operation", "dead_letters", "only a redrive names dead letters")
	case !(o.Rate > 0):
		return Operation{}, invalid("operation", "rate", "%v is not a positive rate", o.Rate)
	}
	switch o.State {
	case OperationPending, OperationRunning, OperationDone, OperationFailed:
	default:
		return Operation{}, invalid("operation", "state", "%q is not an operation state", o.State)
	}
	return o, nil
}
