package topics

import (
	"time"
)

// DeadLetter is the value on the dlq topic: either a delivery that was given
// up on, or an event the dispatcher could not decode (RawEvent), or a redrive
// marker (Redriven) saying that an earlier dead letter was sent back to the
// deliveries topic, so listing and redriving skip it from then on.
type DeadLetter struct {
	// Redriven locates the dead letter this marker redrove.
	Redriven *Source   `json:"redriven,omitempty"`
	Delivery *Delivery `json:"delivery,omitempty"`
	// RawEvent is the undecodable event value exactly as consumed.
	RawEvent []byte `json:"raw_event,omitempty"`
	// Reason says why, in one line without secrets.
	Reason          string `json:"reason"`
	FailureCategory string `json:"failure_category"`
	// LastFailureCategory is, for an exhausted schedule (FailureCategory
	// exhausted), the category of the last attempt's failure: timeout,
	// server_error, ...
	LastFailureCategory string    `json:"last_failure_category,omitempty"`
	HTTPStatus          int       `json:"http_status,omitempty"`
	Attempts            int       `json:"attempts"`
	DeadAt              time.Time `json:"dead_at"`
	Source              Source    `json:"source"`
}

// Event decodes the dead letter's raw event; false when it holds none, or
// one that is not a valid event.
func (d *DeadLetter) Event() (Event, bool) {
	if len(d.RawEvent) == 0 {
		return Event{}, false
	}
	e, err := DecodeEvent(d.RawEvent, maxDeadLetterEvent)
	return e, err == nil
}

// Redrivable reports whether a redrive can send the dead letter back: a
// delivery, to the deliveries topic; an event its type's schema refused
// (category schema), with its raw value, to the events topic, to be judged
// again. An undecodable event cannot be.
func (d *DeadLetter) Redrivable() bool {
	return d.Delivery != nil || (d.FailureCategory == FailureSchema && len(d.RawEvent) > 0)
}

// maxDeadLetterEvent bounds a raw event read back from a dead letter: the
// most a dispatcher copies.
const maxDeadLetterEvent = 512 << 10

// Source locates the record a dead letter came from.
type Source struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Encode renders the record value.
func (d *DeadLetter) Encode() []byte {
	return encodeRecord(d)
}

// DecodeDeadLetter decodes a dlq value.
func DecodeDeadLetter(b []byte) (DeadLetter, error) {
	var d DeadLetter
	if err := decodeStrict("dead letter", b, &d); err != nil {
		return DeadLetter{}, err
	}
	if d.Delivery != nil {
		if err := d.Delivery.Validate(); err != nil {
			return DeadLetter{}, err
		}
	}
	return d, nil
}
