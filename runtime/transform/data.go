package transform

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// data is the event's data as the value goja's JSON.parse makes of it,
// built directly from the bytes: JSON.parse reads its text token by token
// through encoding/json's Decoder, which costs several times more. Like
// JSON.parse it keeps key order (the last of a key named twice wins, in
// the place of the first), makes every number a double, decodes strings
// as encoding/json does (a lone surrogate or a byte that is not UTF-8
// becomes U+FFFD), and defines "__proto__" as an own key. Text that is not
// JSON goes to JSON.parse itself, for its SyntaxError.
func (g *guards) data(b []byte) (v goja.Value) {
	if !json.Valid(b) {
		return g.parseJSON(string(b))
	}
	defer func() {
		if x := recover(); x != nil {
			if x != errParse {
				panic(x)
			}
			v = g.parseJSON(string(b))
		}
	}()
	d := decoder{g: g, b: b}
	return d.value(0)
}

// errParse is what the decoder panics with when encoding/json would not
// read a value (a number out of range): JSON.parse then says why.
var errParse = errors.New("transform: data needs JSON.parse")

// decoder reads valid JSON (json.Valid said so) into goja values.
type decoder struct {
	g *guards
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) goja.Value {
	d.space()
	r := d.g.r
	switch c := d.b[d.i]; c {
	case '{':
		if depth++; depth > maxNesting {
			d.g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
		}
		o := r.NewObject()
		d.i++
		d.space()
		if d.b[d.i] == '}' {
			d.i++
			return o
		}
		for {
			d.space()
			k := d.string()
			d.space()
			d.i++ // ':'
			v := d.value(depth)
			// Set is the cheaper; it would set the prototype, or run a
			// setter Object.prototype has, for these.
			if k == "__proto__" || o.Set(k, v) != nil {
				must(o.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE))
			}
			d.space()
			if d.b[d.i] == '}' {
				d.i++
				return o
			}
			d.i++ // ','
		}
	case '[':
		if depth++; depth > maxNesting {
			d.g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
		}
		var items []any
		d.i++
		d.space()
		if d.b[d.i] == ']' {
			d.i++
			return r.NewArray()
		}
		for {
			items = append(items, d.value(depth))
			d.space()
			if d.b[d.i] == ']' {
				d.i++
				return r.NewArray(items...)
			}
			d.i++ // ','
		}
	case '"':
		return r.ToValue(d.string())
	case 't':
		d.i += len("true")
		return r.ToValue(true)
	case 'f':
		d.i += len("false")
		return r.ToValue(false)
	case 'n':
		d.i += len("null")
		return goja.Null()
	default:
		start := d.i
		for d.i < len(d.b) && isNumberByte(d.b[d.i]) {
			d.i++
		}
		f, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
		if err != nil {
			panic(errParse)
		}
		return r.ToValue(f)
	}
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// string reads the string at d.i: the bytes between the quotes when they
// hold no escape and are UTF-8, else as encoding/json decodes it.
func (d *decoder) string() string {
	start := d.i
	d.i++
	escaped, ascii := false, true
	for {
		c := d.b[d.i]
		if c == '"' {
			break
		}
		if c == '\\' {
			escaped = true
			d.i++
		} else if c >= utf8.RuneSelf {
			ascii = false
		}
		d.i++
	}
	d.i++
	raw := d.b[start:d.i]
	if inner := raw[1 : len(raw)-1]; !escaped && (ascii || utf8.Valid(inner)) {
		return string(inner)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		panic(errParse)
	}
	return s
}
