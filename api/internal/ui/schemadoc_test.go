package ui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestReadSchema: a schema reads as rows in the order written, nested
// objects and array items below their parent, local $refs followed (a
// recursive one named, not expanded), options of oneOf under their
// parent, and each row's constraints as keyword: value.
func TestReadSchema(t *testing.T) {
	schema := `{
		"type": "object", "required": ["id", "customer"], "additionalProperties": false,
		"properties": {
			"id": {"type": "string", "pattern": "^ord_[a-z0-9]+$", "description": "The order's id."},
			"status": {"enum": ["placed", "paid"], "default": "placed"},
			"total": {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 1e6},
			"customer": {"$ref": "#/$defs/customer", "description": "Who ordered."},
			"lines": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["sku"],
				"properties": {"sku": {"type": "string", "maxLength": 32}, "qty": {"type": "integer", "minimum": 1}}}},
			"payment": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"card": {"type": "string"}}}]},
			"parent": {"$ref": "#"}
		},
		"$defs": {"customer": {"type": "object", "title": "A customer",
			"properties": {"email": {"type": "string", "format": "email"}, "referrer": {"$ref": "#/$defs/customer"}}}}
	}`
	doc, err := readSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range doc.Rows {
		got = append(got, fmt.Sprintf("%d %s%s | %s | %v | %s | %s", r.Depth, r.Parent, r.Name, r.Type, r.Required, r.Description, strings.Join(r.Constraints, "; ")))
	}
	want := []string{
		`0 id | string | true | The order's id. | pattern: ^ord_[a-z0-9]+$`,
		`0 status | enum | false |  | enum: "placed", "paid"; default: "placed"`,
		`0 total | number or null | false |  | minimum: 0; exclusiveMaximum: 1e6`,
		`0 customer | object | true | Who ordered. | `,
		`1 customer.email | string | false |  | format: email`,
		`1 customer.referrer | see #/$defs/customer | false |  | `,
		`0 lines | array of object | false |  | minItems: 1`,
		`1 lines[].sku | string | true |  | maxLength: 32`,
		`1 lines[].qty | integer | false |  | minimum: 1`,
		`0 payment | one of: string | object | false |  | `,
		`1 payment (option 2).card | string | false |  | `,
		`0 parent | see # | false |  | `,
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if doc.RootType != "object" || !slices.Equal(doc.Root, []string{"no other properties"}) {
		t.Errorf("root %s %v", doc.RootType, doc.Root)
	}

	// Data that is not an object is one row; no schema, none.
	doc, _ = readSchema(json.RawMessage(`{"type": "array", "items": {"type": "string", "format": "uuid"}, "uniqueItems": true}`))
	if len(doc.Rows) != 1 || doc.Rows[0].Name != "(the data)" || doc.Rows[0].Type != "array of string" || doc.Rows[0].Constraints[0] != "unique items" {
		t.Errorf("an array schema: %+v", doc.Rows)
	}
	if doc, _ := readSchema(nil); len(doc.Rows) != 0 {
		t.Errorf("no schema: %+v", doc.Rows)
	}

	// A $ref used at many places is bounded.
	var b strings.Builder
	b.WriteString(`{"$defs": {"d0": {"type": "string"}`)
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, `, "d%d": {"type": "object", "properties": {"a": {"$ref": "#/$defs/d%d"}, "b": {"$ref": "#/$defs/d%d"}}}`, i, i-1, i-1)
	}
	b.WriteString(`}, "$ref": "#/$defs/d12"}`)
	doc, err = readSchema(json.RawMessage(b.String()))
	if err != nil || len(doc.Rows) != maxSchemaRows || !doc.Truncated {
		t.Errorf("a schema of 2^13 rows: %d rows, truncated %v (%v)", len(doc.Rows), doc.Truncated, err)
	}
}
