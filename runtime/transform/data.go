package transform

import (
	"encoding/json"
	"errors"
	"slices"
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
// becomes U+FFFD), and defines "__proto__" as an own key. Its objects are
// lazies (lazy.go), decoded as the script reads them; the bytes are
// checked whole first, so that data JSON.parse refuses (not JSON, nested
// deeper than maxNesting, a number out of range) fails here, before the
// handler runs, as it did when everything was decoded at once. Text that
// is not JSON goes to JSON.parse itself, for its SyntaxError.
func (g *guards) data(b []byte) (v goja.Value) {
	defer func() {
		if x := recover(); x != nil {
			if x != errParse {
				panic(x)
			}
			v = g.parseJSON(string(b))
		}
	}()
	c := checker{g: g, b: b}
	if !c.valid() {
		return g.parseJSON(string(b))
	}
	d := decoder{g: g, b: b, spans: c.spans}
	return d.value(0)
}

// errParse is what the decoder panics with when encoding/json would not
// read a value (a number out of range): JSON.parse then says why.
var errParse = errors.New("transform: data needs JSON.parse")

// decoder reads valid JSON (checker said so) into goja values.
type decoder struct {
	g     *guards
	b     []byte
	spans []span
	i     int
}

func (d *decoder) space() { d.i = skipSpace(d.b, d.i) }

// skipSpace is the position of the first byte from i on that is not
// JSON's white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (d *decoder) value(depth int) goja.Value {
	d.space()
	r := d.g.r
	switch c := d.b[d.i]; c {
	case '{':
		return d.g.newLazy(d, depth+1)
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

// skip moves past the value at d.i: past an object or array at once, to
// the end the checker found for it, so that reading data level by level
// costs its size once, not once per level.
func (d *decoder) skip() {
	switch d.b[d.i] {
	case '"':
		d.skipString()
	case '{', '[':
		k, _ := slices.BinarySearchFunc(d.spans, d.i, func(s span, at int) int { return s.start - at })
		d.i = d.spans[k].end
	default:
		for d.i < len(d.b) && (isNumberByte(d.b[d.i]) || d.b[d.i] >= 'a' && d.b[d.i] <= 'z') {
			d.i++
		}
	}
}

// skipString moves past the string at d.i.
func (d *decoder) skipString() {
	for d.i++; d.b[d.i] != '"'; d.i++ {
		if d.b[d.i] == '\\' {
			d.i++
		}
	}
	d.i++
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
