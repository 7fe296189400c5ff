package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// file writes content to a file of the test's and returns its path.
func file(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestEventTypes: put creates a type (version 1) and updates it (one
// version more each time, the fields not given kept); list, get and export
// show it; delete leaves a tombstone.
func TestEventTypes(t *testing.T) {
	h := newHarness(t, true)
	schema := `{"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "total": {"type": "integer"}}}`
	schemaFile := file(t, "invoice.schema.json", schema)
	example := file(t, "paid.json", `{"id": "in_1", "total": 12}`)

	var put []topics.EventType
	h.json(&put, "event-types", "put", "invoice.paid", "--schema", schemaFile, "--example", example, "--description", "An invoice was paid.")
	if len(put) != 1 || put[0].Name != "invoice.paid" || put[0].Version != 1 || put[0].Mode() != topics.ValidationWarn ||
		put[0].Description != "An invoice was paid." || len(put[0].Examples) != 1 || put[0].UpdatedAt.IsZero() {
		t.Fatalf("put printed %+v", put)
	}
	if !sameJSON(t, put[0].Schema, []byte(schema)) || !sameJSON(t, put[0].Examples[0], []byte(`{"id": "in_1", "total": 12}`)) {
		t.Fatalf("put stored schema %s and examples %s", put[0].Schema, put[0].Examples)
	}
	h.json(&put, "event-types", "put", "invoice.paid", "--validation", "enforce", "--deprecated")
	if put[0].Version != 2 || put[0].Validation != topics.ValidationEnforce || !put[0].Deprecated ||
		!sameJSON(t, put[0].Schema, []byte(schema)) || len(put[0].Examples) != 1 || put[0].Description != "An invoice was paid." {
		t.Fatalf("an update of validation and deprecated printed %+v", put[0])
	}
	h.ok("event-types", "put", "order.created")

	var list []topics.EventType
	h.json(&list, "event-types", "list")
	if len(list) != 2 || list[0].Name != "invoice.paid" || list[0].Version != 2 || list[1].Name != "order.created" || list[1].Schema != nil {
		t.Fatalf("list %+v", list)
	}
	out := h.ok("event-types", "list")
	for _, want := range []string{"NAME", "invoice.paid", "enforce", "order.created", "warn", "none"} {
		if !strings.Contains(out, want) {
			t.Errorf("list as text lacks %q:\n%s", want, out)
		}
	}
	var got topics.EventType
	h.json(&got, "event-types", "get", "invoice.paid")
	if got.Version != 2 || !sameJSON(t, got.Schema, []byte(schema)) {
		t.Fatalf("get %+v", got)
	}
	out = h.ok("event-types", "get", "invoice.paid")
	for _, want := range []string{"description:  An invoice was paid.", "validation:   enforce", "deprecated:   true", "version:      2",
		"\nschema:\n{\n  \"type\": \"object\"", "\nexample 1:\n{\n  \"id\": \"in_1\""} {
		if !strings.Contains(out, want) {
			t.Errorf("get as text lacks %q:\n%s", want, out)
		}
	}
	if out := h.ok("event-types", "get", "order.created"); !strings.Contains(out, "schema:       none") {
		t.Errorf("get of a type without a schema:\n%s", out)
	}

	var doc struct {
		AsyncAPI string `json:"asyncapi"`
		Info     struct {
			Title, Version string
		}
		Components struct {
			Messages map[string]struct {
				Deprecated bool `json:"deprecated"`
			}
		}
	}
	if err := json.Unmarshal([]byte(h.ok("event-types", "export")), &doc); err != nil {
		t.Fatalf("export: %v", err)
	}
	if doc.AsyncAPI != "3.0.0" || doc.Info.Title != "hookpipe events" || doc.Info.Version != "dev" || len(doc.Components.Messages) != 2 ||
		!doc.Components.Messages["invoice.paid"].Deprecated {
		t.Fatalf("export: %+v", doc)
	}

	if out := h.ok("event-types", "delete", "order.created"); out != "deleted event type order.created\n" {
		t.Fatalf("delete printed %q", out)
	}
	recs := h.records(h.names.EventTypes())
	if last := recs[len(recs)-1]; string(last.Key) != "order.created" || last.Value != nil {
		t.Fatalf("the last record is %s=%s, want a tombstone of order.created", last.Key, last.Value)
	}
	h.json(&list, "event-types", "list")
	if len(list) != 1 || list[0].Name != "invoice.paid" {
		t.Fatalf("list after delete: %+v", list)
	}
	if msg := h.fails(1, "event-types", "delete", "order.created"); !strings.Contains(msg, "event type order.created not found") {
		t.Fatalf("deleting it again: %q", msg)
	}
	if msg := h.fails(1, "event-types", "get", "order.created"); !strings.Contains(msg, "event type order.created not found") {
		t.Fatalf("get of a deleted type: %q", msg)
	}
	h.json(&put, "event-types", "put", "order.created")
	if put[0].Version != 1 {
		t.Fatalf("a type put again after its delete is version %d, want 1", put[0].Version)
	}
}

// TestEventTypesRefuseBreakingChanges: a schema that may refuse events the
// current version accepts is refused with every reason and the way out;
// --force writes it, with a warning.
func TestEventTypesRefuseBreakingChanges(t *testing.T) {
	h := newHarness(t, true)
	h.ok("event-types", "put", "invoice.paid", "--schema", file(t, "v1.json",
		`{"type": "object", "properties": {"id": {"type": "string"}, "total": {"type": "number"}}}`))
	breaking := file(t, "v2.json", `{"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "total": {"type": "integer"}}}`)
	msg := h.fails(2, "event-types", "put", "invoice.paid", "--schema", breaking)
	for _, want := range []string{"event type invoice.paid: the change may refuse events version 1 accepts",
		`property "id" is now required`, "/properties/total: type [integer] accepts less than [number]",
		"give --force to write it anyway, or put the new schema under a new type name"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	var got topics.EventType
	h.json(&got, "event-types", "get", "invoice.paid")
	if got.Version != 1 {
		t.Fatalf("after the refusal the type is version %d, want 1", got.Version)
	}

	// Loosening needs no force; its example is one the breaking schema
	// refuses.
	h.ok("event-types", "put", "invoice.paid", "--schema", file(t, "v2.json", `{"type": ["object", "null"], "properties": {"id": {"type": "string"}}}`),
		"--example", file(t, "ex.json", `{"total": 1.5}`))
	r := h.run("event-types", "put", "invoice.paid", "--schema", breaking, "--example", file(t, "ex.json", `{"id": "in_1", "total": 2}`),
		"--force", "-o", "json")
	var put []topics.EventType
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &put) != nil || len(put) != 1 || put[0].Version != 3 {
		t.Fatalf("--force: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"webhookctl: warning: --force: version 3 of invoice.paid may refuse events version 2 accepts",
		`property "id" is now required`, "example 0 of version 2 is refused"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--force warned %q, not %q", r.stderr, want)
		}
	}
}

// TestEventTypesBadInput: what put refuses names the flag, the file or
// the field, and exits 2; nothing is written.
func TestEventTypesBadInput(t *testing.T) {
	h := newHarness(t, true)
	schema := file(t, "s.json", `{"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}`)
	good := file(t, "good.json", `{"id": "in_1"}`)
	bad := file(t, "bad.json", `{"id": 7}`)
	h.ok("event-types", "put", "invoice.paid", "--schema", schema, "--example", good)
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"bad name", []string{"put", "invoice..paid"}, "invalid event type: name:"},
		{"reserved name", []string{"put", "asyncapi.json"}, "is reserved"},
		{"bad validation", []string{"put", "x", "--validation", "strict"}, `--validation "strict": want off, warn or enforce`},
		{"missing schema file", []string{"put", "x", "--schema", filepath.Join(t.TempDir(), "nope.json")}, "--schema: open "},
		{"schema not JSON", []string{"put", "x", "--schema", file(t, "n.json", `{"type": `)}, "n.json: not JSON"},
		{"empty schema file", []string{"put", "x", "--schema", file(t, "e.json", " \n")}, "e.json: the file is empty"},
		{"schema not a schema", []string{"put", "x", "--schema", file(t, "str.json", `"object"`)}, "str.json: invalid event type: schema: a JSON Schema is an object or a boolean"},
		{"schema does not compile", []string{"put", "x", "--schema", file(t, "ref.json", `{"$ref": "https://example.com/s.json"}`)}, "ref.json: invalid event type: schema:"},
		{"example not JSON", []string{"put", "x", "--example", file(t, "x.json", `{`)}, "--example "},
		{"example refused", []string{"put", "x", "--schema", schema, "--example", good, "--example", bad}, "--example " + bad + ": the schema refuses it at /id: type:"},
		{"current examples refused", []string{"put", "invoice.paid", "--schema", file(t, "int.json", `{"properties": {"id": {"type": "integer"}}}`)},
			"(the examples of version 1, which --example replaces)"},
		{"long description", []string{"put", "x", "--description", strings.Repeat("a", topics.MaxEventTypeDescription+1)}, "--description: invalid event type: description:"},
		{"nothing to change", []string{"put", "invoice.paid"}, "event type invoice.paid exists: give what to change (--schema, --example, --description, --validation, --deprecated)"},
		{"missing name", []string{"get"}, "event-types get: want NAME, got 0 arguments"},
		{"extra argument", []string{"export", "x"}, `event-types export: unexpected argument "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(append([]string{"event-types"}, tc.args...)...)
			checkFailure(t, r, 2)
			if !strings.Contains(r.stderr, tc.says) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.says)
			}
		})
	}
	var list []topics.EventType
	h.json(&list, "event-types", "list")
	if len(list) != 1 || list[0].Version != 1 {
		t.Fatalf("after the refusals: %+v", list)
	}
}
