package service

// Kind is what went wrong with a request, which each front end answers in
// its own way (the API with a status, the pages with a message).
type Kind int

const (
	// NotFound: no such resource, or one the caller does not see.
	NotFound Kind = iota + 1
	// Invalid: the request is refused, for a reason that names a field.
	Invalid
	// Conflict: the request clashes with what exists.
	Conflict
	// Unavailable: the request did not finish in time; it may have been
	// carried out.
	Unavailable
)

// Error is a refused request. An error of another type is the service's
// own failure, which the caller is not told of.
type Error struct {
	Kind Kind
	// Msg is the whole message; for Invalid the record refused ("invalid
	// subscription").
	Msg string
	// Field (Invalid) is the request's field at fault, dotted from the
	// body's top ("tenant", "url").
	Field string
	// Why (Invalid) is what is wrong with the field.
	Why string
	// Value (Invalid) is the value refused; nil: not shown.
	Value any
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Msg + ": " + e.Field + ": " + e.Why
	}
	return e.Msg
}

func notFound(msg string) error { return &Error{Kind: NotFound, Msg: msg} }

func unavailable(msg string) error { return &Error{Kind: Unavailable, Msg: msg} }

// invalidSubscription refuses a subscription for field's value.
func invalidSubscription(field, why string, value any) error {
	return &Error{Kind: Invalid, Msg: "invalid subscription", Field: field, Why: why, Value: value}
}
