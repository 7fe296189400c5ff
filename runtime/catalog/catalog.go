// Package catalog is the event catalog as the pipeline uses it: event
// types (topics.EventType) with their JSON Schemas compiled once per
// version, the check of an event's data against its type, and the check
// that a new version of a schema accepts what the old one did. The API and
// the dispatcher share it, so an event is judged the same way at either
// door.
package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/hookpipe/hookpipe/runtime/jsondepth"
	"github.com/hookpipe/hookpipe/topics"
)

// Bounds of a schema, so that no schema can make compiling it or
// validating against it explode.
const (
	// MaxSchemaDepth is the deepest nesting of objects and arrays in a
	// schema document.
	MaxSchemaDepth = 64
	// MaxPatternBytes is the longest regular expression (pattern,
	// patternProperties). Patterns run on Go's RE2 engine, in time linear
	// in the input: no pattern backtracks.
	MaxPatternBytes = 1024
)

// Type is an event type with its schema compiled; immutable.
type Type struct {
	topics.EventType
	schema *jsonschema.Schema // nil: any data is valid
	fast   *node              // the schema's fast path; nil: it has none
	doc    any                // the schema decoded, for Breaking
}

// Compile checks an event type record and compiles its schema: the
// schema must compile (no $ref outside itself, patterns in RE2 syntax and
// bounded, nesting bounded) and accept every example. Errors are
// *topics.InvalidError naming the field.
func Compile(et topics.EventType) (*Type, error) {
	if err := et.Validate(); err != nil {
		return nil, err
	}
	t := &Type{EventType: et}
	if s := bytes.TrimSpace(et.Schema); len(s) > 0 {
		if d := jsondepth.Of(s); d > MaxSchemaDepth {
			return nil, invalid("schema", "nested %d deep, over the limit of %d", d, MaxSchemaDepth)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
		if err != nil {
			return nil, invalid("schema", "not JSON: %v", err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		c.UseLoader(noRemote{})
		c.UseRegexpEngine(boundedRegexp)
		url := schemaURL(et.Name)
		if err := c.AddResource(url, doc); err != nil {
			return nil, invalid("schema", "%v", err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			return nil, invalid("schema", "%s", compileMessage(err))
		}
		t.schema, t.doc, t.fast = sch, doc, fastPath(sch)
	}
	for i, ex := range et.Examples {
		if v := t.Check(ex); v != nil {
			return nil, invalid("examples", "example %d does not match the schema: %s", i, v)
		}
	}
	return t, nil
}

// schemaURL is the base URL of a type's schema: relative references in it
// resolve against it (and nothing is ever fetched from it).
func schemaURL(name string) string {
	return "https://hookpipe.invalid/event-types/" + name + ".json"
}

// Violation is why data does not match its type's schema: the first
// failing keyword, where in the data.
type Violation struct {
	// Pointer is the JSON pointer (RFC 6901) of the failing value in the
	// data; "" is the data itself.
	Pointer string `json:"pointer"`
	// Keyword is the schema keyword that failed: required, type, enum,
	// format, additionalProperties, ...
	Keyword string `json:"keyword"`
	Message string `json:"message"`
}

func (v *Violation) Error() string {
	p := v.Pointer
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("at %s: %s: %s", p, v.Keyword, v.Message)
}

// Check validates data against the type's schema; nil is valid. Data that
// is not JSON is a violation at the root. The fast path (fast.go) finds
// most valid data valid by itself; the library judges the rest, and
// names the violation.
func (t *Type) Check(data []byte) *Violation {
	if t.schema == nil || t.fast != nil && t.fast.valid(data) {
		return nil
	}
	return t.check(data)
}

// check is Check by the library alone. A panic of the library (it has
// one: a number past what big.Rat reads, 1e9999999, under a numeric
// bound) is a violation of its own: an event must not stop the dispatcher.
func (t *Type) check(data []byte) (out *Violation) {
	defer func() {
		if p := recover(); p != nil {
			out = &Violation{Keyword: "unjudgeable", Message: fmt.Sprintf("the validator failed on this data (%v)", p)}
		}
	}()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &Violation{Keyword: "json", Message: err.Error()}
	}
	err = t.schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Violation{Keyword: "schema", Message: err.Error()}
	}
	return violation(ve)
}

// HasSchema reports whether the type constrains its data.
func (t *Type) HasSchema() bool { return t.schema != nil }

var printer = message.NewPrinter(language.English)

// violation reports the first leaf of a validation error's tree: the most
// specific failure.
func violation(ve *jsonschema.ValidationError) *Violation {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	v := &Violation{Pointer: pointer(ve.InstanceLocation), Message: ve.ErrorKind.LocalizedString(printer)}
	if kp := ve.ErrorKind.KeywordPath(); len(kp) > 0 {
		v.Keyword = kp[0]
	}
	if _, ok := ve.ErrorKind.(*kind.FalseSchema); ok {
		v.Keyword = "false"
	}
	return v
}

// tokenEscaper escapes a reference token of a JSON pointer (RFC 6901).
var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer renders an instance location as a JSON pointer.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(tokenEscaper.Replace(tok))
	}
	return b.String()
}

func invalid(field, format string, args ...any) error {
	return &topics.InvalidError{Record: "event type", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// compileMessage flattens a compile error to one line.
func compileMessage(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// noRemote refuses every $ref outside the schema itself: a schema must
// not make the API or the dispatcher fetch anything.
type noRemote struct{}

func (noRemote) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s: only references within the schema are allowed", url)
}

// boundedRegexp compiles patterns with Go's RE2 engine, refusing long ones.
func boundedRegexp(s string) (jsonschema.Regexp, error) {
	if len(s) > MaxPatternBytes {
		return nil, fmt.Errorf("pattern of %d bytes is over the limit of %d", len(s), MaxPatternBytes)
	}
	return regexp.Compile(s)
}
