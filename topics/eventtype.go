package topics

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Validation modes of an event type: what happens to an event whose data
// its schema refuses.
const (
	// ValidationOff checks nothing.
	ValidationOff = "off"
	// ValidationWarn delivers the event and counts it as invalid (the
	// default of a new type).
	ValidationWarn = "warn"
	// ValidationEnforce refuses the event: 422 from the API, the dlq with
	// category schema from the dispatcher.
	ValidationEnforce = "enforce"
)

// FailureSchema is the dead letter category of an event whose data its
// type's schema refuses, or whose type is unknown where unknown types are
// rejected.
const FailureSchema = "schema"

// Bounds of an event type record.
const (
	MaxEventTypeSchemaBytes  = 64 << 10
	MaxEventTypeExamples     = 10
	MaxEventTypeDescription  = 4096
	maxEventTypeNameSegments = 16
)

// ReservedEventTypeNames cannot name an event type: the API serves other
// things at their paths.
var ReservedEventTypeNames = []string{"asyncapi.json"}

// EventType is the value on the event-types topic (compacted, keyed by the
// name): one entry of the event catalog. A tombstone removes the type;
// events of a type not in the catalog are unknown (see the dispatcher's and
// the API's unknown-type setting).
type EventType struct {
	// Name is the events' type, dotted: segments of [a-zA-Z0-9_-]
	// separated by single dots, at most 255 bytes ("invoice.paid").
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Schema is a JSON Schema (draft 2020-12 unless it says otherwise in
	// $schema) for the events' data; absent, any data is valid.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Examples are data values the schema accepts, shown to tenants and
	// sent by test-send.
	Examples   []json.RawMessage `json:"examples,omitempty"`
	Deprecated bool              `json:"deprecated,omitempty"`
	// Validation is off, warn or enforce; empty is warn.
	Validation string `json:"validation,omitempty"`
	// Version counts the type's changes: 1 when created, one more at each
	// update.
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Mode is the type's validation mode, warn when unset.
func (t *EventType) Mode() string {
	if t.Validation == "" {
		return ValidationWarn
	}
	return t.Validation
}

// Validate checks the fields' grammar and bounds; whether the schema
// compiles and accepts the examples is the catalog's check
// (runtime/catalog).
func (t *EventType) Validate() error {
	if err := ValidateEventTypeName(t.Name); err != nil {
		return err
	}
	if len(t.Description) > MaxEventTypeDescription {
		return invalid("event type", "description", "longer than %d bytes", MaxEventTypeDescription)
	}
	switch t.Validation {
	case "", ValidationOff, ValidationWarn, ValidationEnforce:
	default:
		return invalid("event type", "validation", "%q is not off, warn or enforce", t.Validation)
	}
	if s := bytes.TrimSpace(t.Schema); len(s) > 0 {
		if len(s) > MaxEventTypeSchemaBytes {
			return invalid("event type", "schema", "%d bytes is over the %d byte limit", len(s), MaxEventTypeSchemaBytes)
		}
		if s[0] != '{' && !bytes.Equal(s, []byte("true")) && !bytes.Equal(s, []byte("false")) {
			return invalid("event type", "schema", "a JSON Schema is an object or a boolean")
		}
	}
	if len(t.Examples) > MaxEventTypeExamples {
		return invalid("event type", "examples", "more than %d", MaxEventTypeExamples)
	}
	for i, ex := range t.Examples {
		if len(ex) > DefaultMaxEventBytes {
			return invalid("event type", "examples", "example %d: %d bytes is over the %d byte limit", i, len(ex), DefaultMaxEventBytes)
		}
		if !json.Valid(ex) {
			return invalid("event type", "examples", "example %d is not JSON", i)
		}
	}
	if t.Version < 1 {
		return invalid("event type", "version", "must be 1 or more")
	}
	return nil
}

// ValidateEventTypeName checks the dotted grammar of a catalog entry's
// name, which is stricter than what an event's type may be (events of
// other types are unknown to the catalog).
func ValidateEventTypeName(name string) error {
	if name == "" {
		return invalid("event type", "name", "required")
	}
	if len(name) > 255 || !isType(name) {
		return invalid("event type", "name", "%q does not match [a-zA-Z0-9_.-]{1,255}", name)
	}
	segs := strings.Split(name, ".")
	if len(segs) > maxEventTypeNameSegments {
		return invalid("event type", "name", "%q has more than %d dotted segments", name, maxEventTypeNameSegments)
	}
	for _, s := range segs {
		if s == "" {
			return invalid("event type", "name", "%q: segments are separated by single dots, none empty", name)
		}
	}
	for _, r := range ReservedEventTypeNames {
		if name == r {
			return invalid("event type", "name", "%q is reserved", name)
		}
	}
	return nil
}

// Encode renders the record value.
func (t *EventType) Encode() []byte {
	return encodeRecord(t)
}

// DecodeEventType decodes and validates an event-types value strictly.
func DecodeEventType(b []byte) (EventType, error) {
	var t EventType
	if err := decodeStrict("event type", b, &t); err != nil {
		return EventType{}, err
	}
	return t, t.Validate()
}
