package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookpipe/hookpipe/runtime/jsondepth"
)

// fastSchema is a schema of the differential tests, with examples it
// accepts: every top-level member of an example is replaced by each of
// mutations, dropped and repeated.
type fastSchema struct {
	name, schema string
	examples     []string
	// data are more documents to check, valid or not.
	data []string
	// partial says the walk leaves some valid data to the library for a
	// reason of the schema (an enum or format that may hold an object or
	// array); the test then only asks that the walk never be wrong.
	partial bool
}

func fastSchemas(t testing.TB) []fastSchema {
	invoice, err := os.ReadFile("testdata/invoice.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("testdata/invoice.json")
	if err != nil {
		t.Fatal(err)
	}
	return []fastSchema{
		{name: "invoice", schema: string(invoice), examples: []string{string(example)}},
		{name: "nested", schema: `{
			"type": "object", "required": ["id", "lines"], "minProperties": 2, "maxProperties": 5,
			"properties": {
				"id": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^in_[a-zé]+$"},
				"lines": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
					"type": "object", "additionalProperties": false, "required": ["sku"],
					"properties": {
						"sku": {"type": "string"},
						"tags": {"type": "array", "items": {"type": "string", "maxLength": 2}},
						"dims": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "integer"}], "items": false}}}},
				"meta": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
				"note": {"type": ["string", "null"]}},
			"additionalProperties": {"type": "boolean"}}`,
			examples: []string{
				`{"id": "in_é", "lines": [{"sku": "a", "tags": ["x", "éé"], "dims": [1.5, 2]}], "meta": {"a": 1, "b": null}, "flag": true}`,
				`{"id":"in_abcde","lines":[{"sku":"a"},{"sku":"b","dims":[]},{"sku":"c","dims":[0]}]}`,
			},
			data: []string{
				`{"id": "in_abcdef", "lines": [{"sku": "a"}]}`,
				`{"id": "in_a", "lines": [{"sku": "a"}, {"sku": "b"}, {"sku": "c"}, {"sku": "d"}]}`,
				`{"id": "in_a", "lines": []}`,
				`{"id": "in_a", "lines": [{"sku": "a", "dims": [1, 2, 3]}]}`,
				`{"id": "in_a", "lines": [{"sku": "a", "dims": [1, 2.5]}]}`,
				`{"id": "in_a", "lines": [{"sku": "a", "dims": ["1"]}]}`,
				`{"id": "in_a", "lines": [{"sku": "a", "tags": ["abc"]}]}`,
				`{"id": "in_a", "lines": [{"sku": "a", "tags": ["éé"]}]}`,
				`{"id": "in_a", "lines": [{"sku": "a", "tags": ["ééé"]}]}`,
				`{"id": "in_a", "lines": [{"sku": "a", "other": 1}]}`,
				`{"id": "in_a", "lines": [{"sku": "a"}], "meta": {"a": 1.0, "b": 1e0}}`,
				`{"id": "in_a", "lines": [{"sku": "a"}], "meta": {"a": 1.5}}`,
				`{"id": "in_a", "lines": [{"sku": "a"}], "meta": {"a": "1"}}`,
				`{"id": "in_A", "lines": [{"sku": "a"}]}`,
				`{"id": "in_\u00e9", "lines": [{"sku": "a"}]}`,
				`{"id": "in_\u00E9\u00e9", "lines": [{"sku": "a"}]}`,
				`{"id": "xin_a", "lines": [{"sku": "a"}]}`,
				`{"id": "in_a", "lines": [{"sku": "a"}], "a": true, "b": false, "c": true, "d": true}`,
				`{"id": "in_a", "lines": [{"sku": "a"}], "a": true, "b": false, "c": true}`,
				`{"id": "in_a", "lines": [{"sku": "a"}], "a": true, "a": true, "a": true, "a": true}`,
				`{"id": "in_a", "id": "in_b"}`,
				`{"lines": [{"sku": "a"}], "lines": [{"sku": "b"}]}`,
			},
		},
		{name: "refs", schema: `{
			"$defs": {
				"node": {"type": "object", "required": ["v"], "properties": {
					"v": {"$ref": "#/$defs/amount"},
					"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
				"amount": {"type": "number", "minimum": 0}},
			"$ref": "#/$defs/node",
			"properties": {"v": {"maximum": 100}},
			"required": ["children"]}`,
			examples: []string{`{"v": 100, "children": [{"v": 1e3, "children": [{"v": 0}]}, {"v": 0.5}]}`},
			data: []string{
				`{"v": 100.5, "children": []}`,
				`{"v": -1, "children": []}`,
				`{"v": 1}`,
				`{"children": []}`,
				`{"v": 1, "children": [{"v": -0.1}]}`,
				`{"v": 1, "children": [{"children": []}]}`,
				`{"v": 1, "children": [{"v": 1, "children": [{"v": 1, "children": [{"v": "1"}]}]}]}`,
				strings.Repeat(`{"v": 1, "children": [`, 200) + `{"v": 2}` + strings.Repeat(`]}`, 200),
				strings.Repeat(`{"v": 1, "children": [`, 200) + `{"v": -2}` + strings.Repeat(`]}`, 200),
			},
		},
		{name: "enums", schema: `{"type": "object", "properties": {
				"status": {"enum": ["open", "paid", "é", "\u00e9x", "", "a\"b"]},
				"n": {"enum": [1, 2.5, -0, 1e2, null, true, 12345678901234567890]},
				"c": {"const": "fixed"},
				"k": {"const": 10},
				"f": {"const": false},
				"z": {"const": null},
				"both": {"enum": [1, 2, 3], "const": 2}}}`,
			examples: []string{`{"status": "paid", "n": 2.5, "c": "fixed", "k": 10, "f": false, "z": null, "both": 2}`},
			data: []string{
				`{"status": "\u00e9"}`, `{"status": "éx"}`, `{"status": "a\"b"}`, `{"status": "a\u0022b"}`,
				`{"n": 1.0}`, `{"n": 0.1e1}`, `{"n": 100}`, `{"n": 1E2}`, `{"n": 0}`, `{"n": -0.0}`,
				`{"n": 12345678901234567890}`, `{"n": 12345678901234567890.0}`, `{"n": 12345678901234567891}`,
				`{"n": 2.50}`, `{"n": 2.49}`, `{"n": null}`, `{"n": true}`, `{"n": false}`, `{"n": "1"}`,
				`{"k": 10.0}`, `{"k": 1e1}`, `{"k": 100e-1}`, `{"k": 11}`, `{"both": 1}`, `{"both": 2.0}`,
				`{"f": 0}`, `{"z": false}`,
			},
		},
		{name: "formats", schema: `{"type": "object", "properties": {
				"email": {"type": "string", "format": "email"},
				"when": {"type": "string", "format": "date-time"},
				"day": {"type": ["string", "number", "boolean", "null"], "format": "date"},
				"ip": {"type": "string", "format": "ipv4"},
				"id": {"type": "string", "format": "uuid"},
				"uri": {"type": "string", "format": "uri"},
				"re": {"type": "string", "format": "regex"},
				"host": {"type": "string", "format": "hostname"},
				"unknown": {"type": "string", "format": "no-such-format"}}}`,
			examples: []string{`{"email": "a@example.com", "when": "2026-11-26T17:10:57Z", "day": "2026-11-26",
				"ip": "10.0.0.1", "id": "0b4a2c3e-1f5d-4e6a-9b7c-8d9e0f1a2b3c", "uri": "https://example.com/a?b#c",
				"re": "^a+$", "host": "example.com", "unknown": "anything"}`},
			data: []string{
				`{"email": "a@b@example.com"}`, `{"email": "a@example..com"}`, `{"email": "é@example.com"}`,
				`{"email": "a\u0040example.com"}`, `{"when": "2026-13-26T17:10:57Z"}`, `{"when": "2026-11-26"}`,
				`{"day": 20261126}`, `{"day": true}`, `{"day": null}`, `{"day": "2026-02-30"}`,
				`{"ip": "10.0.0.256"}`, `{"ip": "::1"}`, `{"id": "0b4a2c3e1f5d4e6a9b7c8d9e0f1a2b3c"}`,
				`{"uri": "no scheme"}`, `{"re": "(unclosed"}`, `{"re": "^(?=a)"}`, `{"host": "-a.example.com"}`,
			},
		},
		{name: "bounds", schema: `{"type": "object", "properties": {
				"a": {"type": "number", "minimum": -1.5, "maximum": 1e3},
				"b": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 100.25},
				"c": {"type": "number", "multipleOf": 0.01},
				"d": {"type": "integer", "multipleOf": 3, "minimum": -9},
				"e": {"type": "integer"},
				"f": {"type": "number", "maximum": 12345678901234567890.5},
				"g": {"type": "number", "multipleOf": 2.5e-3},
				"h": {"type": "integer", "maximum": 9007199254740993}}}`,
			examples: []string{`{"a": -1.5, "b": 100.2499, "c": 19.99, "d": -9, "e": 1e2, "f": 12345678901234567890.5, "g": 0.0075, "h": 9007199254740993}`},
			data: []string{
				`{"a": -1.51}`, `{"a": 1000}`, `{"a": 1000.0000001}`, `{"a": 1e3}`, `{"a": 10e2}`, `{"a": 0.1e4}`, `{"a": -15e-1}`, `{"a": -16e-1}`,
				`{"b": 0}`, `{"b": -0}`, `{"b": 1e-400}`, `{"b": 100.25}`, `{"b": 100.2500}`, `{"b": 10025e-2}`, `{"b": 100.24999999999999999999}`,
				`{"c": 0.1}`, `{"c": 0.001}`, `{"c": 1e-2}`, `{"c": 1e300}`, `{"c": 123456789012345678901234567890.12}`, `{"c": 0.015}`, `{"c": -0.03}`,
				`{"d": 3.0}`, `{"d": 4}`, `{"d": -12}`, `{"d": 3e10}`, `{"d": 1.5}`, `{"d": 9e1}`,
				`{"e": 1e1000001}`, `{"e": 1e99999999999999999999}`, `{"e": 1.0}`, `{"e": 1.5}`, `{"e": 1e-1}`, `{"e": 12345678901234567890123}`, `{"e": 1.00000000000000000001}`, `{"e": 1e400}`, `{"e": -0}`,
				`{"f": 12345678901234567890.50000001}`, `{"f": 12345678901234567891}`, `{"f": 1.2345678901234567890e19}`,
				`{"g": 0.005}`, `{"g": 0.0051}`, `{"g": 1}`, `{"g": 2.5e-3}`, `{"g": 2.5e-4}`,
				`{"h": 9007199254740994}`, `{"h": 9007199254740992}`, `{"h": 9007199254740993.0}`,
			},
		},
		{name: "booleans and required names", schema: `{"type": "object", "properties": {
				"never": false, "any": true, "pair": {"type": "array", "prefixItems": [true, false]}, "\ufffd": false},
				"required": ["x"], "additionalProperties": {"type": "string"}}`,
			examples: []string{`{"x": "1", "any": [{"deep": [null]}], "pair": [{}]}`},
			data: []string{`{"x": "1", "never": 1}`, `{"x": 1}`, `{"x": "1", "pair": [1, 2]}`, `{"y": "1"}`,
				"{\"x\": \"1\", \"\xff\": \"1\"}"},
		},
		{name: "counts and repeated names", schema: `{"minProperties": 2, "maxProperties": 3, "type": ["object", "integer", "string"],
				"properties": {"a": {"type": "integer"}}, "required": ["a"]}`,
			examples: []string{`{"a": 1, "b": 2}`, `{"a": 1, "b": 2, "c": 3}`},
			data: []string{
				`{"a": 1, "a": 2}`, `{"a": 1, "b": 2, "b": 3}`, `{"a": 1, "b": 2, "c": 3, "c": 4}`,
				`{"a": 1, "b": 2, "c": 3, "d": 4}`, `{"a": "x", "b": 2, "a": 1}`, `{"a": 1, "b": 2, "a": "x"}`,
				`{"a\u0000": 1, "a": 1}`, `{"\u0061": 1, "b": 1}`, `{"a": 1, "\ud800": 1}`, `{"a": 1, "\ud83d\ude00": 1}`,
			},
		},
		{name: "true", schema: `true`},
		{name: "false", schema: `false`},
		{name: "empty", schema: `{"$comment": "accepts anything", "title": "t"}`},
		{name: "compound enum and formats", partial: true, schema: `{"properties": {
				"e": {"enum": [{"a": 1}, [1, 2], "s", 1]},
				"c": {"const": {"a": [1]}},
				"day": {"format": "date"}}}`,
			examples: []string{`{"e": "s", "day": "2026-11-26"}`, `{"e": {"a": 1}, "c": {"a": [1]}, "day": {}}`},
			data:     []string{`{"e": [1, 2]}`, `{"e": [2, 1]}`, `{"c": {"a": [1.0]}}`, `{"day": [1]}`, `{"e": 1.0}`},
		},
	}
}

// mutations replace members of the examples: every type, numbers at the
// edges, strings not ASCII and escaped, nested values.
var mutations = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.0`, `1.5`, `1e2`, `1E+2`, `1e-2`, `0.1e1`, `1e400`, `-1e400`,
	`1001`, `25.0`, `12345678901234567890123`, `9007199254740993`, `1.00000000000000000000001`,
	`""`, `"x"`, `"é"`, `"😀"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`, `"a\udc00b"`, `"\ud800\u0041"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"paid"`, `"void"`, `"late"`,
	`"user@example.com"`, `"not an address"`, `"in_abc"`,
	`"` + strings.Repeat("a", 64) + `"`, `"` + strings.Repeat("a", 65) + `"`,
	`"` + strings.Repeat("é", 64) + `"`, `"` + strings.Repeat("é", 65) + `"`,
	`[]`, `[1]`, `{}`, `{"a": 1}`, `[[[]]]`,
	`[{"sku": "a", "qty": 1}]`, `[{"sku": "a", "qty": 1.0}, {"sku": "b", "qty": -0}]`, `[{"sku": "a"}]`,
	`[{"sku": "a", "qty": 1.5}]`, `[{"sku": 1, "qty": 1}]`, `[{"sku": "a", "qty": 1, "sku": "b"}]`,
	`[{"sku": "a", "qty": 1, "extra": {"deep": [1, {"x": null}]}}]`, `[{"qty": 1, "sku": "a"}]`,
	`[{"sku":"a","qty":1},{"sku":"b","qty":2},{"sku":"c","qty":3},{"sku":"d","qty":4}]`,
}

// documents are checked against every schema: scalars, syntax that
// encoding/json refuses, and what the walk leaves to the library.
var documents = []string{
	`null`, `true`, `false`, `0`, `-0`, `1.5`, `"s"`, `[]`, `{}`, ` {} `, "\t\n\r{}\n",
	`{"a": 1}`, `{"a": {"b": [1, {"c": "d"}]}}`, `[1, "a", null, [true]]`,
	``, ` `, `{`, `}`, `[`, `[1,]`, `[,1]`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":}`, `{a: 1}`, `{"a":1 "b":2}`, `[1 2]`,
	`01`, `-`, `-01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `0x10`, `NaN`, `Infinity`, `-Infinity`,
	`tru`, `nul`, `falsey`, `truefalse`, `nulll`, `"abc`, `"\q"`, `"\u12"`, `"\u12g4"`, "\"\x01\"", "\"\x7f\"",
	"\"\xff\"", "\"\xc3\"", "\xef\xbb\xbf{}", `{} {}`, `{}x`, `1 2`, `{"a":1}{}`, `[1]]`, `{}}`,
	`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud83d\ude00"`, `{"\ud800": 1}`, `{"a\ud800": "\ud800"}`,
	`1e10001`, `1e-10001`, `1e000000000000000000001`, `0.` + strings.Repeat("0", 1000) + `1`,
	strings.Repeat("[", 999) + strings.Repeat("]", 999),
	strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
	strings.Repeat(`{"a":`, 1001) + `1` + strings.Repeat("}", 1001),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

// fastCases are the documents of the differential tests for s.
func fastCases(t testing.TB, s fastSchema) []string {
	out := append(slices.Clone(s.examples), s.data...)
	out = append(out, documents...)
	for _, ex := range s.examples {
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ex), &members); err != nil {
			t.Fatalf("example %s: %v", ex, err)
		}
		for name, value := range members {
			for _, m := range mutations {
				out = append(out, withMember(members, name, m))
			}
			out = append(out, withMember(members, name, ""))
			same := withMember(members, name, string(value))
			out = append(out, same[:len(same)-1]+`, "`+name+`": `+string(value)+"}")
			out = append(out, strings.Replace(ex, `"`+name+`"`, `"`+name+`": null, "`+name+`"`, 1))
			out = append(out, strings.Replace(ex, `"`+name+`"`, `"`+strings.ReplaceAll(name, "_", `\u005f`)+`"`, 1))
		}
		out = append(out, ex[:len(ex)-1]+`, "zz": 1}`)
	}
	return out
}

// withMember is members, with the member name set to value, or removed
// if value is "".
func withMember(members map[string]json.RawMessage, name, value string) string {
	var b strings.Builder
	b.WriteString("{")
	for _, k := range slices.Sorted(maps.Keys(members)) {
		v := string(members[k])
		if k == name {
			if v = value; v == "" {
				continue
			}
		}
		if b.Len() > 1 {
			b.WriteString(",")
		}
		b.WriteString(`"` + k + `":` + v)
	}
	b.WriteString("}")
	return b.String()
}

// declined says the walk may leave valid data to the library for a
// reason of the data: bytes or escapes that encoding/json alters,
// numbers or nesting past the walk's bounds, repeated names.
func declined(data []byte) bool {
	return !utf8.Valid(data) || surrogate.Match(data) || hugeNumber.Match(data) ||
		jsondepth.Of(data) > maxDataDepth || repeatsNames(data)
}

var (
	surrogate  = regexp.MustCompile(`\\u[dD][89a-fA-F]`)
	hugeNumber = regexp.MustCompile(`[eE][-+]?0*[1-9][0-9]{4}|[0-9]{500}`)
)

// repeatsNames reports whether an object of data has a name twice, as
// encoding/json reads names.
func repeatsNames(data []byte) bool {
	type scope struct {
		names map[string]bool // nil in an array
		name  bool            // the next token is a name
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var open []*scope
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *scope
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		switch {
		case tok == json.Delim('}') || tok == json.Delim(']'):
			if open = open[:len(open)-1]; len(open) > 0 {
				top = open[len(open)-1]
				top.name = top.names != nil
			}
		case top != nil && top.name:
			name := tok.(string)
			if top.names[name] {
				return true
			}
			top.names[name], top.name = true, false
		case tok == json.Delim('{'):
			open = append(open, &scope{names: map[string]bool{}, name: true})
		case tok == json.Delim('['):
			open = append(open, &scope{})
		case top != nil:
			top.name = top.names != nil
		}
	}
}

// agree checks the walk against the library on one document: the walk
// must never find valid what the library refuses, and must find valid
// what it accepts unless the data or the schema gives it a reason not to.
func agree(t *testing.T, s fastSchema, typ *Type, data []byte) {
	t.Helper()
	lib := typ.check(data) == nil
	fast := typ.fast.valid(data)
	if fast && !lib {
		t.Fatalf("%s: the fast path finds %q valid, the library does not: %v", s.name, data, typ.check(data))
	}
	if lib && !fast && !s.partial && !declined(data) {
		t.Errorf("%s: the fast path leaves %q to the library, which finds it valid", s.name, data)
	}
}

func TestFastPathAgrees(t *testing.T) {
	for _, s := range fastSchemas(t) {
		t.Run(s.name, func(t *testing.T) {
			typ := typeOf(t, s.schema, s.examples...)
			if typ.fast == nil {
				t.Fatal("no fast path")
			}
			for _, data := range fastCases(t, s) {
				agree(t, s, typ, []byte(data))
			}
		})
	}
}

func FuzzFastPathAgrees(f *testing.F) {
	schemas := fastSchemas(f)
	types := make([]*Type, len(schemas))
	for i, s := range schemas {
		types[i] = typeOf(f, s.schema, s.examples...)
		for _, data := range append(slices.Clone(s.examples), s.data...) {
			f.Add(uint8(i), []byte(data))
		}
	}
	for _, data := range append(slices.Clone(mutations), documents...) {
		f.Add(uint8(0), []byte(data))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		if len(data) > 1<<16 {
			t.Skip("bounded: a large document checks nothing more")
		}
		i := int(which) % len(schemas)
		agree(t, schemas[i], types[i], data)
	})
}

// The benchmark measures the fast path; keywords it does not implement
// leave a schema to the library.
func TestFastPathCovers(t *testing.T) {
	invoice, err := os.ReadFile("testdata/invoice.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if typeOf(t, string(invoice)).fast == nil {
		t.Fatal("the invoice schema has no fast path")
	}
	for _, schema := range []string{
		`{"anyOf": [{"type": "string"}, {"type": "integer"}]}`,
		`{"allOf": [{"type": "string"}]}`,
		`{"oneOf": [{"type": "string"}]}`,
		`{"not": {"type": "string"}}`,
		`{"if": {"type": "string"}, "then": {"minLength": 1}}`,
		`{"properties": {"a": {"anyOf": [{"type": "string"}]}}}`,
		`{"items": {"$ref": "#/$defs/a"}, "$defs": {"a": {"not": true}}}`,
		`{"patternProperties": {"^a": {"type": "string"}}}`,
		`{"propertyNames": {"maxLength": 3}}`,
		`{"dependentRequired": {"a": ["b"]}}`,
		`{"dependentSchemas": {"a": {"required": ["b"]}}}`,
		`{"unevaluatedProperties": false}`,
		`{"unevaluatedItems": false}`,
		`{"contains": {"type": "string"}}`,
		`{"uniqueItems": true}`,
		`{"$dynamicAnchor": "a", "$dynamicRef": "#a"}`,
		`{"multipleOf": 0.123456789012345678}`,
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}`,
		`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`,
	} {
		if typeOf(t, schema).fast != nil {
			t.Errorf("%s has a fast path", schema)
		}
	}
}

func TestSpecialsFindsTheFirstByteNotPlain(t *testing.T) {
	for c := range 256 {
		for at := range 8 {
			word := []byte("abcdefgh")
			word[at] = byte(c)
			for after := at + 1; after < 8; after++ {
				word[after] = []byte{'"', '\\', 0, 0x80, 'z'}[after%5]
			}
			want := 8
			if i := slices.IndexFunc(word, func(b byte) bool { return !plain[b] }); i >= 0 {
				want = i
			}
			got := 8
			if m := specials(binary.LittleEndian.Uint64(word)); m != 0 {
				got = bits.TrailingZeros64(m) / 8
			}
			if got != want {
				t.Fatalf("specials(%q) finds byte %d, want %d", word, got, want)
			}
		}
	}
}
