package api

import (
	"encoding/json"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
)

// shopSchema is the schema of the catalog pages' tests: nested objects,
// an array of objects, constraints.
const shopSchema = `{"type": "object", "required": ["id"], "properties": {
	"id": {"type": "string", "pattern": "^ord_", "description": "The order's id."},
	"status": {"enum": ["placed", "paid"]},
	"customer": {"type": "object", "properties": {"email": {"type": "string", "format": "email", "description": "Where receipts go."}}},
	"lines": {"type": "array", "items": {"type": "object", "required": ["sku"], "properties": {"qty": {"type": "integer", "minimum": 1}, "sku": {"type": "string"}}}}
}}`

// typeFormOf is a filled add or edit form of the event types pages.
func typeFormOf(token, name, schema, examples, validation string) url.Values {
	return url.Values{"_csrf": {token}, "name": {name}, "description": {"An order was placed. <script>alert(1)</script>"},
		"schema": {schema}, "examples": {examples}, "validation": {validation}}
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// textOf is an element's text in a page: the first element with id,
// tags dropped, entities decoded.
func textOf(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no #%s in %.2000s", id, body)
	}
	start := strings.LastIndex(body[:i], "<")
	tag := body[start+1 : start+1+strings.IndexAny(body[start+1:], " >")]
	i += strings.Index(body[i:], ">") + 1
	end := strings.Index(body[i:], "</"+tag+">")
	return html.UnescapeString(tagRE.ReplaceAllString(body[i:i+end], ""))
}

// TestEventTypePagesAdmin: an admin adds a type from the dashboard, sees
// the compiler's message next to the schema field when it does not
// compile, and the examples' when they are not a JSON array; the type's
// page shows the schema as a table and the examples pretty-printed, with
// the description escaped; a breaking change lists every reason and
// writes nothing until saved anyway; removal asks first.
func TestEventTypePagesAdmin(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	u := r.uiClient()
	u.signIn(adminKey)
	token := u.csrf("/ui/event-types")

	status, body := u.post("/ui/event-types", typeFormOf(token, "order.placed", `{"type": "strin"}`, "", "warn"))
	if status != http.StatusOK || !strings.Contains(textOf(t, body, "schema-error"), "strin") || !strings.Contains(body, `aria-invalid="true"`) {
		t.Fatalf("a schema that does not compile: %d, want its message next to the field: %.3000s", status, body)
	}
	if !strings.Contains(body, "&#34;strin&#34;") && !strings.Contains(body, "&quot;strin&quot;") {
		t.Errorf("the refused form does not keep the schema as typed")
	}
	status, body = u.post("/ui/event-types", typeFormOf(token, "order.placed", shopSchema, `{"id": "ord_1"}`, "warn"))
	if status != http.StatusOK || !strings.Contains(textOf(t, body, "examples-error"), "JSON array") {
		t.Fatalf("examples that are not an array: %d", status)
	}
	_, body = u.post("/ui/event-types", typeFormOf(token, "order.placed", shopSchema, `[{"id": 1}]`, "warn"))
	if e := textOf(t, body, "examples-error"); !strings.Contains(e, "example 0 does not match") {
		t.Fatalf("an example the schema refuses: %q", e)
	}
	_, body = u.post("/ui/event-types", typeFormOf(token, "order..placed", "", "", "warn"))
	if e := textOf(t, body, "name-error"); !strings.Contains(e, "single dots") {
		t.Fatalf("a bad name: %q", e)
	}
	if n := len(c.records(c.names.EventTypes())); n != 0 {
		t.Fatalf("%d event types written by refused forms", n)
	}

	status, body = u.post("/ui/event-types", typeFormOf(token, "order.placed", shopSchema,
		`[{"id": "ord_1", "customer": {"email": "a@example.com"}, "lines": [{"sku": "X", "qty": 2}]}]`, "enforce"))
	if status != http.StatusOK || !strings.Contains(body, "Added order.placed as version 1.") {
		t.Fatalf("adding: %d %.2000s", status, body)
	}
	if strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the description is not escaped")
	}
	table := textOf(t, body, "schema")
	for _, want := range []string{"idstringrequiredThe order's id.pattern: ^ord_", `statusenumoptionalenum: "placed", "paid"`,
		"customer.emailstringoptionalWhere receipts go.format: email", "lines[].qtyintegeroptionalminimum: 1", "lines[].skustringrequired"} {
		if !strings.Contains(strings.ReplaceAll(table, "\n", ""), want) {
			t.Errorf("the schema table %q lacks %q", table, want)
		}
	}
	if ex := textOf(t, body, "type-form"); !strings.Contains(ex, "\"sku\": \"X\"") {
		t.Errorf("the edit form's examples are not pretty-printed: %q", ex)
	}
	if !strings.Contains(body, `<pre class="example">{
  &#34;id&#34;: &#34;ord_1&#34;,`) {
		t.Errorf("the example is not pretty-printed: %.3000s", body)
	}
	if !strings.Contains(body, `<details><summary>The schema as written</summary>`) {
		t.Errorf("no raw schema")
	}

	// A breaking change: two reasons, nothing written, then force.
	stricter := strings.Replace(shopSchema, `"required": ["id"]`, `"required": ["id", "status"]`, 1)
	stricter = strings.Replace(stricter, `"enum": ["placed", "paid"]`, `"enum": ["paid"]`, 1)
	before := len(c.records(c.names.EventTypes()))
	form := typeFormOf(token, "", stricter, `[{"id": "ord_1", "status": "paid"}]`, "enforce")
	status, body = u.post("/ui/event-types/order.placed/edit", form)
	reasons := textOf(t, body, "breaking")
	if status != http.StatusOK || !strings.Contains(reasons, `property "status" is now required`) || !strings.Contains(reasons, `enum drops "placed"`) ||
		!strings.Contains(body, `id="force"`) {
		t.Fatalf("a breaking change: %d, want both reasons and a force button: %q", status, reasons)
	}
	if n := len(c.records(c.names.EventTypes())); n != before {
		t.Fatalf("a breaking change wrote %d records before it was forced", n-before)
	}
	form.Set("force", "true")
	if _, body = u.post("/ui/event-types/order.placed/edit", form); !strings.Contains(body, "Saved as version 2.") {
		t.Fatalf("saving anyway: %.2000s", body)
	}
	var et service.EventType
	r.must(http.StatusOK, "GET", "/v1/event-types/order.placed", adminKey, nil, &et)
	if et.Version != 2 || et.Validation != "enforce" || !strings.Contains(string(et.Schema), `"paid"]`) {
		t.Fatalf("after saving anyway: %+v", et)
	}

	status, body = u.get("/ui/event-types")
	if status != http.StatusOK || !strings.Contains(body, `href="/ui/event-types/order.placed"`) || !strings.Contains(body, "needs Redis") {
		t.Fatalf("the event types page without Redis: %d %.2000s", status, body)
	}
	if status, body = u.get("/ui/event-types/order.placed/delete"); status != http.StatusOK || !strings.Contains(body, `id="confirm-delete"`) {
		t.Fatalf("removal's confirmation: %d", status)
	}
	if n := len(c.records(c.names.EventTypes())); n != before+1 {
		t.Fatalf("asking to confirm wrote %d records", n-before-1)
	}
	if status, body = u.post("/ui/event-types/order.placed/delete", url.Values{"_csrf": {token}}); status != http.StatusOK ||
		!strings.Contains(body, "Removed order.placed") || !strings.Contains(body, "No event types yet.") {
		t.Fatalf("removing: %d %.2000s", status, body)
	}
	if status, _ = u.get("/ui/event-types/order.placed"); status != http.StatusNotFound {
		t.Fatalf("a removed type's page: %d, want 404", status)
	}
}

// TestEventTypePagesPortal: a tenant reads the catalog in the portal, the
// schema table and examples, deprecated types marked, and nothing an admin
// only sees: no counts, no validation mode, no forms; its POSTs to the
// catalog are refused and write nothing.
func TestEventTypePagesPortal(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.placed", "description": "An order was placed.",
		"schema": json.RawMessage(shopSchema), "examples": []any{map[string]any{"id": "ord_1"}}}, nil)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.legacy", "deprecated": true}, nil)
	portal := r.portalLink("acme")
	u := r.uiClient()
	status, body := u.get(portal + "/event-types")
	if status != http.StatusOK || !strings.Contains(body, portal+"/event-types/order.placed") || !strings.Contains(body, "An order was placed.") {
		t.Fatalf("the portal's event types: %d %.2000s", status, body)
	}
	for _, admin := range []string{"invalid, 24 h", "needs Redis", "validation", `id="type-form"`} {
		if strings.Contains(body, admin) {
			t.Errorf("the portal's event types show %q", admin)
		}
	}
	if !regexp.MustCompile(`order\.legacy</code></a> <span class="badge">deprecated`).MatchString(body) {
		t.Errorf("the deprecated type is not marked: %.2000s", body)
	}
	status, body = u.get(portal + "/event-types/order.placed")
	if status != http.StatusOK || !strings.Contains(textOf(t, body, "schema"), "customer.email") || !strings.Contains(body, `<pre class="example">`) {
		t.Fatalf("a type's page in the portal: %d %.2000s", status, body)
	}
	for _, admin := range []string{"Last 24 h", "Validation", `id="type-form"`, "/delete"} {
		if strings.Contains(body, admin) {
			t.Errorf("a type's page in the portal shows %q", admin)
		}
	}
	if _, body = u.get(portal + "/event-types/order.legacy"); !strings.Contains(body, `id="deprecated"`) || !strings.Contains(body, "this type has no schema") {
		t.Errorf("the deprecated type's page: %.2000s", body)
	}
	if status, _ = u.get(portal + "/event-types/order.missing"); status != http.StatusNotFound {
		t.Errorf("a missing type: %d, want 404", status)
	}
	token := u.csrf(portal + "/subscriptions")
	before := len(c.records(c.names.EventTypes()))
	for _, path := range []string{"/event-types", "/event-types/order.placed/edit", "/event-types/order.placed/delete"} {
		if status, _ := u.post(portal+path, typeFormOf(token, "order.other", "", "", "warn")); status < 400 {
			t.Errorf("POST %s from the portal: %d, want refused", path, status)
		}
	}
	if n := len(c.records(c.names.EventTypes())); n != before {
		t.Errorf("the portal wrote %d event types", n-before)
	}
}

// TestEventTypeCounts: with Redis, the event types page shows each type's
// invalid events of the last 24 hours and a row for the unknown types,
// and the overview a panel of the types with invalid events.
func TestEventTypeCounts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	redisURL, prefix := redistest.Shared(t)
	env := maps.Clone(c.env)
	env[redisstate.EnvURL], env[redisstate.EnvKeyPrefix], env["WEBHOOKS_UNKNOWN_EVENT_TYPES"] = redisURL, prefix, catalog.UnknownWarn
	env[redisstate.EnvTimeout] = "2s" // the default 100 ms fails open under -race on a loaded machine
	r := c.replicaWith(env)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.placed", "schema": json.RawMessage(shopSchema)}, nil)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.paid"}, nil)
	for range 3 {
		r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "order.placed", "data": map[string]any{}}, nil)
	}
	r.must(http.StatusAccepted, "POST", "/v1/events", adminKey, map[string]any{"type": "who.knows", "data": map[string]any{}}, nil)
	u := r.uiClient()
	u.signIn(adminKey)
	_, body := u.get("/ui/event-types")
	rows := strings.ReplaceAll(textOf(t, body, "event-types"), "\n", "")
	for _, want := range []string{"order.placed1warn30", "order.paid1warn00", "types not in the catalog01"} {
		if !strings.Contains(rows, want) {
			t.Errorf("the event types table %q lacks %q", rows, want)
		}
	}
	if strings.Contains(body, "needs Redis") {
		t.Errorf("says it needs Redis, with Redis")
	}
	if _, body = u.get("/ui/event-types/order.placed"); textOf(t, body, "type-counts") != "3 invalid events" {
		t.Errorf("the type's counts: %q", textOf(t, body, "type-counts"))
	}
	_, body = u.get("/ui/")
	panel := textOf(t, body, "type-faults")
	if !strings.Contains(panel, "order.placed: 3 invalid") || !strings.Contains(panel, "types not in the catalog: 1 unknown") ||
		!strings.Contains(body, `<a href="/ui/event-types">See the event types</a>`) {
		t.Errorf("the overview's panel: %q", panel)
	}
}

// TestEndpointFormsOfferTheCatalog: adding an endpoint offers the
// catalog's types to tick beside the patterns typed, in the dashboard and
// the portal; its page ticks them again, and test-send sends the example
// picked, or webhook.test.
func TestEndpointFormsOfferTheCatalog(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	endpoint := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	t.Cleanup(endpoint.Close)
	c := newCluster(t)
	r := c.loopbackReplica()
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.placed",
		"examples": []any{map[string]any{"id": "ord_1"}, map[string]any{"id": "ord_2"}}}, nil)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "invoice.paid", "deprecated": true,
		"examples": []any{map[string]any{"invoice": 7}}}, nil)

	admin := r.uiClient()
	admin.signIn(adminKey)
	for name, u := range map[string]struct {
		c    *uiClient
		base string
	}{"dashboard": {admin, "/ui"}, "portal": {r.uiClient(), r.portalLink("acme")}} {
		_, body := u.c.get(u.base + "/subscriptions")
		for _, want := range []string{`name="event_type" value="order.placed"`, `name="event_type" value="invoice.paid"`, `name="event_types" value=""`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the add form lacks %s", name, want)
			}
		}
		token := csrfField.FindStringSubmatch(body)[1]
		form := url.Values{"_csrf": {token}, "url": {endpoint.URL + "/" + name}, "event_type": {"order.placed"}, "event_types": {"shop.*"}, "tenant": {"acme"}}
		status, body := u.c.post(u.base+"/subscriptions", form)
		id := regexp.MustCompile(`<h1>Endpoint <code>([^<]+)</code>`).FindStringSubmatch(body)
		if status != http.StatusOK || id == nil {
			t.Fatalf("%s: adding: %d %.1000s", name, status, body)
		}
		var sub service.Subscription
		r.must(http.StatusOK, "GET", "/v1/subscriptions/"+id[1], adminKey, nil, &sub)
		if !slices.Equal(sub.EventTypes, []string{"order.placed", "shop.*"}) {
			t.Fatalf("%s: added with %v, want the type ticked and the pattern typed", name, sub.EventTypes)
		}
		if !strings.Contains(body, `value="order.placed" checked`) || !strings.Contains(body, `name="event_types" value="shop.*"`) {
			t.Errorf("%s: the settings do not tick the type picked", name)
		}
		// Only the examples of the types the endpoint takes.
		choices := textOf(t, body, "test-example")
		if choices != "webhook.testorder.placed, example 1order.placed, example 2" {
			t.Errorf("%s: test-send offers %q", name, choices)
		}
		mu.Lock()
		got = nil
		mu.Unlock()
		status, body = u.c.post(u.base+"/subscriptions/"+sub.ID+"/test", url.Values{"_csrf": {token}, "example": {"order.placed#1"}})
		if status != http.StatusOK || !strings.Contains(textOf(t, body, "test-answer"), "delivered") {
			t.Fatalf("%s: test-send of an example: %d", name, status)
		}
		u.c.post(u.base+"/subscriptions/"+sub.ID+"/test", url.Values{"_csrf": {token}})
		mu.Lock()
		sent := slices.Clone(got)
		mu.Unlock()
		if len(sent) != 2 || !strings.Contains(sent[0], `"type":"order.placed"`) || !strings.Contains(sent[0], `"data":{"id":"ord_2"}`) ||
			!strings.Contains(sent[1], `"type":"webhook.test"`) {
			t.Errorf("%s: the endpoint got %q, want the second example, then webhook.test", name, sent)
		}
	}
}
