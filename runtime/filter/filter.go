// Package filter is subscription filters: CEL expressions (cel-go, the
// expression language of Kubernetes and Envoy) over an event's type,
// tenant, key and data, compiled and type-checked when a subscription is
// written, and evaluated with a cost limit when an event is matched.
package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/hookpipe/hookpipe/topics"
)

// MaxCost bounds the work one evaluation of an expression with a
// comprehension (all, exists, exists_one, map, filter) may do, in CEL's
// cost units (about one per operation, more per element of the strings and
// lists it walks); over it, the evaluation fails on that event, which does
// not match. Comprehensions are what can make the work grow faster than the
// event (nested, they multiply); any other expression does work bounded by
// its length (topics.MaxFilterLength) times the event's size (the
// dispatcher's event size limit), and runs without the tracking, which
// would double its cost.
const MaxCost = 10000

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// environment is the CEL environment of every filter: the event's fields.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("type", cel.StringType),
			cel.Variable("tenant", cel.StringType),
			cel.Variable("key", cel.StringType),
			cel.Variable("data", cel.DynType),
			cel.CrossTypeNumericComparisons(true),
		)
	})
	return env, envErr
}

// Program is a compiled filter.
type Program struct {
	prg cel.Program
}

// Compile parses and type-checks expr, which must be a bool expression
// over type, tenant, key and data; the error is the compiler's message.
func Compile(expr string) (*Program, error) {
	if len(expr) > topics.MaxFilterLength {
		return nil, fmt.Errorf("%d characters; at most %d", len(expr), topics.MaxFilterLength)
	}
	e, err := environment()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression is a %s; a filter must be a bool", ast.OutputType())
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if hasComprehension(ast.NativeRep().Expr()) {
		opts = append(opts, cel.CostLimit(MaxCost))
	}
	prg, err := e.Program(ast, opts...)
	if err != nil {
		return nil, err
	}
	return &Program{prg: prg}, nil
}

// hasComprehension reports whether e holds a comprehension (the macros
// all, exists, exists_one, map and filter expand to one).
func hasComprehension(e celast.Expr) bool {
	found := false
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		found = found || e.Kind() == celast.ComprehensionKind
	}))
	return found
}

// Input is an event as filters see it, its data decoded (and made a CEL
// value) once for all the filters it meets.
type Input struct {
	ev   *topics.Event
	vars interpreter.Activation
	err  error
}

// NewInput wraps ev.
func NewInput(ev *topics.Event) *Input { return &Input{ev: ev} }

func (in *Input) activation() (interpreter.Activation, error) {
	if in.vars == nil && in.err == nil {
		var data any
		if err := json.Unmarshal(in.ev.Data, &data); err != nil {
			in.err = fmt.Errorf("data: %w", err)
			return nil, in.err
		}
		in.vars, in.err = interpreter.NewActivation(map[string]any{
			"type": types.String(in.ev.Type), "tenant": types.String(in.ev.Tenant), "key": types.String(in.ev.Key),
			"data": types.DefaultTypeAdapter.NativeToValue(data),
		})
	}
	return in.vars, in.err
}

// ErrNotBool is returned for an expression that did not evaluate to a
// bool on the event.
var ErrNotBool = errors.New("the filter did not evaluate to a bool")

// Match evaluates the filter on the event. An error (a missing field, a
// type the expression did not expect, the cost limit) means no match.
func (p *Program) Match(in *Input) (bool, error) {
	vars, err := in.activation()
	if err != nil {
		return false, err
	}
	out, _, err := p.prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, ErrNotBool
	}
	return b, nil
}

// Cache compiles each expression once, for the matchers of many events.
type Cache struct {
	mu    sync.RWMutex
	progs map[string]cached
}

type cached struct {
	p   *Program
	err error
}

// maxCached bounds the expressions a cache keeps.
const maxCached = 100000

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{progs: map[string]cached{}} }

// Matches reports whether sub takes the event: its types and tenant
// (Subscription.Matches), then its filter. An error is the filter's on this
// event (or a stored expression that no longer compiles): no match.
func (c *Cache) Matches(sub *topics.Subscription, in *Input) (bool, error) {
	if !sub.Matches(in.ev) {
		return false, nil
	}
	if sub.Filter == "" {
		return true, nil
	}
	p, err := c.program(sub.Filter)
	if err != nil {
		return false, err
	}
	return p.Match(in)
}

func (c *Cache) program(expr string) (*Program, error) {
	c.mu.RLock()
	e, ok := c.progs[expr]
	c.mu.RUnlock()
	if ok {
		return e.p, e.err
	}
	p, err := Compile(expr)
	c.mu.Lock()
	if len(c.progs) >= maxCached {
		clear(c.progs) // expressions of subscriptions long changed
	}
	c.progs[expr] = cached{p: p, err: err}
	c.mu.Unlock()
	return p, err
}

// Validate checks sub as a writer must before writing it: its fields
// (Subscription.Validate), then its filter, which must compile. A filter
// that does not is an *topics.InvalidError naming the field, with the
// compiler's message.
func Validate(sub *topics.Subscription) error {
	if err := sub.Validate(); err != nil {
		return err
	}
	if sub.Filter == "" {
		return nil
	}
	if _, err := Compile(sub.Filter); err != nil {
		return &topics.InvalidError{Record: "subscription", Field: "filter", Reason: err.Error()}
	}
	return nil
}
