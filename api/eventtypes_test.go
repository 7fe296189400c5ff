package api

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

var orderSchema = map[string]any{
	"type": "object", "required": []string{"id"},
	"properties": map[string]any{"id": map[string]any{"type": "integer"}, "note": map[string]any{"type": "string"}},
}

// TestEventTypes: admins manage the catalog, tenants read it; a schema
// that does not compile, or refuses its own example, is refused naming the
// field; a breaking change needs force and says why; every write is a new
// version, read back at once.
func TestEventTypes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	tenant := r.tenantKey("acme")

	var et service.EventType
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.created", "description": "An order was placed.",
		"schema": orderSchema, "examples": []any{map[string]any{"id": 1}}}, &et)
	if et.Version != 1 || et.Validation != "warn" || et.UpdatedAt.IsZero() {
		t.Fatalf("created %+v, want version 1, validation warn", et)
	}
	var list struct{ Data []service.EventType }
	r.must(http.StatusOK, "GET", "/v1/event-types", tenant, nil, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "order.created" || list.Data[0].Description != "An order was placed." || len(list.Data[0].Examples) != 1 {
		t.Fatalf("tenant's list %+v", list.Data)
	}
	r.must(http.StatusForbidden, "POST", "/v1/event-types", tenant, map[string]any{"name": "x.y"}, nil)
	r.must(http.StatusForbidden, "DELETE", "/v1/event-types/order.created", tenant, nil, nil)
	r.must(http.StatusConflict, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.created"}, nil)

	for _, bad := range []struct {
		name     string
		body     map[string]any
		location string
		says     string
	}{
		{"schema does not compile", map[string]any{"name": "a.b", "schema": map[string]any{"type": "strin"}}, "body.schema", "strin"},
		{"remote $ref", map[string]any{"name": "a.b", "schema": map[string]any{"$ref": "https://example.com/x.json"}}, "body.schema", "only references within the schema"},
		{"example refused", map[string]any{"name": "a.b", "schema": orderSchema, "examples": []any{map[string]any{"id": "x"}}}, "body.examples", "example 0 does not match"},
		{"name with empty segment", map[string]any{"name": "a..b"}, "body.name", "single dots"},
		{"reserved name", map[string]any{"name": "asyncapi.json"}, "body.name", "reserved"},
	} {
		var p problem
		r.must(http.StatusUnprocessableEntity, "POST", "/v1/event-types", adminKey, bad.body, &p)
		if len(p.Errors) != 1 || p.Errors[0].Location != bad.location || !strings.Contains(p.Errors[0].Message, bad.says) {
			t.Errorf("%s: %+v, want %s saying %q", bad.name, p.Errors, bad.location, bad.says)
		}
	}

	stricter := map[string]any{"schema": map[string]any{"type": "object", "required": []string{"id", "note"},
		"properties": map[string]any{"id": map[string]any{"type": "integer"}, "note": map[string]any{"type": "string"}}}}
	var p problem
	r.must(http.StatusConflict, "PUT", "/v1/event-types/order.created", adminKey, stricter, &p)
	if !strings.Contains(p.Detail, "force=true") || len(p.Errors) < 2 || !strings.Contains(p.Errors[0].Message+p.Errors[1].Message, `"note" is now required`) {
		t.Fatalf("breaking change answered %+v", p)
	}
	r.must(http.StatusOK, "PUT", "/v1/event-types/order.created?force=true", adminKey, stricter, &et)
	if et.Version != 2 {
		t.Fatalf("forced update is version %d, want 2", et.Version)
	}
	r.must(http.StatusOK, "PUT", "/v1/event-types/order.created", adminKey, map[string]any{"schema": orderSchema, "validation": "enforce"}, &et)
	r.must(http.StatusOK, "GET", "/v1/event-types/order.created", tenant, nil, &et)
	if et.Version != 3 || et.Validation != "enforce" {
		t.Fatalf("after a loosening update: %+v, want version 3, enforced", et)
	}
	a := r.do("GET", "/v1/event-types/asyncapi.json", tenant, nil)
	var doc struct {
		AsyncAPI   string                            `json:"asyncapi"`
		Components struct{ Messages map[string]any } `json:"components"`
	}
	a.decode(t, &doc)
	if a.status != http.StatusOK || doc.AsyncAPI != "3.0.0" || len(doc.Components.Messages) != 1 {
		t.Fatalf("asyncapi.json: %d %s", a.status, a.body)
	}
	r.must(http.StatusNotFound, "PUT", "/v1/event-types/order.missing", adminKey, map[string]any{}, nil)
	r.must(http.StatusNoContent, "DELETE", "/v1/event-types/order.created", adminKey, nil, nil)
	r.must(http.StatusNotFound, "GET", "/v1/event-types/order.created", tenant, nil, nil)
}

// TestPublishValidation: an enforced type's invalid event is refused with
// the pointer and keyword, and nothing of its request is produced; a
// warned type's is accepted with a warning; a body that is not UTF-8 is a
// 400; unknown types follow WEBHOOKS_UNKNOWN_EVENT_TYPES.
func TestPublishValidation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	env := map[string]string{"WEBHOOKS_UNKNOWN_EVENT_TYPES": catalog.UnknownReject}
	for k, v := range c.env {
		env[k] = v
	}
	r := c.replicaWith(env)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.created", "schema": orderSchema, "validation": "enforce"}, nil)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.noted", "schema": orderSchema}, nil)

	r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "order.created", "data": map[string]any{"id": 7}}, nil)
	var p problem
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/events", adminKey, map[string]any{"type": "order.created", "data": map[string]any{"id": "seven"}}, &p)
	if len(p.Errors) != 1 || p.Errors[0].Location != "body.data/id" || !strings.HasPrefix(p.Errors[0].Message, "type: ") {
		t.Fatalf("invalid event answered %+v, want body.data/id and the keyword type", p)
	}
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/events/batch", adminKey, map[string]any{"events": []any{
		map[string]any{"type": "order.created", "data": map[string]any{"id": 8}},
		map[string]any{"type": "order.created", "data": map[string]any{}},
	}}, &p)
	if len(p.Errors) != 1 || p.Errors[0].Location != "body.events[1].data" || !strings.HasPrefix(p.Errors[0].Message, "required: ") {
		t.Fatalf("invalid batch answered %+v, want body.events[1].data and the keyword required", p)
	}
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/events", adminKey, map[string]any{"type": "order.other", "data": map[string]any{}}, &p)
	if len(p.Errors) != 1 || p.Errors[0].Location != "body.type" {
		t.Fatalf("unknown type answered %+v, want body.type", p)
	}
	var out struct {
		IDs      []string
		Warnings []PublishWarning
	}
	r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "order.noted", "data": map[string]any{"id": "x"}}, &out)
	if len(out.Warnings) != 1 || out.Warnings[0].Pointer != "/id" || out.Warnings[0].Keyword != "type" {
		t.Fatalf("warned event answered %+v, want a warning at /id", out)
	}
	a := r.do("POST", "/v1/events", adminKey, "{\"type\": \"order.noted\", \"data\": {\"id\": 1, \"note\": \"caf\xe9\"}}")
	if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "UTF-8") {
		t.Fatalf("a body that is not UTF-8: %d %s, want 400", a.status, a.body)
	}
	if n := len(c.records(c.names.Events())); n != 2 {
		t.Fatalf("%d events produced, want the 2 accepted", n)
	}
}

// TestEventTypeFaults: invalid and unknown events published are counted
// by type in Redis for the dashboard; without Redis the answer says the
// counts are unavailable.
func TestEventTypeFaults(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var out struct {
		Available bool
		Types     []service.EventTypeFaults
	}
	c.replica().must(http.StatusOK, "GET", "/v1/stats/event-types", adminKey, nil, &out)
	if out.Available || len(out.Types) != 0 {
		t.Fatalf("without Redis: %+v", out)
	}

	url, prefix := redistest.Shared(t)
	env := maps.Clone(c.env)
	env[redisstate.EnvURL], env[redisstate.EnvKeyPrefix], env["WEBHOOKS_UNKNOWN_EVENT_TYPES"] = url, prefix, catalog.UnknownWarn
	env[redisstate.EnvTimeout] = "2s" // the default 100 ms fails open under -race on a loaded machine
	r := c.replicaWith(env)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.created", "schema": orderSchema, "validation": "enforce"}, nil)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.noted", "schema": orderSchema}, nil)
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/events", adminKey, map[string]any{"type": "order.created", "data": map[string]any{}}, nil)
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/events", adminKey, map[string]any{"type": "order.created", "data": map[string]any{}}, nil)
	r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "order.noted", "data": map[string]any{}}, nil)
	r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "order.noted", "data": map[string]any{"id": 1}}, nil)
	r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "who.knows", "data": map[string]any{}}, nil)
	r.must(http.StatusForbidden, "GET", "/v1/stats/event-types", r.tenantKey("acme"), nil, nil)
	r.must(http.StatusOK, "GET", "/v1/stats/event-types", adminKey, nil, &out)
	want := []service.EventTypeFaults{{Type: "order.created", Invalid: 2}, {Type: "", Unknown: 1}, {Type: "order.noted", Invalid: 1}}
	if !out.Available || !slices.Equal(out.Types, want) {
		t.Fatalf("faults %+v, want %+v", out, want)
	}
}
