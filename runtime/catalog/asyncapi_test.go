package catalog

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// envAsyncAPIValidator names the directory where `make asyncapi-validator`
// installed the official AsyncAPI parser and validate.mjs
// (testdata/asyncapi), which TestAsyncAPIValidates runs with node.
const envAsyncAPIValidator = "WEBHOOKS_TEST_ASYNCAPI_VALIDATOR"

// sampleCatalog is a catalog of every kind of type the document renders:
// with and without a schema, deprecated, with examples, a schema of nested
// $defs referring to each other and to itself, anchors, a resource with an
// $id of its own, a $ref with constraining siblings, 2020-12 keywords, and
// boolean schemas.
func sampleCatalog(t testing.TB) []*Type {
	t.Helper()
	var out []*Type
	for _, et := range []topics.EventType{
		{Name: "invoice.paid", Description: "An invoice was paid in full.\nSent once per invoice.",
			Schema: json.RawMessage(`{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type": "object", "required": ["id", "amount", "lines"], "additionalProperties": false,
				"properties": {
					"id": {"type": "string", "pattern": "^in_"},
					"amount": {"$ref": "#/$defs/money"},
					"lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
					"paid_at": {"type": "string", "format": "date-time"}
				},
				"$defs": {
					"money": {"type": "object", "required": ["value", "currency"],
						"properties": {"value": {"type": "integer", "minimum": 0}, "currency": {"$ref": "#/$defs/currency"}}},
					"currency": {"enum": ["EUR", "USD"]},
					"line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}, "price": {"$ref": "#/$defs/money"}}}
				}}`),
			Examples: []json.RawMessage{
				json.RawMessage(`{"id": "in_1", "amount": {"value": 1200, "currency": "EUR"}, "lines": [{"sku": "a", "price": {"value": 1200, "currency": "EUR"}}]}`),
				json.RawMessage(`{"id": "in_2", "amount": {"value": 0, "currency": "USD"}, "lines": [], "paid_at": "2026-01-01T10:00:00Z"}`),
			}},
		{Name: "invoice.voided", Description: "An invoice was voided.", Deprecated: true,
			Examples: []json.RawMessage{json.RawMessage(`["anything", 1]`)}},
		{Name: "customer.tree", Description: "A customer's organisation chart.",
			Schema: json.RawMessage(`{
				"$ref": "#node",
				"$defs": {
					"node": {"$anchor": "node", "type": "object", "required": ["name"],
						"properties": {"name": {"$ref": "names.json"}, "reports": {"type": "array", "items": {"$ref": "#"}}}},
					"names": {"$id": "names.json", "type": "string", "minLength": 1, "$defs": {"short": {"maxLength": 8}}},
					"short name": {"$ref": "names.json#/$defs/short"}
				}}`),
			Examples: []json.RawMessage{json.RawMessage(`{"name": "ada", "reports": [{"name": "bob", "reports": []}]}`)}},
		{Name: "order.created", Schema: json.RawMessage(`{
				"type": "object",
				"properties": {"tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
					"ref with siblings": {"$ref": "#/$defs/positive", "maximum": 10, "description": "1 to 10"},
					"weird/key~": {"type": "boolean"}, "to weird": {"$ref": "#/properties/weird~1key~0"}},
				"$defs": {"positive": {"type": "integer", "minimum": 1}}}`),
			Examples: []json.RawMessage{json.RawMessage(`{"tuple": ["a", 1], "ref with siblings": 3, "weird/key~": true, "to weird": false}`)}},
		{Name: "ping", Schema: json.RawMessage(`true`), Examples: []json.RawMessage{json.RawMessage(`{}`)}},
		{Name: "never", Schema: json.RawMessage(`false`)},
	} {
		et.Version = 1
		typ, err := Compile(et)
		if err != nil {
			t.Fatalf("Compile(%s): %v", et.Name, err)
		}
		out = append(out, typ)
	}
	return out
}

func renderSample(t *testing.T) (raw []byte, doc map[string]any) {
	t.Helper()
	raw, err := AsyncAPI(sampleCatalog(t), "hookpipe events", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return raw, doc
}

// find returns the value at a path of keys (and indexes) in a decoded
// document; false when there is none.
func find(v any, path ...any) (any, bool) {
	for _, p := range path {
		var ok bool
		switch k := p.(type) {
		case string:
			var m map[string]any
			if m, ok = v.(map[string]any); ok {
				v, ok = m[k]
			}
		case int:
			var l []any
			if l, ok = v.([]any); ok && k < len(l) {
				v = l[k]
			}
		}
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// at is find, failing the test when there is nothing at path.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	v, ok := find(v, path...)
	if !ok {
		t.Fatalf("nothing at %v", path)
	}
	return v
}

func TestAsyncAPIDocument(t *testing.T) {
	_, doc := renderSample(t)
	for _, tc := range []struct {
		path []any
		want any
	}{
		{[]any{"asyncapi"}, "3.0.0"},
		{[]any{"info", "title"}, "hookpipe events"},
		{[]any{"info", "version"}, "v1.2.3"},
		{[]any{"defaultContentType"}, "application/json"},
		{[]any{"channels", "endpoint", "address"}, nil},
		{[]any{"operations", "receiveEvent", "action"}, "receive"},
		{[]any{"operations", "receiveEvent", "channel", "$ref"}, "#/channels/endpoint"},
		{[]any{"operations", "receiveEvent", "bindings", "http", "method"}, "POST"},
		{[]any{"channels", "endpoint", "messages", "invoice.paid", "$ref"}, "#/components/messages/invoice.paid"},
		{[]any{"components", "messages", "invoice.paid", "name"}, "invoice.paid"},
		{[]any{"components", "messages", "invoice.paid", "summary"}, "An invoice was paid in full."},
		{[]any{"components", "messages", "invoice.paid", "description"}, "An invoice was paid in full.\nSent once per invoice."},
		{[]any{"components", "messages", "invoice.paid", "traits", 0, "$ref"}, "#/components/messageTraits/standard-webhooks"},
		{[]any{"components", "messages", "invoice.paid", "payload", "required"}, []any{"id", "type", "timestamp", "data"}},
		{[]any{"components", "messages", "invoice.paid", "payload", "properties", "type", "const"}, "invoice.paid"},
		{[]any{"components", "messages", "invoice.paid", "payload", "properties", "data", "$ref"}, "#/components/schemas/invoice.paid"},
		{[]any{"components", "messages", "invoice.voided", "deprecated"}, true},
		{[]any{"components", "messages", "invoice.voided", "summary"}, "Deprecated. An invoice was voided."},
		{[]any{"components", "messages", "invoice.voided", "description"}, "An invoice was voided.\n\nThis event type is deprecated."},
		{[]any{"components", "messages", "invoice.voided", "payload", "properties", "data", "description"}, "Any JSON value: the type has no schema."},
		{[]any{"components", "messageTraits", "standard-webhooks", "headers", "required"}, []any{"webhook-id", "webhook-timestamp", "webhook-signature"}},
		{[]any{"components", "messages", "invoice.paid", "examples", 1, "payload"}, map[string]any{
			"id": "evt_example_2", "type": "invoice.paid", "timestamp": exampleTimestamp,
			"data": map[string]any{"id": "in_2", "amount": map[string]any{"value": 0.0, "currency": "USD"}, "lines": []any{}, "paid_at": "2026-01-01T10:00:00Z"}}},
		{[]any{"components", "messages", "invoice.paid", "examples", 1, "headers"}, map[string]any{
			"webhook-id": "evt_example_2", "webhook-timestamp": exampleUnixTimestamp, "webhook-signature": exampleSignature}},
		{[]any{"components", "schemas", "ping"}, map[string]any{}},
		{[]any{"components", "schemas", "never"}, map[string]any{"not": map[string]any{}}},
	} {
		if got := at(t, doc, tc.path...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v = %#v, want %#v", tc.path, got, tc.want)
		}
	}
	var ops []string
	for _, m := range at(t, doc, "operations", "receiveEvent", "messages").([]any) {
		ops = append(ops, m.(map[string]any)["$ref"].(string))
	}
	want := []string{"customer.tree", "invoice.paid", "invoice.voided", "never", "order.created", "ping"}
	for i := range want {
		want[i] = "#/channels/endpoint/messages/" + want[i]
	}
	if !reflect.DeepEqual(ops, want) {
		t.Errorf("the operation's messages are %q, want %q (sorted by name)", ops, want)
	}
	if _, ok := at(t, doc, "components", "messages", "never").(map[string]any)["examples"]; ok {
		t.Error("a type without examples has some in its message")
	}
	if _, ok := at(t, doc, "components", "schemas").(map[string]any)["invoice.voided"]; ok {
		t.Error("a type without a schema has one in components/schemas")
	}
}

// The schemas are placed in the document with their references pointing
// where they did: pointers, anchors, a resource's $id, the root, escaped
// tokens; a $ref with constraining siblings moves into allOf.
func TestAsyncAPIRelocatesReferences(t *testing.T) {
	_, doc := renderSample(t)
	for _, tc := range []struct {
		path []any
		want any
	}{
		{[]any{"invoice.paid", "properties", "amount", "$ref"}, "#/components/schemas/invoice.paid/$defs/money"},
		{[]any{"invoice.paid", "$defs", "line", "properties", "price", "$ref"}, "#/components/schemas/invoice.paid/$defs/money"},
		{[]any{"customer.tree", "allOf"}, nil}, // nil: absent ($defs beside $ref do not constrain)
		{[]any{"customer.tree", "$ref"}, "#/components/schemas/customer.tree/$defs/node"},
		{[]any{"customer.tree", "$defs", "node", "properties", "reports", "items", "$ref"}, "#/components/schemas/customer.tree"},
		{[]any{"customer.tree", "$defs", "node", "properties", "name", "$ref"}, "#/components/schemas/customer.tree/$defs/names"},
		{[]any{"customer.tree", "$defs", "short name", "$ref"}, "#/components/schemas/customer.tree/$defs/names/$defs/short"},
		{[]any{"customer.tree", "$defs", "node", "$anchor"}, nil},
		{[]any{"customer.tree", "$defs", "names", "$id"}, nil},
		{[]any{"invoice.paid", "$schema"}, nil},
		{[]any{"order.created", "properties", "to weird", "$ref"}, "#/components/schemas/order.created/properties/weird~1key~0"},
		{[]any{"order.created", "properties", "ref with siblings", "$ref"}, nil},
		{[]any{"order.created", "properties", "ref with siblings", "allOf"}, []any{map[string]any{"$ref": "#/components/schemas/order.created/$defs/positive"}}},
		{[]any{"order.created", "properties", "ref with siblings", "maximum"}, 10.0},
		{[]any{"order.created", "properties", "tuple", "prefixItems", 1}, map[string]any{"type": "integer"}},
	} {
		got, _ := find(at(t, doc, "components", "schemas"), tc.path...)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v = %#v, want %#v", tc.path, got, tc.want)
		}
	}
}

// Every example, as the body and headers the deliverer sends, matches the
// message's payload and headers as the document states them (compiled
// from the document, with its relocated references, as JSON Schema
// 2020-12), and bodies the type refuses do not: the official parser does
// not check examples of AsyncAPI 3 documents.
func TestAsyncAPIExamplesMatch(t *testing.T) {
	raw, doc := renderSample(t)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const url = "https://hookpipe.invalid/asyncapi.json"
	if err := c.AddResource(url, v); err != nil {
		t.Fatal(err)
	}
	headers, err := c.Compile(url + "#/components/messageTraits/standard-webhooks/headers")
	if err != nil {
		t.Fatal(err)
	}
	check := func(s *jsonschema.Schema, value string) error {
		t.Helper()
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
		if err != nil {
			t.Fatal(err)
		}
		return s.Validate(inst)
	}
	examples := 0
	for name, m := range at(t, doc, "components", "messages").(map[string]any) {
		payload, err := c.Compile(url + "#/components/messages/" + name + "/payload")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		exs, _ := m.(map[string]any)["examples"].([]any)
		for i, ex := range exs {
			for part, s := range map[string]*jsonschema.Schema{"payload": payload, "headers": headers} {
				b, _ := json.Marshal(at(t, ex, part))
				if err := check(s, string(b)); err != nil {
					t.Errorf("%s example %d: its %s does not match: %v", name, i, part, err)
				}
			}
			examples++
		}
		if err := check(payload, `{"id": "evt_1", "type": "other.type", "timestamp": "2026-01-01T00:00:00Z", "data": {}}`); err == nil {
			t.Errorf("%s: a body of another type matches", name)
		}
	}
	if examples != 6 {
		t.Fatalf("checked %d examples, want 6", examples)
	}
	for name, data := range map[string]string{
		"invoice.paid":  `{"id": "in_1", "amount": {"value": 1, "currency": "GBP"}, "lines": []}`,
		"customer.tree": `{"name": "ada", "reports": [{"name": ""}]}`,
		"order.created": `{"ref with siblings": 11}`,
		"never":         `{}`,
	} {
		payload, err := c.Compile(url + "#/components/messages/" + name + "/payload")
		if err != nil {
			t.Fatal(err)
		}
		body := `{"id": "evt_1", "type": "` + name + `", "timestamp": "2026-01-01T00:00:00Z", "data": ` + data + `}`
		if err := check(payload, body); err == nil {
			t.Errorf("%s: the payload accepts %s, which the type refuses", name, data)
		}
	}
	if err := check(headers, `{"webhook-id": "evt_1", "webhook-timestamp": "1767225600", "webhook-signature": "v1,abc= v1,def="}`); err != nil {
		t.Errorf("two signatures: %v", err)
	}
	if err := check(headers, `{"webhook-id": "evt 1", "webhook-timestamp": "1767225600", "webhook-signature": "v1,abc="}`); err == nil {
		t.Error("the headers accept an id with a space")
	}
}

// The same catalog renders the same bytes, whatever the order of its
// types.
func TestAsyncAPIDeterministic(t *testing.T) {
	types := sampleCatalog(t)
	first, err := AsyncAPI(types, "t", "1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		reversed := make([]*Type, 0, len(types))
		for j := range types {
			reversed = append(reversed, types[(len(types)-j+i)%len(types)])
		}
		again, err := AsyncAPI(reversed, "t", "1")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("rendering %d differs", i)
		}
	}
}

func TestAsyncAPIRefuses(t *testing.T) {
	types := sampleCatalog(t)
	if _, err := AsyncAPI(append(types, types[0]), "t", "1"); err == nil || !strings.Contains(err.Error(), "invoice.paid: given twice") {
		t.Fatalf("two types of one name: %v", err)
	}
	// Compile refuses what relocate cannot place (a $ref outside the
	// schema, or into a keyword that holds no schema); relocate says so
	// too.
	for _, schema := range []string{
		`{"$ref": "other.json"}`,
		`{"x-private": {"$id": "inner.json", "type": "string"}, "$ref": "inner.json"}`,
		`{"$ref": "#nowhere"}`,
	} {
		if _, err := relocate("odd", []byte(schema)); err == nil || !strings.Contains(err.Error(), "cannot be placed in the AsyncAPI document") {
			t.Errorf("relocate(%s) = %v, want an error", schema, err)
		}
	}
}

// TestAsyncAPIValidates runs the official AsyncAPI parser on the
// documents of the sample catalog and of an empty one: it must report no
// error (warnings and hints are logged).
func TestAsyncAPIValidates(t *testing.T) {
	empty, err := AsyncAPI(nil, "hookpipe events", "dev")
	if err != nil {
		t.Fatal(err)
	}
	sample, _ := renderSample(t)
	for name, doc := range map[string][]byte{"sample": sample, "empty": empty} {
		t.Run(name, func(t *testing.T) { validate(t, doc) })
	}
}

// validate runs the parser on doc (skipping the test when it is not
// installed, unless services are required) and fails the test on an
// error diagnostic.
func validate(t *testing.T, doc []byte) {
	t.Helper()
	dir := os.Getenv(envAsyncAPIValidator)
	if dir == "" {
		testkit.NeedService(t, envAsyncAPIValidator+" is not set (make asyncapi-validator installs the parser; make test sets it)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testkit.NeedService(t, "node is not installed (make deps installs it)")
	}
	cmd := exec.CommandContext(t.Context(), node, filepath.Join(dir, "validate.mjs"))
	cmd.Stdin = bytes.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if len(out) > 0 {
		t.Logf("the parser says:\n%s", out)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
	}
}
