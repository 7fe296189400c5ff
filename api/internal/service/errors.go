package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// Kind is what went wrong with a request, which each front end answers in
// its own way (the API with a status, the pages with a message).
type Kind int

const (
	// NotFound is no such resource, or one the caller does not see.
	NotFound Kind = iota + 1
	// Forbidden is a request the caller may not make.
	Forbidden
	// Invalid is a request refused for reasons that name its fields.
	Invalid
	// Conflict is a request that clashes with what exists.
	Conflict
	// Unavailable is a request that did not finish in time; it may have
	// been carried out.
	Unavailable
)

// Error is a refused request. An error of another type is the service's
// own failure, which the caller is not told of.
type Error struct {
	Kind Kind
	// Msg says what was refused ("invalid subscription", "no event type
	// a.b").
	Msg string
	// Fields are the reasons, each naming the request's field at fault.
	Fields []FieldError
}

// FieldError is a reason of a refusal.
type FieldError struct {
	// In is where the field is: "" for the request's body, "query" for
	// its query.
	In string
	// Field is dotted from the body's top ("tenant", "destination.url"),
	// or a query parameter's name; "" for the body as a whole.
	Field string
	Why   string
	// Value is the value refused; nil: not shown.
	Value any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Msg)
	for _, f := range e.Fields {
		b.WriteString("; ")
		if f.Field != "" {
			b.WriteString(f.Field + ": ")
		}
		b.WriteString(f.Why)
	}
	return b.String()
}

func notFound(msg string) error { return &Error{Kind: NotFound, Msg: msg} }

func unavailable(msg string) error { return &Error{Kind: Unavailable, Msg: msg} }

// invalid refuses a record for field's value.
func invalid(record, field, why string, value any) error {
	return &Error{Kind: Invalid, Msg: "invalid " + record, Fields: []FieldError{{Field: field, Why: why, Value: value}}}
}

// invalidQuery refuses a read for its query parameter param's value.
func invalidQuery(what, param, why string, value any) error {
	return &Error{Kind: Invalid, Msg: "invalid " + what + " query", Fields: []FieldError{{In: "query", Field: param, Why: why, Value: value}}}
}

// refusedRecord is a record's validation error as a refusal naming the
// field at fault; another error as it is.
func refusedRecord(err error) error {
	var ie *topics.InvalidError
	if errors.As(err, &ie) {
		return invalid(ie.Record, ie.Field, ie.Reason, nil)
	}
	return err
}

// adminOnly refuses a caller that is not an admin.
func adminOnly(c Caller) error {
	if c.Admin() {
		return nil
	}
	return &Error{Kind: Forbidden, Msg: "this operation takes an admin key"}
}

// produce writes r and waits for the broker's acknowledgement.
func produce(ctx context.Context, cl *kgo.Client, r *kgo.Record) error {
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		if ctx.Err() != nil {
			return unavailable("Kafka did not acknowledge in time; the write may or may not have happened")
		}
		return fmt.Errorf("producing: %w", err)
	}
	return nil
}

// readBack is the answer to waiting until this replica's table applied a
// write: in time, too late, or failed.
func readBack(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return unavailable("written, but not yet read back in time")
	}
	return err
}
