package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

func typeOf(t testing.TB, schema string, examples ...string) *Type {
	t.Helper()
	et := topics.EventType{Name: "invoice.paid", Schema: json.RawMessage(schema), Version: 1}
	for _, ex := range examples {
		et.Examples = append(et.Examples, json.RawMessage(ex))
	}
	typ, err := Compile(et)
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return typ
}

func TestCompileRefusesBadSchemas(t *testing.T) {
	deep := strings.Repeat(`{"items":`, MaxSchemaDepth+1) + `true` + strings.Repeat(`}`, MaxSchemaDepth+1)
	for _, tc := range []struct {
		name, schema, example, field, want string
	}{
		{"not an object", `"string"`, "", "schema", "a JSON Schema is an object or a boolean"},
		{"not JSON", `{"type": }`, "", "schema", "not JSON"},
		{"unknown type name", `{"type": "strin"}`, "", "schema", "strin"},
		{"minimum not a number", `{"minimum": "5"}`, "", "schema", "minimum"},
		{"remote $ref", `{"$ref": "https://example.com/s.json"}`, "", "schema", "only references within the schema"},
		{"file $ref", `{"$ref": "file:///etc/passwd"}`, "", "schema", "only references within the schema"},
		{"dangling $ref", `{"$ref": "#/$defs/nope"}`, "", "schema", "nope"},
		{"invalid pattern", `{"pattern": "(unclosed"}`, "", "schema", "pattern"},
		{"lookahead (not RE2)", `{"pattern": "^(?=a)"}`, "", "schema", "pattern"},
		{"huge pattern", `{"pattern": "` + strings.Repeat("a", MaxPatternBytes+1) + `"}`, "", "schema", "over the limit"},
		{"huge repetition", `{"pattern": "(a{1000}){1000}"}`, "", "schema", "pattern"},
		{"nested too deep", deep, "", "schema", "nested 65 deep"},
		{"example refused", `{"type": "object", "required": ["id"]}`, `{"amount": 1}`, "examples", "example 0 does not match the schema"},
		{"example not JSON", `{"type": "object"}`, `{"amount": `, "examples", "example 0 is not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := topics.EventType{Name: "invoice.paid", Schema: json.RawMessage(tc.schema), Version: 1}
			if tc.example != "" {
				et.Examples = []json.RawMessage{json.RawMessage(tc.example)}
			}
			_, err := Compile(et)
			var ie *topics.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Compile = %v, want an InvalidError", err)
			}
			if ie.Field != tc.field || !strings.Contains(ie.Reason, tc.want) {
				t.Fatalf("Compile = %v, want field %s and %q", err, tc.field, tc.want)
			}
		})
	}
}

func TestCheckNamesPointerAndKeyword(t *testing.T) {
	typ := typeOf(t, `{
		"type": "object",
		"required": ["id", "status"],
		"additionalProperties": false,
		"properties": {
			"id": {"type": "string"},
			"status": {"enum": ["open", "paid"]},
			"email": {"type": "string", "format": "email"},
			"amount": {"type": "integer", "minimum": 0},
			"lines": {"type": "array", "items": {"type": "object", "required": ["sku"],
				"properties": {"sku": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}}
		}
	}`, `{"id": "in_1", "status": "paid"}`)
	for _, tc := range []struct {
		name, data, pointer, keyword string
	}{
		{"valid", `{"id": "in_1", "status": "paid", "lines": [{"sku": "a", "tags": ["x"]}]}`, "", ""},
		{"type", `{"id": 7, "status": "paid"}`, "/id", "type"},
		{"required", `{"id": "in_1"}`, "", "required"},
		{"enum", `{"id": "in_1", "status": "late"}`, "/status", "enum"},
		{"format", `{"id": "in_1", "status": "paid", "email": "not an address"}`, "/email", "format"},
		{"additionalProperties", `{"id": "in_1", "status": "paid", "extra": 1}`, "", "additionalProperties"},
		{"minimum", `{"id": "in_1", "status": "paid", "amount": -1}`, "/amount", "minimum"},
		{"nested arrays", `{"id": "in_1", "status": "paid", "lines": [{"sku": "a"}, {"sku": "b", "tags": ["x", 2]}]}`, "/lines/1/tags/1", "type"},
		{"nested required", `{"id": "in_1", "status": "paid", "lines": [{"tags": []}]}`, "/lines/0", "required"},
		{"not an object", `[1, 2]`, "", "type"},
		{"not JSON", `{"id": `, "", "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := typ.Check([]byte(tc.data))
			if tc.keyword == "" {
				if v != nil {
					t.Fatalf("Check = %v, want valid", v)
				}
				return
			}
			if v == nil || v.Pointer != tc.pointer || v.Keyword != tc.keyword {
				t.Fatalf("Check = %+v, want pointer %q keyword %q", v, tc.pointer, tc.keyword)
			}
			if v.Message == "" || !strings.Contains(v.Error(), tc.keyword) {
				t.Fatalf("Check's error %q says too little", v.Error())
			}
		})
	}
}

// A schema that recurses through $ref is checked as deep as the data
// goes, and a $ref cycle that consumes no data is refused, not looped.
func TestCheckBoundedOnRecursiveSchemas(t *testing.T) {
	tree := typeOf(t, `{"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
		"$ref": "#/$defs/node"}`)
	data := strings.Repeat(`{"children": [`, 500) + `{"children": [1]}` + strings.Repeat(`]}`, 500)
	if v := tree.Check([]byte(data)); v == nil || v.Keyword != "type" || !strings.HasSuffix(v.Pointer, "/children/0") {
		t.Fatalf("Check of a 500 deep tree = %+v, want a type violation at its leaf", v)
	}
	if _, err := Compile(topics.EventType{Name: "loop", Version: 1, Schema: json.RawMessage(`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`)}); err == nil {
		loop := typeOf(t, `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`)
		if v := loop.Check([]byte(`{}`)); v == nil {
			t.Fatal("a $ref cycle validated data")
		}
	}
}

// TestCheckSurvivesTheValidatorsPanic: a number past what the library
// reads, under a numeric bound, panics in it; Check reports a violation
// instead, and the dispatcher goes on.
func TestCheckSurvivesTheValidatorsPanic(t *testing.T) {
	typ := typeOf(t, `{"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}}`)
	if v := typ.Check([]byte(`{"n": 1e9999999}`)); v == nil || v.Keyword != "unjudgeable" {
		t.Fatalf("Check = %v, want an unjudgeable violation", v)
	}
	if v := typ.Check([]byte(`{"n": 1}`)); v != nil {
		t.Fatalf("Check of a plain number = %v", v)
	}
}

func TestNoSchemaAcceptsAnyData(t *testing.T) {
	typ, err := Compile(topics.EventType{Name: "free.form", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if typ.HasSchema() || typ.Check([]byte(`[1, "x"]`)) != nil {
		t.Fatal("a type without a schema refused data")
	}
}

func TestBreaking(t *testing.T) {
	base := `{"type": "object", "required": ["id"], "properties": {
		"id": {"type": "string", "maxLength": 10},
		"status": {"enum": ["open", "paid"]},
		"amount": {"type": "integer", "minimum": 0}}}`
	for _, tc := range []struct {
		name, next string
		want       string // "" means not breaking
	}{
		{"same", base, ""},
		{"description only", `{"description": "x", "type": "object", "required": ["id"], "properties": {
			"id": {"type": "string", "maxLength": 10, "title": "Id"}, "status": {"enum": ["open", "paid"]},
			"amount": {"type": "integer", "minimum": 0}}}`, ""},
		{"loosened", `{"type": ["object", "null"], "properties": {
			"id": {"type": "string", "maxLength": 20}, "status": {"enum": ["open", "paid", "void"]},
			"amount": {"type": "number"}}}`, ""},
		{"schema removed", `true`, ""},
		{"required added", strings.Replace(base, `"required": ["id"]`, `"required": ["id", "status"]`, 1), `property "status" is now required`},
		{"type narrowed", strings.Replace(base, `"type": "integer"`, `"type": "string"`, 1), "/properties/amount: type"},
		{"enum value dropped", strings.Replace(base, `["open", "paid"]`, `["open"]`, 1), `enum drops "paid"`},
		{"bound tightened", strings.Replace(base, `"maxLength": 10`, `"maxLength": 5`, 1), "maxLength lowered to 5"},
		{"minimum raised", strings.Replace(base, `"minimum": 0`, `"minimum": 1`, 1), "minimum raised to 1"},
		{"additionalProperties closed", strings.Replace(base, `"type": "object",`, `"type": "object", "additionalProperties": false,`, 1), "/additionalProperties: now refuses everything"},
		{"new constrained property", strings.Replace(base, `"id": {`, `"note": {"type": "string"}, "id": {`, 1), "/properties/note: type"},
		{"pattern added", strings.Replace(base, `"maxLength": 10`, `"maxLength": 10, "pattern": "^in_"`, 1), "pattern changed"},
		{"format added", strings.Replace(base, `"maxLength": 10`, `"maxLength": 10, "format": "email"`, 1), "format changed"},
		{"everything refused", `false`, "now refuses everything"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Breaking(typeOf(t, base), typeOf(t, tc.next))
			if tc.want == "" {
				if len(got) > 0 {
					t.Fatalf("Breaking = %q, want none", got)
				}
				return
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Fatalf("Breaking = %q, want one saying %q", got, tc.want)
			}
		})
	}
}

// The structural comparison cannot judge every keyword; the old examples
// are checked against the new schema as well.
func TestBreakingChecksOldExamples(t *testing.T) {
	prev := typeOf(t, `{"type": "object", "properties": {"id": {"type": "string"}}}`, `{"id": "in_1"}`)
	next := typeOf(t, `{"type": "object", "properties": {"id": {"$ref": "#/$defs/id"}}, "$defs": {"id": {"type": "integer"}}}`)
	got := strings.Join(Breaking(prev, next), "\n")
	if !strings.Contains(got, "example 0 of version 1 is refused") {
		t.Fatalf("Breaking = %q, want the refused example", got)
	}
}

func TestJudge(t *testing.T) {
	enforced := typeOf(t, `{"type": "object", "required": ["id"]}`)
	enforced.Validation = topics.ValidationEnforce
	warned := typeOf(t, `{"type": "object", "required": ["id"]}`)
	off := typeOf(t, `{"type": "object", "required": ["id"]}`)
	off.Validation = topics.ValidationOff
	for _, tc := range []struct {
		name    string
		typ     *Type
		unknown string
		data    string
		outcome string
		refuse  bool
	}{
		{"enforced valid", enforced, UnknownAccept, `{"id": 1}`, OutcomeValid, false},
		{"enforced invalid", enforced, UnknownAccept, `{}`, OutcomeInvalid, true},
		{"warned invalid", warned, UnknownAccept, `{}`, OutcomeInvalid, false},
		{"off", off, UnknownAccept, `{}`, OutcomeUnchecked, false},
		{"unknown accepted", nil, UnknownAccept, `{}`, OutcomeUnchecked, false},
		{"unknown warned", nil, UnknownWarn, `{}`, OutcomeUnknown, false},
		{"unknown rejected", nil, UnknownReject, `{}`, OutcomeUnknown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(tc.typ, tc.typ != nil, tc.unknown, []byte(tc.data))
			if v.Outcome != tc.outcome || v.Refuse != tc.refuse || (v.Outcome == OutcomeInvalid) != (v.Violation != nil) {
				t.Fatalf("Judge = %+v, want outcome %s refuse %v", v, tc.outcome, tc.refuse)
			}
		})
	}
	var none *Catalog
	if v := none.Judge("x", []byte(`{}`)); v.Outcome != OutcomeUnchecked || v.Refuse {
		t.Fatalf("a nil catalog judged %+v", v)
	}
}

func BenchmarkCheck(b *testing.B) {
	schema, err := os.ReadFile("testdata/invoice.schema.json")
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile("testdata/invoice.json")
	if err != nil {
		b.Fatal(err)
	}
	typ := typeOf(b, string(schema), string(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if v := typ.Check(data); v != nil {
			b.Fatal(v)
		}
	}
}
