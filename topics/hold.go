package topics

import (
	"encoding/json"
	"time"
)

// Hold is the value on the holds topic, keyed by the delivery key of an
// ordered subscription ("<subscription id>/<ordering key>"): the key is
// held while its head delivery waits in a retry tier. Deliveries of the key
// arriving meanwhile are parked (Names.Parked) and delivered in order once
// the head succeeds or is dead-lettered. A null value releases the key.
type Hold struct {
	// Head is the event id of the delivery whose outcome releases the key,
	// and HeadAttempt the attempt number its retry record carries.
	Head        string `json:"head"`
	HeadAttempt int    `json:"head_attempt"`
	// ParkedFrom is the offset, in the key's partition of the parked topic,
	// from which its parked deliveries are read; -1 when none is parked.
	ParkedFrom int64 `json:"parked_from"`
	// Through is the highest offset, in the key's partition of the
	// deliveries topic, of a record this hold already accounts for (the
	// head's own record, parked ones): a record at or below it that is
	// redone after a crash was handled before and is skipped.
	Through int64 `json:"through"`
	// ParkedPartition is the key's partition of the parked topic.
	ParkedPartition int32     `json:"parked_partition"`
	Since           time.Time `json:"since"`
}

// Encode renders the record value.
func (h *Hold) Encode() []byte {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err)
	}
	return b
}

// DecodeHold decodes a holds value.
func DecodeHold(b []byte) (Hold, error) {
	var h Hold
	if err := decodeStrict("hold", b, &h); err != nil {
		return Hold{}, err
	}
	if h.Head == "" || h.HeadAttempt < 1 {
		return Hold{}, invalid("hold", "head", "head and head_attempt are required")
	}
	return h, nil
}
