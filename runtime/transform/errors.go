package transform

import (
	"errors"
	"fmt"
)

// ErrFailed is wrapped by every error of a script: one that did not
// compile, threw, went over a limit or returned what cannot be sent. A
// caller treats it as the delivery's final outcome (category
// transformation, dead-lettered): running the same script on the same
// event again fails again.
var ErrFailed = errors.New("transformation failed")

// ErrCompile is wrapped by Compile's errors: the source is too long, does
// not parse, or does not declare function handler.
var ErrCompile = fmt.Errorf("%w: the script does not compile", ErrFailed)

// ErrThrew is wrapped by a *ThrowError: the script threw an exception it
// did not catch.
var ErrThrew = fmt.Errorf("%w: the script threw", ErrFailed)

// ErrLimit is wrapped by a *LimitError: the call went over one of its
// Limits and was stopped.
var ErrLimit = fmt.Errorf("%w: the script went over a limit", ErrFailed)

// ErrBadOutput is wrapped by the errors of a script that returned what
// cannot be sent: not an object, a header that is not a string or is
// reserved, a method other than POST, PUT and PATCH, a path that does not
// start with "/", a body that is not JSON.
var ErrBadOutput = fmt.Errorf("%w: the script returned a bad webhook", ErrFailed)

// ThrowError is an exception the script did not catch, with the position
// it was thrown from (Line 0 when it is not known).
type ThrowError struct {
	Message      string
	Line, Column int
}

func (e *ThrowError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("the script threw %s", e.Message)
	}
	return fmt.Sprintf("the script threw %s at line %d, column %d", e.Message, e.Line, e.Column)
}

func (e *ThrowError) Unwrap() error { return ErrThrew }

// The limits a LimitError names.
const (
	LimitTime      = "time"
	LimitMemory    = "memory"
	LimitOutput    = "output"
	LimitCallStack = "call stack"
)

// LimitError is a call stopped at one of its limits: Limit is LimitTime,
// LimitMemory, LimitOutput or LimitCallStack, Detail says what went over.
type LimitError struct {
	Limit  string
	Detail string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the script went over its %s limit: %s", e.Limit, e.Detail)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

func badOutput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadOutput, fmt.Sprintf(format, args...))
}
