// Package transform runs a subscription's transformation: a JavaScript
// function, handler(webhook), that receives the event about to be
// delivered and returns what to send instead, or cancels the delivery.
//
// Scripts are untrusted, so every call runs under the bounds of its Limits
// in a goja runtime whose builtins are guarded and frozen, one of a few
// the process's scripts share: the script runs as a strict-mode function
// body, made anew for each call, so no state survives a call (realm.go),
// and no I/O exists. The event's data is decoded as the script reads it
// (lazy.go). The package documentation of Limits says what each bound
// guarantees and what it does not.
package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"

	"github.com/hookpipe/hookpipe/topics"
)

// Limits bound one call of a script. A zero field takes its default.
//
//   - Time stops the script by interrupting it (goja's Interrupt) when the
//     call has run this long on a CPU (its realm's thread's CPU clock, on
//     Linux; wall time elsewhere), so that a script is not stopped for the
//     time it waited for a CPU on a saturated machine. Wall bounds the
//     call's wall time, by default ten times Time: a script kept from the
//     CPU that long is stopped too, and the caller's context ends it. The
//     interrupt is seen between two instructions of the script, not inside
//     a builtin, which is Go code: the builtins that loop or allocate in
//     proportion to an argument are guarded (see guards.go), and a call
//     still running a builtin a quarter second after the interrupt is
//     abandoned: Run returns and the builtin finishes alone on the
//     goroutine of its runtime, which is never used again.
//     A regular expression that backtracks is cut after regexpTimeout, so a
//     Time above it lets such a match fail as no match instead.
//   - Memory stops the script when the process has allocated this much more
//     since the call began (runtime/metrics, sampled every millisecond,
//     from a reading at most a millisecond older than the call).
//     goja has no allocation limit, so this is a process-wide measure: what
//     other goroutines allocate during the call counts too, and a script
//     can overshoot it by what it allocates in one step (a guarded builtin
//     makes at most Memory/2 characters or Memory/16 array elements at once).
//   - Output bounds the body the script returns, in bytes, counted while it
//     is encoded.
//   - CallDepth bounds nested calls of the script's functions (goja's
//     SetMaxCallStackSize); the guarded builtins that recurse (join, flat,
//     JSON) stop at maxNesting.
//   - Source bounds the script, in bytes, at Compile.
type Limits struct {
	Time      time.Duration
	Wall      time.Duration
	Memory    int64
	Output    int
	CallDepth int
	Source    int
}

// DefaultLimits are the limits of Compile: a typical transformation runs
// in tens of microseconds and allocates tens of kilobytes, a thousandth of
// its limits.
var DefaultLimits = Limits{
	Time:      50 * time.Millisecond,
	Memory:    16 << 20,
	Output:    1 << 20,
	CallDepth: 256,
	Source:    64 << 10,
}

// wallFactor is Limits.Wall by default, as a multiple of Limits.Time.
const wallFactor = 10

func (l Limits) withDefaults() Limits {
	if l.Time <= 0 {
		l.Time = DefaultLimits.Time
	}
	if l.Wall <= 0 {
		l.Wall = wallFactor * l.Time
	}
	if l.Memory <= 0 {
		l.Memory = DefaultLimits.Memory
	}
	if l.Output <= 0 {
		l.Output = DefaultLimits.Output
	}
	if l.CallDepth <= 0 {
		l.CallDepth = DefaultLimits.CallDepth
	}
	if l.Source <= 0 {
		l.Source = DefaultLimits.Source
	}
	return l
}

// Script is a compiled transformation, safe for concurrent calls.
type Script struct {
	// prg is the script wrapped in a function expression (wrap): running
	// it makes the function that runs the script's top level once.
	prg    *goja.Program
	limits Limits
}

// Compile checks and compiles src under DefaultLimits: at most
// Limits.Source bytes, valid JavaScript in strict mode, declaring function
// handler. Its errors wrap ErrCompile.
func Compile(src string) (*Script, error) { return CompileWith(src, DefaultLimits) }

// CompileWith is Compile under l.
func CompileWith(src string, l Limits) (*Script, error) {
	l = l.withDefaults()
	if len(src) > l.Source {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", ErrCompile, len(src), l.Source)
	}
	// Parsed alone first, so that a syntax error has its own position.
	if _, err := goja.Parse("transformation.js", src, parser.WithDisableSourceMaps); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCompile, err)
	}
	file, err := goja.Parse("transformation.js", wrap(src), parser.WithDisableSourceMaps)
	if err != nil {
		return nil, fmt.Errorf("%w: in strict mode: %v", ErrCompile, err)
	}
	body, ok := wrapped(file)
	if !ok {
		return nil, fmt.Errorf("%w: it must be a script, not the end of a function", ErrCompile)
	}
	if !declaresHandler(body) {
		return nil, fmt.Errorf("%w: it must declare function handler(webhook)", ErrCompile)
	}
	prg, err := goja.CompileAST(file, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCompile, err)
	}
	return &Script{prg: prg, limits: l}, nil
}

// declaresHandler reports whether the script declares function handler at
// its top level.
func declaresHandler(body []ast.Statement) bool {
	for _, st := range body {
		if fd, ok := st.(*ast.FunctionDeclaration); ok && fd.Function.Name != nil && fd.Function.Name.Name == "handler" {
			return true
		}
	}
	return false
}

// Input is the delivery as the script sees it, as webhook: {id, type,
// timestamp (RFC 3339), tenant, key, data (Data parsed), method ("POST"),
// url, path (URL's path and query), headers (Header, names in lower case,
// values joined by ", ")}. Header holds the subscription's own headers,
// never the reserved ones the deliverer sets.
type Input struct {
	ID        string
	Type      string
	Timestamp time.Time
	Tenant    string
	Key       string
	Data      json.RawMessage
	URL       string
	Header    http.Header
}

// Output is the request to send. When Cancel is set, the script cancelled
// the delivery and the other fields are empty.
type Output struct {
	Cancel bool
	// Body is the script's payload (a string, sent as it is, or any JSON
	// value), else its data, as JSON.
	Body []byte
	// Header replaces Input.Header: the headers the script returned.
	Header http.Header
	// Method is POST, PUT or PATCH.
	Method string
	// URL is Input.URL, with its path and query replaced by the script's
	// path when it changed it.
	URL string
}

// Run calls the script's handler on in, under the script's limits, with
// its top level run anew. Its errors wrap ErrFailed (ErrThrew, ErrLimit,
// ErrBadOutput), except ctx's own error when ctx ended first, and the
// error of an Input whose URL does not parse.
func (s *Script) Run(ctx context.Context, in Input) (Output, error) {
	u, err := url.Parse(in.URL)
	if err != nil {
		return Output{}, fmt.Errorf("transform: input url: %w", err)
	}
	rm, err := getRealm(ctx)
	if err != nil {
		return Output{}, err
	}
	out, reuse, err := rm.run(ctx, s, in, u)
	if reuse {
		putRealm(rm)
	} else {
		dropRealm()
	}
	return out, err
}

// Validate checks a subscription's transformation as its writers must
// before writing it: it compiles, under DefaultLimits. The error names the
// field.
func Validate(sub *topics.Subscription) error {
	if sub.Transformation == "" {
		return nil
	}
	if _, err := Compile(sub.Transformation); err != nil {
		return &topics.InvalidError{Record: "subscription", Field: "transformation", Reason: err.Error()}
	}
	return nil
}
