package topics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrInvalid is wrapped by every validation error of a record, so callers can
// tell bad input (dead-letter it, move on) from infrastructure failures.
var ErrInvalid = errors.New("invalid record")

// InvalidError says which field of which record is wrong and why.
type InvalidError struct {
	Record string // "event", "subscription", "delivery", ...
	Field  string // JSON field name, empty for the record as a whole
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("invalid %s: %s", e.Record, e.Reason)
	}
	return fmt.Sprintf("invalid %s: %s: %s", e.Record, e.Field, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(record, field, format string, args ...any) error {
	return &InvalidError{Record: record, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// fields and trailing data.
func decodeStrict(record string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid(record, "", "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid(record, "", "trailing data after the JSON object")
	}
	return nil
}
