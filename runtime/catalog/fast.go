package catalog

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"math/big"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path. Check first walks the data once, without decoding it,
// against a program derived from the compiled schema; the library, which
// decodes the data into maps and reads every number through big.Rat at
// over ten times the cost, is asked only when the walk does not find the
// data valid.
//
// The walk implements type, enum, const, format (by the library's own
// checks), minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// multipleOf, minLength, maxLength, pattern, properties, required,
// additionalProperties, minProperties, maxProperties, prefixItems, items,
// minItems, maxItems, $ref within the schema and the boolean schemas, as
// draft 2020-12 has them. A schema using another keyword gets no program.
//
// The walk only ever answers "valid", and must never do so when the
// library would not: what it cannot judge exactly it refuses, and the
// library then decides, and names the violation.

// maxDataDepth is the deepest nesting of objects and arrays the walk
// reads; deeper data is left to the library (whose decoder stops at
// 10,000).
const maxDataDepth = 1000

// Type bits of a JSON value. A number is tInt when it is a whole number
// (1.0 and 1e2 are), which is what the "integer" type means.
const (
	tNull uint8 = 1 << iota
	tBool
	tInt
	tFrac
	tString
	tArray
	tObject

	tNumber   = tInt | tFrac
	tAnything = tNull | tBool | tNumber | tString | tArray | tObject
)

var typeBits = map[string]uint8{
	"null": tNull, "boolean": tBool, "integer": tInt, "number": tNumber,
	"string": tString, "array": tArray, "object": tObject,
}

// node is one schema of the program: its keywords, ready for the walk.
type node struct {
	s     *jsonschema.Schema // read as it is: lengths, counts, pattern, format
	never bool               // the false schema
	ref   *node              // $ref, checked on the same value first
	// onlyRef says $ref is all there is to check: the walk does not read
	// the value a second time.
	onlyRef bool
	types   uint8
	// enums must each hold the value: enum, and const as a list of one.
	enums [][]literal

	minimum, maximum, exclusiveMinimum, exclusiveMaximum *decimal
	multipleOf                                           *multiple

	// Objects: names indexes properties and required names, in order,
	// into order, children and bit sets; required has the bits of the
	// required names.
	names      map[string]int
	order      []string
	children   []*node
	required   []uint64
	additional *node

	prefixItems []*node
	items       *node

	// strings and numbers say whether a string or a number has more than
	// its type to check.
	strings, numbers bool
}

// anything is the true schema, and stands for an absent one; never is
// the false schema.
var (
	anything = func() *node {
		n := &node{s: &jsonschema.Schema{}, types: tAnything}
		n.additional, n.items = n, n
		return n
	}()
	never = &node{never: true}
)

// literal is a scalar of an enum or const.
type literal struct {
	types uint8   // tNull, tBool, tString or tNumber
	str   string  // a string, or the literal of a boolean or null
	num   decimal // of a number
}

// inert are the exported fields of jsonschema.Schema that assert
// nothing: annotations, identifiers.
var inert = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true,
	"DynamicAnchor": true, "RecursiveAnchor": true, "Title": true,
	"Description": true, "Default": true, "Comment": true, "ReadOnly": true,
	"WriteOnly": true, "Examples": true, "Deprecated": true,
}

// implemented are the fields of the keywords the walk implements. A
// schema with any other field set has no fast path, so a keyword that a
// new version of the library adds is left to the library until the walk
// implements it.
var implemented = map[string]bool{
	"Bool": true, "Ref": true, "Types": true, "Enum": true, "Const": true,
	"Format": true, "MinProperties": true, "MaxProperties": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"MinItems": true, "MaxItems": true, "PrefixItems": true, "Items2020": true,
	"MinLength": true, "MaxLength": true, "Pattern": true, "Minimum": true,
	"Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true,
	"MultipleOf": true,
}

// keywords are the fields of the keywords of s that are set.
func keywords(s *jsonschema.Schema) []string {
	var out []string
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && !inert[f.Name] && !v.Field(i).IsZero() {
			out = append(out, f.Name)
		}
	}
	return out
}

// fastPath derives the program of a compiled schema; nil if the schema
// uses a keyword the walk does not implement.
func fastPath(s *jsonschema.Schema) *node {
	b := builder{nodes: map[*jsonschema.Schema]*node{}}
	root := b.node(s)
	if b.failed || refCycle(b.nodes) {
		return nil
	}
	return root
}

// builder makes the nodes of a program, one per schema, so that a schema
// recursing through $ref makes a program recursing the same way.
type builder struct {
	nodes  map[*jsonschema.Schema]*node
	failed bool
}

// node is the node of s, made once.
func (b *builder) node(s *jsonschema.Schema) *node {
	if n, ok := b.nodes[s]; ok {
		return n
	}
	n := &node{s: s, types: tAnything, additional: anything, items: anything}
	b.nodes[s] = n
	// In drafts before 2020-12, $ref and items mean other things.
	kw := keywords(s)
	if s.DraftVersion != 2020 || slices.ContainsFunc(kw, func(k string) bool { return !implemented[k] }) {
		b.failed = true
		return n
	}
	n.onlyRef = slices.Equal(kw, []string{"Ref"})
	if s.Bool != nil {
		n.never = !*s.Bool
		return n
	}
	if s.Ref != nil {
		n.ref = b.node(s.Ref)
	}
	if s.Types != nil {
		n.types = 0
		for _, t := range s.Types.ToStrings() {
			n.types |= typeBits[t]
		}
	}
	if s.Const != nil {
		n.enums = append(n.enums, b.literals([]any{*s.Const}))
	}
	if s.Enum != nil {
		n.enums = append(n.enums, b.literals(s.Enum.Values))
	}
	n.minimum = b.decimal(s.Minimum)
	n.maximum = b.decimal(s.Maximum)
	n.exclusiveMinimum = b.decimal(s.ExclusiveMinimum)
	n.exclusiveMaximum = b.decimal(s.ExclusiveMaximum)
	if d := b.decimal(s.MultipleOf); d != nil {
		m, ok := newMultiple(*d)
		b.failed = b.failed || !ok
		n.multipleOf = &m
	}
	b.object(n, s)
	if s.Items2020 != nil {
		n.items = b.node(s.Items2020)
	}
	for _, p := range s.PrefixItems {
		n.prefixItems = append(n.prefixItems, b.node(p))
	}
	n.strings = n.enums != nil || s.Format != nil || s.Pattern != nil || s.MinLength != nil || s.MaxLength != nil
	n.numbers = n.enums != nil || s.Format != nil || n.minimum != nil || n.maximum != nil ||
		n.exclusiveMinimum != nil || n.exclusiveMaximum != nil || n.multipleOf != nil
	return n
}

// object fills in the object keywords of n. A required name that is not
// a property is indexed too, its value checked by additionalProperties.
func (b *builder) object(n *node, s *jsonschema.Schema) {
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		if !a {
			n.additional = never
		}
	case *jsonschema.Schema:
		n.additional = b.node(a)
	default:
		b.failed = true
	}
	if len(s.Properties) == 0 && len(s.Required) == 0 {
		return
	}
	n.names = map[string]int{}
	add := func(name string, child *node) {
		if _, ok := n.names[name]; !ok {
			n.names[name] = len(n.order)
			n.order = append(n.order, name)
			n.children = append(n.children, child)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		add(name, b.node(s.Properties[name]))
	}
	for _, name := range slices.Sorted(slices.Values(s.Required)) {
		add(name, n.additional)
	}
	n.required = make([]uint64, (len(n.children)+63)>>6)
	for _, name := range s.Required {
		i := n.names[name]
		n.required[i>>6] |= 1 << (i & 63)
	}
}

// literals are the scalars of an enum. Objects and arrays are left out:
// the walk refuses an object or array that an enum must hold. So is a
// number past the bounds the walk reads.
func (b *builder) literals(values []any) []literal {
	var out []literal
	for _, v := range values {
		switch v := v.(type) {
		case nil:
			out = append(out, literal{types: tNull, str: "null"})
		case bool:
			out = append(out, literal{types: tBool, str: strconv.FormatBool(v)})
		case string:
			out = append(out, literal{types: tString, str: v})
		case json.Number:
			var d decimal
			if d.read([]byte(v)) == len(v) {
				out = append(out, literal{types: tNumber, num: d})
			}
		case map[string]any, []any:
		default:
			b.failed = true
		}
	}
	return out
}

// decimal is a numeric bound as a decimal; nil if the schema has none.
func (b *builder) decimal(r *big.Rat) *decimal {
	if r == nil {
		return nil
	}
	d, ok := ratDecimal(r)
	b.failed = b.failed || !ok
	return &d
}

// refCycle reports whether following $ref alone, which reads no data,
// comes back to a schema: the library reports such a cycle, the walk
// would not end.
func refCycle(nodes map[*jsonschema.Schema]*node) bool {
	for _, n := range nodes {
		steps := 0
		for m := n.ref; m != nil; m = m.ref {
			if steps++; steps > len(nodes) {
				return true
			}
		}
	}
	return false
}

// valid reports whether the walk finds data valid against the program
// rooted at n. False is no verdict: the library decides.
func (n *node) valid(data []byte) bool {
	w := walker{data: data}
	i := w.value(n, w.space(0), 0)
	return i >= 0 && w.space(i) == len(data)
}

// walker reads one JSON document (RFC 8259), strictly: whatever
// encoding/json would refuse, or would alter (invalid UTF-8, an escaped
// lone surrogate), it refuses as well. Its methods take the index in
// data of what they read and return the index past it, or -1 when it is
// not valid (or the walk cannot tell).
type walker struct {
	data []byte
	buf  []byte // the contents of a string with escapes, unescaped
}

// value checks the value at i against n. Where an enum, const or format
// applies, an object or array is refused: the walk has no Go value of it
// to compare or hand to the format's check.
func (w *walker) value(n *node, i, depth int) int {
	if depth > maxDataDepth {
		return -1
	}
	if n.ref != nil {
		if end := w.value(n.ref, i, depth); end < 0 || n.onlyRef {
			return end
		}
	}
	if n.never || i == len(w.data) {
		return -1
	}
	switch w.data[i] {
	case '{':
		if n.types&tObject == 0 || n.enums != nil || n.s.Format != nil {
			return -1
		}
		return w.object(n, i, depth+1)
	case '[':
		if n.types&tArray == 0 || n.enums != nil || n.s.Format != nil {
			return -1
		}
		return w.array(n, i, depth+1)
	case '"':
		return w.string(n, i)
	case 't', 'f', 'n':
		return w.word(n, i)
	}
	return w.number(n, i)
}

// object checks an object. Every member is checked, a repeated name as
// well: encoding/json keeps the last, so all valid means it is valid. A
// repeated name counts once in the library's maxProperties and
// minProperties: the walk bounds the count of distinct names from above
// by the count of members, and from below by the distinct names it knows
// plus one if there are others.
func (w *walker) object(n *node, i, depth int) int {
	// seen has the bit of each name of n met; 256 names take no
	// allocation.
	var small [4]uint64
	seen := small[:]
	if len(n.required) > len(small) {
		seen = make([]uint64, len(n.required))
	}
	members, others, next := 0, 0, 0
	if i = w.space(i + 1); w.at(i) != '}' {
		for {
			if w.at(i) != '"' {
				return -1
			}
			end, escaped := w.str(i)
			if end < 0 {
				return -1
			}
			name := w.data[i+1 : end]
			if escaped {
				if !w.unescape(name) {
					return -1
				}
				name = w.buf
			}
			child := n.additional
			if k, ok := n.index(name, next); ok {
				child, next = n.children[k], k+1
				seen[k>>6] |= 1 << (k & 63)
			} else {
				others++
			}
			members++
			if i = w.space(end + 1); w.at(i) != ':' {
				return -1
			}
			if i = w.value(child, w.space(i+1), depth); i < 0 {
				return -1
			}
			if i = w.space(i); w.at(i) != ',' {
				break
			}
			i = w.space(i + 1)
		}
		if w.at(i) != '}' {
			return -1
		}
	}
	for k, r := range n.required {
		if seen[k]&r != r {
			return -1
		}
	}
	s := n.s
	if s.MaxProperties != nil && members > *s.MaxProperties {
		return -1
	}
	if s.MinProperties != nil {
		distinct := min(others, 1)
		for _, b := range seen {
			distinct += bits.OnesCount64(b)
		}
		if distinct < *s.MinProperties {
			return -1
		}
	}
	return i + 1
}

// index is the index of a name of n. Encoders often write members in
// the order of their names, so the name after the previous one, next, is
// tried first; a few names are compared before a map is hashed.
func (n *node) index(name []byte, next int) (int, bool) {
	if next < len(n.order) && n.order[next] == string(name) {
		return next, true
	}
	if len(n.order) > 8 {
		k, ok := n.names[string(name)]
		return k, ok
	}
	for k, o := range n.order {
		if o == string(name) {
			return k, true
		}
	}
	return 0, false
}

// array checks an array: prefixItems, then items.
func (w *walker) array(n *node, i, depth int) int {
	count := 0
	if i = w.space(i + 1); w.at(i) != ']' {
		for {
			child := n.items
			if count < len(n.prefixItems) {
				child = n.prefixItems[count]
			}
			if i = w.value(child, i, depth); i < 0 {
				return -1
			}
			count++
			if i = w.space(i); w.at(i) != ',' {
				break
			}
			i = w.space(i + 1)
		}
		if w.at(i) != ']' {
			return -1
		}
	}
	if s := n.s; s.MinItems != nil && count < *s.MinItems || s.MaxItems != nil && count > *s.MaxItems {
		return -1
	}
	return i + 1
}

// string checks a string. Its contents are read as encoding/json decodes
// them, and made a Go string only for a pattern or format.
func (w *walker) string(n *node, i int) int {
	end, escaped := w.str(i)
	if end < 0 || n.types&tString == 0 {
		return -1
	}
	if !n.strings {
		return end + 1
	}
	b := w.data[i+1 : end]
	if escaped {
		if !w.unescape(b) {
			return -1
		}
		b = w.buf
	}
	s := n.s
	// A string has no more code points than bytes: most are within
	// maxLength without counting.
	if s.MinLength != nil || s.MaxLength != nil && len(b) > *s.MaxLength {
		l := utf8.RuneCount(b)
		if s.MinLength != nil && l < *s.MinLength || s.MaxLength != nil && l > *s.MaxLength {
			return -1
		}
	}
	if !n.holds(tString, b, nil) {
		return -1
	}
	if s.Pattern != nil || s.Format != nil {
		v := string(b)
		if s.Pattern != nil && !s.Pattern.MatchString(v) || s.Format != nil && s.Format.Validate(v) != nil {
			return -1
		}
	}
	return end + 1
}

// word checks true, false or null.
func (w *walker) word(n *node, i int) int {
	t, text, v := tNull, "null", any(nil)
	switch w.data[i] {
	case 't':
		t, text, v = tBool, "true", true
	case 'f':
		t, text, v = tBool, "false", false
	}
	b := w.data[i:min(i+len(text), len(w.data))]
	if string(b) != text || n.types&t == 0 || !n.holds(t, b, nil) ||
		n.s.Format != nil && n.s.Format.Validate(v) != nil {
		return -1
	}
	return i + len(text)
}

// number checks a number, read exactly; a format gets it as the library
// does, a json.Number.
func (w *walker) number(n *node, i int) int {
	var d decimal
	size := d.read(w.data[i:])
	if size < 0 {
		return -1
	}
	t := tFrac
	if d.isInt() {
		t = tInt
	}
	if n.types&t == 0 {
		return -1
	}
	if n.numbers && !n.numberHolds(t, &d, w.data[i:i+size]) {
		return -1
	}
	return i + size
}

// numberHolds reports whether a number (d, of type t, written lit) meets
// the node's numeric keywords and format.
func (n *node) numberHolds(t uint8, d *decimal, lit []byte) bool {
	return n.holds(t, nil, d) &&
		(n.minimum == nil || compareDecimals(*d, *n.minimum) >= 0) &&
		(n.maximum == nil || compareDecimals(*d, *n.maximum) <= 0) &&
		(n.exclusiveMinimum == nil || compareDecimals(*d, *n.exclusiveMinimum) > 0) &&
		(n.exclusiveMaximum == nil || compareDecimals(*d, *n.exclusiveMaximum) < 0) &&
		(n.multipleOf == nil || n.multipleOf.divides(*d)) &&
		(n.s.Format == nil || n.s.Format.Validate(json.Number(lit)) == nil)
}

// holds reports whether every enum of n holds a value of type t (one
// type bit): a number d, or else the string, boolean or null b. It is
// inlined: most nodes have no enum to look through.
func (n *node) holds(t uint8, b []byte, d *decimal) bool {
	return n.enums == nil || n.inEnums(t, b, d)
}

func (n *node) inEnums(t uint8, b []byte, d *decimal) bool {
	for _, enum := range n.enums {
		k := 0
		for k < len(enum) && !enum[k].is(t, b, d) {
			k++
		}
		if k == len(enum) {
			return false
		}
	}
	return true
}

func (e *literal) is(t uint8, b []byte, d *decimal) bool {
	switch {
	case e.types&t == 0:
		return false
	case t&tNumber != 0:
		return compareDecimals(e.num, *d) == 0
	}
	return e.str == string(b)
}

// str reads the string at i, a quote: its contents are data[i+1:end] as
// they are, and escaped says whether they hold escapes; end is -1 if it
// is not a string that encoding/json reads unaltered. Most strings are
// plain bytes to a quote, read eight at a time; the rest is strTail's.
func (w *walker) str(i int) (end int, escaped bool) {
	data := w.data
	for i++; i+8 <= len(data); i += 8 {
		if m := specials(binary.LittleEndian.Uint64(data[i:])); m != 0 {
			if i += bits.TrailingZeros64(m) / 8; data[i] == '"' {
				return i, false
			}
			break
		}
	}
	return w.strTail(i)
}

// strTail is str from i, past its quote and plain bytes.
func (w *walker) strTail(i int) (end int, escaped bool) {
	data := w.data
	for {
		for i < len(data) && plain[data[i]] {
			i++
		}
		if i == len(data) {
			return -1, false
		}
		switch c := data[i]; {
		case c == '"':
			return i, escaped
		case c == '\\':
			escaped = true
			n := escapeLen(data[i:])
			if n == 0 {
				return -1, false
			}
			i += n
		case c < 0x20:
			return -1, false
		default:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return -1, false
			}
			i += n
		}
	}
}

// plain are the bytes that stand for themselves in a JSON string: ASCII
// but control characters, quote and backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// specials finds the bytes that are not plain in eight bytes of a
// string, x read little-endian: the lowest set bit of the result is the
// high bit of the first of them; 0 if all are plain. A byte from 0x80 up
// has its high bit set; one below 0x20 sets it in x - ones*0x20, as a
// byte equal to c does in (x ^ ones*c) - ones. A plain byte neither sets
// it nor borrows from the byte above, so the first byte flagged is the
// first that is not plain (the ones above it may be flagged falsely).
func specials(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (x | (x - ones*0x20) | ((x ^ ones*'"') - ones) | ((x ^ ones*'\\') - ones)) & highs
}

// escapes maps the byte after a backslash to what it stands for; \u is
// apart.
var escapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escapeLen is the length of the escape at the start of b; 0 if there is
// none.
func escapeLen(b []byte) int {
	switch {
	case len(b) < 2:
		return 0
	case b[1] != 'u' && escapes[b[1]] != 0:
		return 2
	case b[1] != 'u' || len(b) < 6:
		return 0
	}
	for _, c := range b[2:6] {
		if hexDigit(c) < 0 {
			return 0
		}
	}
	return 6
}

func hexDigit(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// unescape decodes contents that str has read into w.buf; false if they
// hold a lone surrogate, which encoding/json would make U+FFFD.
func (w *walker) unescape(b []byte) bool {
	w.buf = w.buf[:0]
	for i := 0; i < len(b); {
		if b[i] != '\\' {
			w.buf = append(w.buf, b[i])
			i++
			continue
		}
		if b[i+1] != 'u' {
			w.buf = append(w.buf, escapes[b[i+1]])
			i += 2
			continue
		}
		r := hex4(b[i+2:])
		i += 6
		if utf16.IsSurrogate(r) {
			if len(b)-i < 6 || b[i] != '\\' || b[i+1] != 'u' {
				return false
			}
			if r = utf16.DecodeRune(r, hex4(b[i+2:])); r == utf8.RuneError {
				return false
			}
			i += 6
		}
		w.buf = utf8.AppendRune(w.buf, r)
	}
	return true
}

// hex4 is the rune of the four hex digits that b starts with.
func hex4(b []byte) rune {
	return hexDigit(b[0])<<12 | hexDigit(b[1])<<8 | hexDigit(b[2])<<4 | hexDigit(b[3])
}

// at is the byte at i; 0 past the end.
func (w *walker) at(i int) byte {
	if i < len(w.data) {
		return w.data[i]
	}
	return 0
}

// space is the index of the first byte at or after i that is not
// whitespace.
func (w *walker) space(i int) int {
	for i < len(w.data) {
		switch w.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
