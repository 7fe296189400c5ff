package transform

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// body is the request body the webhook w asks for: its payload, a string
// sent as it is or any value as JSON, else its data as JSON.
func (g *guards) body(w *goja.Object, budget int) ([]byte, error) {
	if p := w.Get("payload"); p != nil && !goja.IsUndefined(p) {
		if s, ok := p.(goja.String); ok {
			b := []byte(s.String())
			if len(b) > budget {
				return nil, &LimitError{Limit: LimitOutput, Detail: fmt.Sprintf("a payload of %d bytes; at most %d", len(b), budget)}
			}
			return b, nil
		}
		return g.encode(p, "payload", budget)
	}
	return g.encode(w.Get("data"), "data", budget)
}

// encode is v as JSON.stringify(v) makes it, counted against the output
// limit while it is made. The encoder below walks v from Go, as the
// specification's SerializeJSONProperty does (toJSON, getters and proxy
// traps run as they would), at a fraction of the cost of goja's
// JSON.stringify with a counting replacer, which encode falls back to
// when it meets a proxy (whose traps decide whether it is an array) or a
// key Go strings cannot carry (a lone surrogate): the getters and traps
// the script's value ran until then run again.
func (g *guards) encode(v goja.Value, field string, budget int) ([]byte, error) {
	e := encoder{g: g, budget: budget}
	var ok, slow bool
	err := g.c.try(func() {
		defer func() {
			if x := recover(); x != nil {
				if x != errSlowEncode {
					panic(x)
				}
				slow = true
			}
		}()
		ok = e.property("", v)
	})
	if slow {
		return g.stringifyCounted(v, field, budget)
	}
	if err != nil {
		return nil, g.encodeFailure(err, field)
	}
	if !ok {
		return nil, badOutput("%s is %s, which JSON cannot encode", field, describe(v))
	}
	return e.buf, nil
}

// encodeFailure is what an error met while encoding field as JSON becomes:
// the script's exception is its bad output; the call's own stop (a limit,
// the time) and anything else go on as the panic they were.
func (g *guards) encodeFailure(err error, field string) error {
	if g.c.cause() != nil {
		panic(err)
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return badOutput("%s cannot be encoded as JSON: %s", field, g.c.message(ex.Value()))
	}
	panic(err)
}

// errSlowEncode sends encode to JSON.stringify.
var errSlowEncode = errors.New("transform: a value for JSON.stringify")

// stringifyCounted is v as JSON with the original JSON.stringify, counted
// against the output limit while it is made.
func (g *guards) stringifyCounted(v goja.Value, field string, budget int) ([]byte, error) {
	k := g.newCounter(int64(budget), LimitOutput)
	res, err := g.stringify(goja.Undefined(), v, g.r.ToValue(k.replacer))
	if err != nil {
		return nil, g.encodeFailure(err, field)
	}
	if !defined(res) {
		return nil, badOutput("%s is %s, which JSON cannot encode", field, describe(v))
	}
	b := []byte(res.String())
	if len(b) > budget {
		return nil, &LimitError{Limit: LimitOutput, Detail: fmt.Sprintf("a body of %d bytes; at most %d", len(b), budget)}
	}
	return b, nil
}

// encoder writes JSON as JSON.stringify without replacer or indent does
// (ECMA-262 25.5.2.2), running inside call.try: what the script's code
// throws unwinds it.
type encoder struct {
	g      *guards
	buf    []byte
	budget int
	stack  []*goja.Object
}

var (
	typeInt64   = reflect.TypeOf(int64(0))
	typeFloat64 = reflect.TypeOf(float64(0))
	typeBool    = reflect.TypeOf(false)
	typeProxy   = reflect.TypeOf(goja.Proxy{})
	typeBigInt  = reflect.TypeOf((*big.Int)(nil))
)

// property writes the value v holds under key (SerializeJSONProperty,
// once Get is done) and reports false, writing nothing, for a value JSON
// leaves out: undefined, a function, a symbol.
func (e *encoder) property(key string, v goja.Value) bool {
	r := e.g.r
	if o, ok := v.(*goja.Object); ok && e.plainLazy(o) {
		e.object(o)
		return true
	}
	if _, ok := v.(*goja.Object); ok || isBigInt(v) {
		if toJSON, ok := goja.AssertFunction(v.ToObject(r).Get("toJSON")); ok {
			var err error
			if v, err = toJSON(v, r.ToValue(key)); err != nil {
				panic(err)
			}
		}
		if o, ok := v.(*goja.Object); ok {
			switch o.ClassName() {
			case "Number":
				v = o.ToNumber()
			case "String":
				v = o.ToString()
			case "Boolean":
				v = r.ToValue(o.Export())
			case "RawJSON":
				e.write(o.Get("rawJSON").String())
				return true
			default:
				if o.ExportType() == typeBigInt {
					v = r.ToValue(o.Export())
				}
			}
		}
	}
	switch {
	case v == nil || goja.IsUndefined(v):
		return false
	case goja.IsNull(v):
		e.write("null")
		return true
	}
	switch x := v.(type) {
	case goja.String:
		e.quote(x)
		return true
	case *goja.Symbol:
		return false
	case *goja.Object:
		if _, ok := goja.AssertFunction(x); ok {
			return false
		}
		e.object(x)
		return true
	}
	switch v.ExportType() {
	case typeBool:
		if v.ToBoolean() {
			e.write("true")
		} else {
			e.write("false")
		}
		return true
	case typeInt64:
		e.write(v.String())
		return true
	case typeFloat64:
		if f := v.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			e.write("null")
		} else {
			e.write(v.String())
		}
		return true
	}
	if isBigInt(v) {
		panic(r.NewTypeError("Do not know how to serialize a BigInt"))
	}
	return false
}

func isBigInt(v goja.Value) bool {
	if _, ok := v.(*goja.Object); ok || v == nil {
		return false
	}
	return v.ExportType() == typeBigInt
}

// object writes an array or an object (SerializeJSONArray and
// SerializeJSONObject), refusing a cycle as JSON.stringify does and
// nesting deeper than maxNesting as the guards do.
func (e *encoder) object(o *goja.Object) {
	e.g.alive()
	for _, s := range e.stack {
		if s == o {
			panic(e.g.r.NewTypeError("Converting circular structure to JSON"))
		}
	}
	if len(e.stack) >= maxNesting {
		e.g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
	}
	l := e.g.lazyOf(o)
	if l == nil && o.ExportType() == typeProxy {
		panic(errSlowEncode)
	}
	e.stack = append(e.stack, o)
	defer func() { e.stack = e.stack[:len(e.stack)-1] }()
	if l != nil && !l.flushed {
		e.lazy(l)
		return
	}
	if o.ClassName() == "Array" {
		n := o.Get("length").ToInteger()
		e.write("[")
		for i := int64(0); i < n; i++ {
			if i > 0 {
				e.write(",")
				if i%1024 == 0 {
					e.g.alive()
				}
			}
			k := strconv.FormatInt(i, 10)
			if !e.property(k, o.Get(k)) {
				e.write("null")
			}
		}
		e.write("]")
		return
	}
	e.write("{")
	empty := true
	for _, k := range o.Keys() {
		if !utf8.ValidString(k) || containsRuneError(k) {
			panic(errSlowEncode)
		}
		mark := len(e.buf)
		if !empty {
			e.write(",")
		}
		e.quoteGo(k)
		e.write(":")
		if e.property(k, o.Get(k)) {
			empty = false
		} else {
			e.buf = e.buf[:mark]
		}
	}
	e.write("}")
}

// plainLazy reports whether o is a lazy not flushed whose toJSON, if any,
// is not a function the script assigned: JSON holds no function, and the
// prototype chain is the frozen Object.prototype, which has no toJSON.
func (e *encoder) plainLazy(o *goja.Object) bool {
	l := e.g.lazyOf(o)
	if l == nil || l.flushed || e.g.intrinsic == nil {
		return false
	}
	if !l.scanned {
		return true
	}
	i := l.find("toJSON")
	return i < 0 || !l.entries[i].set
}

// lazy writes a lazy's members: what the script did not change as the
// producer's bytes, and the whole object so when the script never read it.
func (e *encoder) lazy(l *lazy) {
	if !l.scanned {
		e.writeBytes(l.raw)
		return
	}
	e.write("{")
	empty := true
	for i := range l.entries {
		m := &l.entries[i]
		mark := len(e.buf)
		if !empty {
			e.write(",")
		}
		e.quoteGo(m.key)
		e.write(":")
		switch {
		case !m.set && (m.v == nil || m.raw[0] != '{' && m.raw[0] != '['):
			e.writeBytes(m.raw)
		case !e.property(m.key, m.v):
			e.buf = e.buf[:mark]
			continue
		}
		empty = false
	}
	e.write("}")
}

func containsRuneError(s string) bool {
	for _, c := range s {
		if c == utf8.RuneError {
			return true
		}
	}
	return false
}

// write appends s, refusing to go past the budget.
func (e *encoder) write(s string) {
	if len(e.buf)+len(s) > e.budget {
		e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
	}
	e.buf = append(e.buf, s...)
}

// writeBytes appends b, refusing to go past the budget.
func (e *encoder) writeBytes(b []byte) {
	if len(e.buf)+len(b) > e.budget {
		e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
	}
	e.buf = append(e.buf, b...)
}

const hexDigits = "0123456789abcdef"

// quote writes s as QuoteJSONString does: a lone surrogate escaped as
// \udXXX, other characters below U+0020 escaped, the rest as UTF-8.
func (e *encoder) quote(s goja.String) {
	str := s.String()
	if len(str) == s.Length() {
		e.quoteGo(str) // ASCII: one byte per code unit
		return
	}
	n := s.Length()
	if len(e.buf)+n+2 > e.budget {
		e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
	}
	e.buf = append(e.buf, '"')
	for i := 0; i < n; i++ {
		c := rune(s.CharAt(i))
		if utf16.IsSurrogate(c) {
			if i+1 < n {
				if r := utf16.DecodeRune(c, rune(s.CharAt(i+1))); r != utf8.RuneError {
					e.buf = utf8.AppendRune(e.buf, r)
					i++
					continue
				}
			}
			e.buf = append(e.buf, '\\', 'u', hexDigits[c>>12], hexDigits[c>>8&0xF], hexDigits[c>>4&0xF], hexDigits[c&0xF])
			continue
		}
		e.char(c)
		if len(e.buf) > e.budget {
			e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
		}
	}
	e.buf = append(e.buf, '"')
	if len(e.buf) > e.budget {
		e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
	}
}

// quoteGo writes s, valid UTF-8, quoted.
func (e *encoder) quoteGo(s string) {
	if len(e.buf)+len(s)+2 > e.budget {
		e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
	}
	if plain(s) {
		e.buf = append(append(append(e.buf, '"'), s...), '"')
		return
	}
	e.buf = append(e.buf, '"')
	for _, c := range s {
		e.char(c)
		if len(e.buf) > e.budget {
			e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
		}
	}
	e.buf = append(e.buf, '"')
	if len(e.buf) > e.budget {
		e.g.refuse(LimitOutput, "a body of more than %d bytes", e.budget)
	}
}

// plain reports whether s is ASCII that JSON writes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (e *encoder) char(c rune) {
	switch c {
	case '"', '\\':
		e.buf = append(e.buf, '\\', byte(c))
	case '\b':
		e.buf = append(e.buf, '\\', 'b')
	case '\t':
		e.buf = append(e.buf, '\\', 't')
	case '\n':
		e.buf = append(e.buf, '\\', 'n')
	case '\f':
		e.buf = append(e.buf, '\\', 'f')
	case '\r':
		e.buf = append(e.buf, '\\', 'r')
	default:
		if c < 0x20 {
			e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		} else {
			e.buf = utf8.AppendRune(e.buf, c)
		}
	}
}
