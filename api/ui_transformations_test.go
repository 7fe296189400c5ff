package api

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// TestTransformationForms: the endpoint page's transformation form, in the
// dashboard and the portal, samples a catalog example of the endpoint's
// types; "Try it" shows the request the script would make (the shaped
// body, the endpoint's URL with the script's path, its headers) or why it
// fails, and stores nothing; "Save" stores the script; a script that does
// not compile comes back with the compiler's message next to it, as
// typed, and nothing is stored; an empty one removes it.
func TestTransformationForms(t *testing.T) {
	t.Parallel()
	r := newCluster(t).replica()
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.paid",
		"examples": []any{map[string]any{"amount": 12}}}, nil)
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "acme", "url": "https://hooks.acme.example/in",
		"event_types": []string{"order.*"}, "headers": map[string]string{"X-Team": "billing"}}, &sub)
	const script = `function handler(w) { w.payload = {t: w.type, cents: w.data.amount * 100}; w.headers["x-src"] = "hp"; w.path = "/shaped"; return w; }`

	admin := r.uiClient()
	admin.signIn(adminKey)
	for name, base := range map[string]string{"dashboard": "/ui", "portal": r.portalLink("acme")} {
		t.Run(name, func(t *testing.T) {
			u := admin
			if base != "/ui" {
				u = r.uiClient()
			}
			page := base + "/subscriptions/" + sub.ID
			token := u.csrf(page)
			_, body := u.get(page)
			body = html.UnescapeString(body)
			if !strings.Contains(body, `<h2 id="transformation">Transformation</h2>`) || !strings.Contains(body, `name="sample_type" id="sample-type" value="order.paid"`) ||
				!strings.Contains(body, `"amount": 12`) {
				t.Fatalf("the endpoint page has no transformation form sampling order.paid's example: %.4000s", body)
			}
			form := func(op, script, data string) url.Values {
				return url.Values{"_csrf": {token}, "op": {op}, "transformation": {script}, "sample_type": {"order.paid"}, "sample_data": {data}}
			}
			action := page + "/transformation"

			status, body := u.post(action, form("try", strings.ReplaceAll(script, "; ", ";\r\n"), `{"amount": 7}`))
			body = html.UnescapeString(body)
			for _, want := range []string{`<code id="transformation-method">POST</code>`, `<code id="transformation-url">https://hooks.acme.example/shaped</code>`,
				`<pre id="transformation-body">{"t":"order.paid","cents":700}</pre>`, `<code>X-Src</code></dt><dd><code>hp</code>`,
				`<code>X-Team</code></dt><dd><code>billing</code>`} {
				if status != http.StatusOK || !strings.Contains(body, want) {
					t.Fatalf("trying the script: %d, want %s: %.4000s", status, want, body)
				}
			}
			if !strings.Contains(body, `w.headers["x-src"] = "hp";`+"\n") {
				t.Errorf("the script typed is not shown again")
			}
			if stored, _ := r.s.subs.Get(sub.ID); stored.Transformation != "" {
				t.Fatalf("trying stored the script: %q", stored.Transformation)
			}

			_, body = u.post(action, form("try", `function handler(w) { throw new Error("no " + w.type); }`, `{}`))
			if e := html.UnescapeString(body); !strings.Contains(e, `<span id="transformation-error">`) || !strings.Contains(e, "no order.paid") {
				t.Errorf("a script that throws: %.3000s", body)
			}
			_, body = u.post(action, form("try", script, `{amount: 7}`))
			if msg, marked := fieldError(body, "sample-data"); !strings.Contains(msg, "not JSON") || !marked {
				t.Errorf("data that is not JSON: %q next to it (marked: %v)", msg, marked)
			}

			status, body = u.post(action, form("save", script, `{}`))
			if status != http.StatusOK || !strings.Contains(body, "Transformation saved.") {
				t.Fatalf("saving: %d %.2000s", status, body)
			}
			if stored, _ := r.s.subs.Get(sub.ID); stored.Transformation != script {
				t.Fatalf("stored %q, want the script", stored.Transformation)
			}
			_, body = u.get(page)
			if !strings.Contains(html.UnescapeString(body), ">"+script+"</textarea>") {
				t.Errorf("the page does not show the script saved")
			}

			_, body = u.post(action, form("save", "function handler(w) { return w", `{}`))
			msg, marked := fieldError(body, "transformation-script")
			if msg == "" || !marked || !strings.Contains(body, "Not saved:") || !strings.Contains(html.UnescapeString(body), ">function handler(w) { return w</textarea>") {
				t.Errorf("a script that does not compile: %q next to it (marked: %v): %.3000s", msg, marked, body)
			}
			if stored, _ := r.s.subs.Get(sub.ID); stored.Transformation != script {
				t.Fatalf("a script that does not compile was stored: %q", stored.Transformation)
			}
			_, body = u.post(action, form("try", "function handler(w) { return w", `{}`))
			if msg, marked := fieldError(body, "transformation-script"); msg == "" || !marked {
				t.Errorf("trying a script that does not compile: %q next to it (marked: %v)", msg, marked)
			}

			if _, body = u.post(action, form("save", "  ", `{}`)); !strings.Contains(body, "Transformation removed.") {
				t.Errorf("saving an empty script: %.2000s", body)
			}
			if stored, _ := r.s.subs.Get(sub.ID); stored.Transformation != "" {
				t.Fatalf("an empty script did not remove it: %q", stored.Transformation)
			}
		})
	}
}
