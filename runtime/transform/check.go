package transform

import "strconv"

// checker checks that the event's data is JSON before any of it is
// decoded, in one pass that builds nothing (a fraction of
// encoding/json.Valid's cost): its objects are decoded later, as the
// script reads them, and must not fail then. Nesting deeper than
// maxNesting is refused as the decoder refused it; a number encoding/json
// would not read (out of range) panics with errParse, so that JSON.parse
// says what it makes of it.
type checker struct {
	g *guards
	b []byte
	i int
	// spans are where each object and array starts and ends, by start.
	spans []span
}

// span is where an object or array starts in the data, and ends (past its
// last byte).
type span struct{ start, end int }

// valid reports whether b is one JSON value, with white space around.
func (c *checker) valid() bool {
	c.space()
	if !c.value(0) {
		return false
	}
	c.space()
	return c.i == len(c.b)
}

func (c *checker) space() { c.i = skipSpace(c.b, c.i) }

// next is the byte at i, 0 past the end.
func (c *checker) next() byte {
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

func (c *checker) value(depth int) bool {
	switch c.next() {
	case '{':
		return c.members(depth+1, '}', true)
	case '[':
		return c.members(depth+1, ']', false)
	case '"':
		return c.string()
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.literal("null")
	}
	return c.number()
}

// members checks an object's members (keyed) or an array's elements, up
// to end.
func (c *checker) members(depth int, end byte, keyed bool) bool {
	if depth > maxNesting {
		c.g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
	}
	k := len(c.spans)
	c.spans = append(c.spans, span{start: c.i})
	c.i++
	c.space()
	if c.next() == end {
		c.i++
		c.spans[k].end = c.i
		return true
	}
	for {
		if keyed {
			if c.next() != '"' || !c.string() {
				return false
			}
			c.space()
			if c.next() != ':' {
				return false
			}
			c.i++
			c.space()
		}
		if !c.value(depth) {
			return false
		}
		c.space()
		switch c.next() {
		case end:
			c.i++
			c.spans[k].end = c.i
			return true
		case ',':
			c.i++
			c.space()
		default:
			return false
		}
	}
}

// string checks the string at i: no control character, only the escapes
// JSON has.
func (c *checker) string() bool {
	for c.i++; c.i < len(c.b); c.i++ {
		switch ch := c.b[c.i]; {
		case ch == '"':
			c.i++
			return true
		case ch < 0x20:
			return false
		case ch == '\\':
			c.i++
			switch c.next() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					c.i++
					if !isHex(c.next()) {
						return false
					}
				}
			default:
				return false
			}
		}
	}
	return false
}

func isHex(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}

func (c *checker) literal(s string) bool {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return false
	}
	c.i += len(s)
	return true
}

// number checks -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? at i, and
// that a double holds it.
func (c *checker) number() bool {
	start := c.i
	if c.next() == '-' {
		c.i++
	}
	switch ch := c.next(); {
	case ch == '0':
		c.i++
	case ch >= '1' && ch <= '9':
		c.digits()
	default:
		return false
	}
	if c.next() == '.' {
		c.i++
		if !c.digits() {
			return false
		}
	}
	exp := false
	if ch := c.next(); ch == 'e' || ch == 'E' {
		exp = true
		c.i++
		if ch := c.next(); ch == '+' || ch == '-' {
			c.i++
		}
		if !c.digits() {
			return false
		}
	}
	// Only an exponent or hundreds of digits go past a double.
	if exp || c.i-start > 300 {
		if _, err := strconv.ParseFloat(string(c.b[start:c.i]), 64); err != nil {
			panic(errParse)
		}
	}
	return true
}

// digits moves past [0-9]+ and reports whether there was one.
func (c *checker) digits() bool {
	start := c.i
	for ch := c.next(); ch >= '0' && ch <= '9'; ch = c.next() {
		c.i++
	}
	return c.i > start
}
