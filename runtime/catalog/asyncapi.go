package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// The document AsyncAPI renders describes the catalog from the side of a
// customer's endpoint: one channel (the subscription's URL, which the
// catalog does not know), one operation receiving every type over HTTP
// POST, and one message per type whose payload is the body the deliverer
// sends (deliverer/client.go): the envelope {id, type, timestamp, data},
// with the type's schema for data, and whose headers are Standard
// Webhooks'.
//
// Schemas are embedded as AsyncAPI Schema Objects, the default
// schemaFormat, not under a schemaFormat of their own: the official parser
// (@asyncapi/parser 3.6) registers only that format and JSON Schema
// draft-07 ("application/schema+json;version=draft-07"), and answers "No
// schema parser registered" for a 2020-12 media type, while labelling
// 2020-12 schemas draft-07 would misstate them. The Schema Object is a
// superset of draft-07; a 2020-12 keyword it lacks (prefixItems,
// dependentRequired, unevaluatedProperties, ...) is kept as written, an
// unknown keyword to a draft-07 reader, and the document says the schemas
// are 2020-12. What cannot stay as written is where references point: the
// parser resolves every $ref against the document's root, so relocate
// rewrites a schema's references to its place in the document and drops
// the $id, $anchor and $schema that would make them resolve elsewhere
// (TestAsyncAPIValidates runs the parser on the result).

// asyncAPIVersion is the version of the AsyncAPI specification AsyncAPI
// renders.
const asyncAPIVersion = "3.0.0"

// The names of the document's parts: the channel and operation every
// message belongs to, and the trait holding the Standard Webhooks headers.
const (
	asyncAPIChannel   = "endpoint"
	asyncAPIOperation = "receiveEvent"
	asyncAPIHeaders   = "standard-webhooks"
)

// Values of the message examples: fixed, so that the document is the same
// on every run.
const (
	exampleTimestamp     = "2026-01-01T00:00:00Z"
	exampleUnixTimestamp = "1767225600"
	// exampleSignature has a signature's form only: examples are not
	// signed.
	exampleSignature = "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="
)

// idPattern is the grammar of event ids (topics.ValidateID): printable
// ASCII without spaces or '/'.
const idPattern = "^[!-.0-~]+$"

// AsyncAPITitle is the title of the catalog's document, as the API serves
// it and webhookctl event-types export prints it.
const AsyncAPITitle = "hookpipe events"

// AsyncAPI renders types as an AsyncAPI 3.0.0 document (indented JSON)
// titled title, at version version: what a subscription's endpoint
// receives, one message per type, sorted by name so that the same catalog
// renders the same bytes. It fails on two types of one name, and on a
// schema reference it cannot place in the document.
func AsyncAPI(types []*Type, title, version string) ([]byte, error) {
	sorted := slices.SortedFunc(slices.Values(types), func(a, b *Type) int { return strings.Compare(a.Name, b.Name) })
	channel := map[string]apiRef{}
	doc := apiDocument{
		AsyncAPI: asyncAPIVersion,
		Info: apiInfo{Title: title, Version: version, Description: "What a hookpipe subscription's endpoint receives: " +
			"each event as an HTTP POST whose JSON body is `{\"id\", \"type\", \"timestamp\", \"data\"}`, `data` " +
			"exactly as the event was published, signed per [Standard Webhooks](https://www.standardwebhooks.com). " +
			"Verify `webhook-signature` before trusting a request: it is `v1,` and the base64 of the " +
			"HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed with the base64-decoded part of " +
			"the subscription's secret after `whsec_`; accept the request when one of its space-separated " +
			"signatures matches and `webhook-timestamp` is within a few minutes of now. A delivery may come more " +
			"than once, with the same `webhook-id`.\n\nThe schemas of `data` are JSON Schema, draft 2020-12 unless " +
			"written for another, embedded as AsyncAPI Schema Objects: their `$schema`, `$id` and `$anchor` dropped, " +
			"their references rewritten to their place in this document."},
		DefaultContentType: "application/json",
		Channels: map[string]apiChannel{asyncAPIChannel: {
			Title: "Subscription endpoint",
			Description: "The URL a subscription names. It receives the events of the types the subscription " +
				"matches, each delivered at least once.",
			Messages: channel,
		}},
		Components: apiComponents{
			Schemas:       map[string]any{},
			MessageTraits: map[string]apiMessageTrait{asyncAPIHeaders: {Headers: webhookHeaders()}},
			Messages:      map[string]apiMessage{},
		},
	}
	op := apiOperation{
		Action:  "receive",
		Channel: apiRef{"#/channels/" + asyncAPIChannel},
		Title:   "Receive an event",
		Summary: "An event of a type the subscription matches, POSTed to its URL.",
		Description: "Answer 2xx to acknowledge the delivery. 410 Gone disables the subscription; 400, 401, 403, " +
			"404, 405, 413, 414, 415 and 422 are permanent failures, not retried unless the subscription lists " +
			"the status; any other answer (redirects are not followed), or none within the subscription's " +
			"timeout, is retried on its schedule.",
		Messages: []apiRef{},
		Bindings: apiOperationBindings{HTTP: apiHTTPOperation{Method: "POST", BindingVersion: "0.3.0"}},
	}
	for i, t := range sorted {
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, fmt.Errorf("event type %s: given twice", t.Name)
		}
		data := map[string]any{"description": "Any JSON value: the type has no schema."}
		if t.HasSchema() {
			s, err := relocate(t.Name, t.Schema)
			if err != nil {
				return nil, fmt.Errorf("event type %s: %w", t.Name, err)
			}
			doc.Components.Schemas[t.Name] = s
			data = map[string]any{"$ref": "#/components/schemas/" + t.Name}
		}
		doc.Components.Messages[t.Name] = messageOf(t, data)
		channel[t.Name] = apiRef{"#/components/messages/" + t.Name}
		op.Messages = append(op.Messages, apiRef{"#/channels/" + asyncAPIChannel + "/messages/" + t.Name})
	}
	doc.Operations = map[string]apiOperation{asyncAPIOperation: op}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// messageOf is a type's message: data is the schema of the body's data.
func messageOf(t *Type, data any) apiMessage {
	m := apiMessage{
		Name:        t.Name,
		Title:       t.Name,
		Description: t.Description,
		Deprecated:  t.Deprecated,
		Traits:      []apiRef{{"#/components/messageTraits/" + asyncAPIHeaders}},
		Payload: map[string]any{
			// Not additionalProperties false: a field added to the body
			// later must not fail endpoints that validate it.
			"type":     "object",
			"required": []string{"id", "type", "timestamp", "data"},
			"properties": map[string]any{
				"id": map[string]any{"type": "string", "minLength": 1, "maxLength": 255, "pattern": idPattern,
					"description": "The event's id, also the webhook-id header: the same on every attempt."},
				"type": map[string]any{"type": "string", "const": t.Name, "description": "The event's type."},
				"timestamp": map[string]any{"type": "string", "format": "date-time",
					"description": "When the event happened (its created_at), else when it was published."},
				"data": data,
			},
		},
	}
	first, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
	m.Summary = strings.TrimSpace(first)
	if t.Deprecated {
		m.Summary = strings.TrimSpace("Deprecated. " + m.Summary)
		m.Description = strings.TrimSpace(t.Description + "\n\nThis event type is deprecated.")
	}
	for i, ex := range t.Examples {
		id := fmt.Sprintf("evt_example_%d", i+1)
		m.Examples = append(m.Examples, apiExample{
			Name: fmt.Sprintf("example-%d", i+1),
			Headers: map[string]string{"webhook-id": id, "webhook-timestamp": exampleUnixTimestamp,
				"webhook-signature": exampleSignature},
			Payload: apiBody{ID: id, Type: t.Name, Timestamp: exampleTimestamp, Data: ex},
		})
	}
	return m
}

// webhookHeaders is the schema of the headers every delivery carries
// (deliverer/client.go's requestHeader); a subscription may add its own.
func webhookHeaders() map[string]any {
	sig := "v1,[A-Za-z0-9+/]+={0,2}"
	return map[string]any{
		"type":     "object",
		"required": []string{"webhook-id", "webhook-timestamp", "webhook-signature"},
		"properties": map[string]any{
			"webhook-id": map[string]any{"type": "string", "minLength": 1, "maxLength": 255, "pattern": idPattern,
				"description": "The event's id, the same on every attempt of every delivery of the event: drop duplicates by it."},
			"webhook-timestamp": map[string]any{"type": "string", "pattern": "^[0-9]+$",
				"description": "When this attempt was sent, in Unix seconds: refuse a request far from now."},
			"webhook-signature": map[string]any{"type": "string", "pattern": "^" + sig + "( " + sig + ")*$",
				"description": "`v1,` and the base64 of HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`; " +
					"two, space-separated, while a rotated secret is in its 24 hour grace period."},
			"traceparent": map[string]any{"type": "string",
				"description": "W3C Trace Context, when the event carries a trace (with tracestate)."},
			"tracestate": map[string]any{"type": "string", "description": "W3C Trace Context, with traceparent."},
		},
	}
}

// relocate decodes a type's schema for its place in the document,
// #/components/schemas/<name>: every $ref is rewritten to the pointer, from
// the document's root, of what it names in the schema (a JSON pointer
// fragment, an $anchor, or a resource with an $id of its own), and $id,
// $anchor and $schema, which would make the rewritten references resolve
// against something else, are dropped. A $ref next to keywords that
// constrain is moved into an allOf: 2020-12 applies both, draft-07 readers
// would ignore the keywords. A boolean schema becomes the object schema of
// the same meaning, as components/schemas holds objects.
func relocate(name string, raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var s any
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if b, ok := s.(bool); ok {
		if b {
			return map[string]any{}, nil
		}
		return map[string]any{"not": map[string]any{}}, nil
	}
	root, err := url.Parse(schemaURL(name))
	if err != nil {
		return nil, err
	}
	// Where the schema's resources and anchors are, from its root.
	resources := map[string]string{root.String(): ""}
	anchors := map[string]string{}
	walkSchemas(s, "", root, func(m map[string]any, ptr string, base *url.URL) {
		if _, ok := m["$id"]; ok {
			resources[base.String()] = ptr
		}
		for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := m[kw].(string); ok {
				anchors[base.String()+"#"+a] = ptr
			}
		}
	})
	at := "/components/schemas/" + tokenEscaper.Replace(name)
	var wrap []map[string]any
	walkSchemas(s, "", root, func(m map[string]any, _ string, base *url.URL) {
		delete(m, "$id")
		delete(m, "$anchor")
		delete(m, "$schema")
		ref, ok := m["$ref"].(string)
		if !ok || err != nil {
			return
		}
		target, perr := base.Parse(ref)
		if perr != nil {
			err = fmt.Errorf("$ref %q: %w", ref, perr)
			return
		}
		frag := target.Fragment
		target.Fragment, target.RawFragment = "", ""
		var ptr string
		var found bool
		if frag == "" || frag[0] == '/' {
			ptr, found = resources[target.String()]
			ptr += frag
		} else {
			ptr, found = anchors[target.String()+"#"+frag]
		}
		if !found {
			err = fmt.Errorf("$ref %q: cannot be placed in the AsyncAPI document", ref)
			return
		}
		m["$ref"] = (&url.URL{Fragment: at + ptr}).String()
		for kw := range m {
			if kw != "$ref" && kw != "$defs" && kw != "definitions" && !annotations[kw] {
				wrap = append(wrap, m)
				break
			}
		}
	})
	for _, m := range wrap {
		all, _ := m["allOf"].([]any)
		m["allOf"] = append(all, map[string]any{"$ref": m["$ref"]})
		delete(m, "$ref")
	}
	return s, err
}

// Keywords whose values are schemas: one, a list of them, or an object of
// them (JSON Schema 2020-12 and draft-07). Values of other keywords (enum,
// const, examples, default, ...) are data.
var (
	oneSchema = map[string]bool{"additionalProperties": true, "additionalItems": true, "items": true,
		"contains": true, "propertyNames": true, "not": true, "if": true, "then": true, "else": true,
		"unevaluatedItems": true, "unevaluatedProperties": true, "contentSchema": true}
	schemaList = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true,
		"items": true} // items: a list in draft-07
	schemaObject = map[string]bool{"properties": true, "patternProperties": true, "$defs": true,
		"definitions": true, "dependentSchemas": true, "dependencies": true}
)

// walkSchemas calls visit on every object schema of s, parents first, with
// its JSON pointer from the root and its base URL (an $id changes it).
// Keys are visited in order, so that a walk is the same on every run.
func walkSchemas(s any, ptr string, base *url.URL, visit func(m map[string]any, ptr string, base *url.URL)) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	if id, ok := m["$id"].(string); ok {
		if u, err := base.Parse(id); err == nil {
			u.Fragment, u.RawFragment = "", ""
			base = u
		}
	}
	visit(m, ptr, base)
	for _, kw := range slices.Sorted(maps.Keys(m)) {
		at := ptr + "/" + tokenEscaper.Replace(kw)
		switch v := m[kw].(type) {
		case map[string]any:
			if oneSchema[kw] {
				walkSchemas(v, at, base, visit)
			} else if schemaObject[kw] {
				for _, k := range slices.Sorted(maps.Keys(v)) {
					walkSchemas(v[k], at+"/"+tokenEscaper.Replace(k), base, visit)
				}
			}
		case []any:
			if schemaList[kw] {
				for i, sub := range v {
					walkSchemas(sub, fmt.Sprintf("%s/%d", at, i), base, visit)
				}
			}
		}
	}
}

// The parts of the document, in the order the specification lists them.
type (
	apiDocument struct {
		AsyncAPI           string                  `json:"asyncapi"`
		Info               apiInfo                 `json:"info"`
		DefaultContentType string                  `json:"defaultContentType"`
		Channels           map[string]apiChannel   `json:"channels"`
		Operations         map[string]apiOperation `json:"operations"`
		Components         apiComponents           `json:"components"`
	}
	apiInfo struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Description string `json:"description"`
	}
	apiRef struct {
		Ref string `json:"$ref"`
	}
	apiChannel struct {
		// Address is null: the subscription's URL, unknown to the
		// catalog.
		Address     *string           `json:"address"`
		Title       string            `json:"title"`
		Description string            `json:"description"`
		Messages    map[string]apiRef `json:"messages"`
	}
	apiOperation struct {
		Action      string               `json:"action"`
		Channel     apiRef               `json:"channel"`
		Title       string               `json:"title"`
		Summary     string               `json:"summary"`
		Description string               `json:"description"`
		Messages    []apiRef             `json:"messages"`
		Bindings    apiOperationBindings `json:"bindings"`
	}
	apiOperationBindings struct {
		HTTP apiHTTPOperation `json:"http"`
	}
	apiHTTPOperation struct {
		Method         string `json:"method"`
		BindingVersion string `json:"bindingVersion"`
	}
	apiComponents struct {
		Schemas       map[string]any             `json:"schemas"`
		MessageTraits map[string]apiMessageTrait `json:"messageTraits"`
		Messages      map[string]apiMessage      `json:"messages"`
	}
	apiMessageTrait struct {
		Headers map[string]any `json:"headers"`
	}
	apiMessage struct {
		Name        string       `json:"name"`
		Title       string       `json:"title"`
		Summary     string       `json:"summary,omitempty"`
		Description string       `json:"description,omitempty"`
		Deprecated  bool         `json:"deprecated,omitempty"`
		Traits      []apiRef     `json:"traits"`
		Payload     any          `json:"payload"`
		Examples    []apiExample `json:"examples,omitempty"`
	}
	apiExample struct {
		Name    string            `json:"name"`
		Headers map[string]string `json:"headers"`
		Payload apiBody           `json:"payload"`
	}
	// apiBody is a body as the deliverer renders it (deliverer/client.go).
	apiBody struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
)
