package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The event type page shows a schema as a table a tenant can read: one row
// per property, nested objects and array items below their parent, each
// with its type, whether it is required, its description and its
// constraints. It is read from the schema as written (properties in their
// order), local $refs followed; the compiled schema (runtime/catalog)
// stays the judge of the data.

// maxSchemaRows bounds the table: $refs reused at many places could
// otherwise multiply the rows.
const maxSchemaRows = 500

// schemaField is one row of a schema's table.
type schemaField struct {
	// Parent is the path above the property ("customer.address."),
	// shown before its name.
	Parent      string
	Name        string
	Depth       int
	Type        string
	Required    bool
	Description string
	Constraints []string
}

// schemaDoc is a schema as the event type page shows it.
type schemaDoc struct {
	Rows []schemaField
	// RootType and Root are the type and constraints of the data itself
	// ("object", "no other properties") when its properties are the rows.
	RootType string
	Root     []string
	// Truncated: more than maxSchemaRows rows.
	Truncated bool
}

// schemaObject is a JSON object with its keys in their order.
type schemaObject struct {
	keys []string
	vals map[string]any
}

func (o *schemaObject) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *schemaObject) str(k string) string {
	v, _ := o.get(k)
	s, _ := v.(string)
	return s
}

// MarshalJSON renders the object with its keys in order.
func (o *schemaObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered decodes one JSON value: objects as *schemaObject, arrays as
// []any, numbers as json.Number.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := &schemaObject{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err = dec.Token()
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err = dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// readSchema reads a schema (as the catalog holds it: compiled, so
// valid and bounded in depth) into its table; an empty schema has no rows.
func readSchema(raw json.RawMessage) (schemaDoc, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return schemaDoc{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	root, err := decodeOrdered(dec)
	if err != nil {
		return schemaDoc{}, err
	}
	// The root is open from the start: a "#" inside it is recursive.
	w := &schemaWalker{root: root, open: map[string]bool{"#": true}}
	o, _, leave := w.enter(root)
	defer leave()
	if props, _ := w.properties(o); len(props) > 0 {
		w.doc.RootType, w.doc.Root = w.typeOf(root, 0), constraints(o)
		w.children(o, "", 0)
	} else {
		w.field(schemaField{Name: "(the data)"}, root)
	}
	return w.doc, nil
}

type schemaWalker struct {
	root any
	doc  schemaDoc
	// open are the $refs being expanded: a schema that refers to itself
	// is named, not expanded again.
	open map[string]bool
}

// enter resolves a schema's local $ref: the schema it stands for (nil for
// true, false and what cannot be resolved), the ref when it is not
// expanded (recursive or not local), and leave, to call when done with
// its children.
func (w *schemaWalker) enter(s any) (*schemaObject, string, func()) {
	o, _ := s.(*schemaObject)
	ref := o.str("$ref")
	if ref == "" {
		return o, "", func() {}
	}
	target, ok := w.pointer(ref)
	if !ok || w.open[ref] {
		return nil, ref, func() {}
	}
	w.open[ref] = true
	to, _ := target.(*schemaObject)
	return to, "", func() { delete(w.open, ref) }
}

// pointer follows a local $ref ("#", "#/$defs/address") from the root.
func (w *schemaWalker) pointer(ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := w.root
	if p == "" {
		return cur, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		o, ok := cur.(*schemaObject)
		if !ok {
			return nil, false
		}
		if cur, ok = o.vals[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

type schemaProperty struct {
	name   string
	schema any
}

// properties are an object schema's properties and required names, those
// of its allOf members included.
func (w *schemaWalker) properties(o *schemaObject) ([]schemaProperty, map[string]bool) {
	var props []schemaProperty
	required := map[string]bool{}
	var collect func(o *schemaObject, depth int)
	collect = func(o *schemaObject, depth int) {
		if o == nil || depth > 8 {
			return
		}
		if p, ok := o.get("properties"); ok {
			if po, ok := p.(*schemaObject); ok {
				for _, k := range po.keys {
					props = append(props, schemaProperty{k, po.vals[k]})
				}
			}
		}
		if r, ok := o.get("required"); ok {
			for _, n := range strs(r) {
				required[n] = true
			}
		}
		if all, ok := o.get("allOf"); ok {
			l, _ := all.([]any)
			for _, m := range l {
				mo, _, leave := w.enter(m)
				collect(mo, depth+1)
				leave()
			}
		}
	}
	collect(o, 0)
	return props, required
}

// field adds the row of a property (or of the data itself) and the rows
// below it.
func (w *schemaWalker) field(f schemaField, s any) {
	if len(w.doc.Rows) >= maxSchemaRows {
		w.doc.Truncated = true
		return
	}
	own, _ := s.(*schemaObject)
	o, ref, leave := w.enter(s)
	defer leave()
	f.Type = w.typeOf(s, 0)
	if ref != "" {
		f.Type = "see " + ref
	}
	f.Constraints = constraints(o)
	for _, x := range []*schemaObject{own, o} {
		if f.Description == "" {
			f.Description = x.str("description")
		}
		if f.Description == "" {
			f.Description = x.str("title")
		}
	}
	w.doc.Rows = append(w.doc.Rows, f)
	w.children(o, f.Parent+f.Name, f.Depth+1)
}

// children adds the rows below a schema at path: its properties, its
// items' properties (path[]) and its options' (path (option n)).
func (w *schemaWalker) children(o *schemaObject, path string, depth int) {
	if o == nil {
		return
	}
	parent := ""
	if path != "" {
		parent = path + "."
	}
	props, required := w.properties(o)
	for _, p := range props {
		w.field(schemaField{Parent: parent, Name: p.name, Depth: depth, Required: required[p.name]}, p.schema)
	}
	if items, ok := o.get("items"); ok {
		io, _, leave := w.enter(items)
		w.children(io, path+"[]", depth)
		leave()
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		v, _ := o.get(kw)
		l, _ := v.([]any)
		for i, m := range l {
			mo, _, leave := w.enter(m)
			w.children(mo, fmt.Sprintf("%s (option %d)", path, i+1), depth)
			leave()
		}
	}
}

// typeOf summarises what a schema accepts: "string", "integer or null",
// "array of object", "one of: string | integer".
func (w *schemaWalker) typeOf(s any, depth int) string {
	if b, ok := s.(bool); ok {
		if b {
			return "any"
		}
		return "nothing"
	}
	o, _ := s.(*schemaObject)
	if ref := o.str("$ref"); ref != "" {
		target, ok := w.pointer(ref)
		if !ok || depth > 4 {
			return "see " + ref
		}
		return w.typeOf(target, depth+1)
	}
	if o == nil {
		return "any"
	}
	var t string
	if v, ok := o.get("type"); ok {
		if name, ok := v.(string); ok {
			t = name
		} else {
			t = strings.Join(strs(v), " or ")
		}
	}
	items, hasItems := o.get("items")
	switch {
	case hasItems && (t == "array" || t == "") && depth < 4:
		t = "array of " + w.typeOf(items, depth+1)
	case t != "":
	case o.vals["properties"] != nil:
		t = "object"
	case o.vals["enum"] != nil:
		t = "enum"
	case o.vals["const"] != nil:
		t = "const"
	}
	for _, kw := range [][2]string{{"oneOf", "one of"}, {"anyOf", "any of"}} {
		v, _ := o.get(kw[0])
		l, _ := v.([]any)
		if len(l) == 0 || depth >= 4 {
			continue
		}
		opts := make([]string, len(l))
		for i, m := range l {
			opts[i] = w.typeOf(m, depth+1)
		}
		if t != "" {
			t += ", "
		}
		t += kw[1] + ": " + strings.Join(opts, " | ")
	}
	if t == "" {
		return "any"
	}
	return t
}

// constraintKeywords are the keywords a row lists, in this order.
var constraintKeywords = []string{"enum", "const", "format", "pattern", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
	"multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "default"}

// constraints lists what a schema asks beyond its type, as keyword: value.
func constraints(o *schemaObject) []string {
	var out []string
	for _, kw := range constraintKeywords {
		v, ok := o.get(kw)
		if !ok {
			continue
		}
		switch kw {
		case "enum":
			l, _ := v.([]any)
			vals := make([]string, len(l))
			for i, e := range l {
				vals[i] = jsonText(e)
			}
			out = append(out, "enum: "+strings.Join(vals, ", "))
		case "format", "pattern":
			s, _ := v.(string)
			out = append(out, kw+": "+s)
		case "uniqueItems":
			if v == true {
				out = append(out, "unique items")
			}
		default:
			out = append(out, kw+": "+jsonText(v))
		}
	}
	if v, ok := o.get("additionalProperties"); ok && v == false {
		out = append(out, "no other properties")
	}
	if v, ok := o.get("deprecated"); ok && v == true {
		out = append(out, "deprecated")
	}
	return out
}

// jsonText renders a decoded value as JSON.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// strs are the strings of a JSON array.
func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// prettyJSON indents a JSON document for a page; what is not JSON is
// shown as it is.
func prettyJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
