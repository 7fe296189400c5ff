package api

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/api/internal/session"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// uiClient is a browser-like client: cookies kept, redirects not followed.
type uiClient struct {
	t    *testing.T
	r    *replica
	http *http.Client
}

func (r *replica) uiClient() *uiClient {
	jar, _ := cookiejar.New(nil)
	return &uiClient{t: r.t, r: r, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// get answers the status and body of a GET.
func (u *uiClient) get(path string) (int, string) {
	u.t.Helper()
	resp, err := u.http.Get(u.r.srv.URL + path)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post answers the status and body of a form POST.
func (u *uiClient) post(path string, form url.Values) (int, string) {
	u.t.Helper()
	resp, err := u.http.PostForm(u.r.srv.URL+path, form)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// csrf is the CSRF token of a page.
func (u *uiClient) csrf(path string) string {
	u.t.Helper()
	status, body := u.get(path)
	m := csrfField.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		u.t.Fatalf("GET %s: %d, no CSRF token in %.300s", path, status, body)
	}
	return m[1]
}

// signIn signs the client in with key.
func (u *uiClient) signIn(key string) {
	u.t.Helper()
	token := u.csrf("/ui/login")
	if status, body := u.post("/ui/login", url.Values{"_csrf": {token}, "key": {key}}); status != http.StatusSeeOther {
		u.t.Fatalf("sign in: %d %.300s", status, body)
	}
}

// portalLink creates a portal link of tenant with the admin key.
func (r *replica) portalLink(tenant string) string {
	r.t.Helper()
	var out portalSessionOutput
	r.must(http.StatusCreated, "POST", "/v1/portal-sessions", adminKey, map[string]any{"tenant": tenant}, &out.Body)
	return strings.TrimSuffix(out.Body.URL, "/")
}

// TestDashboardSessions: the dashboard wants a signed-in admin; a tenant
// key, a wrong key, a forged or foreign cookie and a revoked key's session
// are refused, and sign-in itself wants its CSRF token.
func TestDashboardSessions(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	anon := r.uiClient()
	if status, _ := anon.get("/ui/subscriptions"); status != http.StatusSeeOther {
		t.Fatalf("the dashboard without a session: %d, want a redirect to sign in", status)
	}
	if status, _ := anon.post("/ui/login", url.Values{"key": {adminKey}}); status != http.StatusForbidden {
		t.Fatalf("sign in without the form's token: %d, want 403", status)
	}
	tenant := r.uiClient()
	token := tenant.csrf("/ui/login")
	if status, body := tenant.post("/ui/login", url.Values{"_csrf": {token}, "key": {r.tenantKey("acme")}}); status != http.StatusUnauthorized ||
		!strings.Contains(body, "not a valid admin key") {
		t.Fatalf("sign in with a tenant key: %d %.200s", status, body)
	}

	var k APIKey
	r.must(http.StatusCreated, "POST", "/v1/api-keys", adminKey, map[string]string{"name": "ops"}, &k)
	admin := r.uiClient()
	admin.signIn(k.Key)
	if status, body := admin.get("/ui/subscriptions"); status != http.StatusOK || !strings.Contains(body, "Endpoints") {
		t.Fatalf("signed in: %d", status)
	}
	// A session signed by another replica's key is not one.
	other := c.replica()
	stolen := other.uiClient()
	stolen.http.Jar.SetCookies(mustURL(t, other.srv.URL), admin.http.Jar.Cookies(mustURL(t, r.srv.URL+"/ui/")))
	if status, _ := stolen.get("/ui/subscriptions"); status != http.StatusSeeOther {
		t.Fatalf("a session of a replica with another session key: %d, want a redirect to sign in", status)
	}
	r.must(http.StatusNoContent, "DELETE", "/v1/api-keys/"+k.ID, adminKey, nil, nil)
	testkit.WaitFor(t, 10*time.Second, "the session of the revoked key refused", func() bool {
		status, _ := admin.get("/ui/subscriptions")
		return status == http.StatusSeeOther
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUICSRF: every form of the dashboard and the portal is refused
// without its CSRF token (or with another session's), and writes nothing.
func TestUICSRF(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "acme", "url": "https://a.example/",
		"event_types": []string{"*"}}, &sub)
	admin, other := r.uiClient(), r.uiClient()
	admin.signIn(adminKey)
	other.signIn(adminKey)
	otherToken := other.csrf("/ui/subscriptions")
	portal := r.portalLink("acme")
	subsBefore, opsBefore := len(c.records(c.names.Subscriptions())), len(c.records(c.names.Operations()))
	for _, base := range []string{"/ui", portal} {
		for _, path := range []string{"/subscriptions", "/subscriptions/" + sub.ID + "/disable", "/subscriptions/" + sub.ID + "/enable",
			"/subscriptions/" + sub.ID + "/rotate-secret", "/subscriptions/" + sub.ID + "/breaker-reset", "/subscriptions/" + sub.ID + "/test", "/subscriptions/" + sub.ID + "/recover",
			"/subscriptions/" + sub.ID + "/transformation", "/messages/evt_1/retry", "/dlq/redrive"} {
			for name, token := range map[string]string{"no token": "", "another session's": otherToken} {
				form := url.Values{"url": {"https://b.example/"}, "event_types": {"*"}, "subscription_id": {sub.ID},
					"op": {"save"}, "transformation": {"function handler(w) { return w; }"}}
				if token != "" {
					form.Set("_csrf", token)
				}
				if status, _ := admin.post(base+path, form); status != http.StatusForbidden {
					t.Errorf("POST %s%s with %s: %d, want 403", base, path, name, status)
				}
			}
		}
	}
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.placed"}, nil)
	typesBefore := len(c.records(c.names.EventTypes()))
	for _, path := range []string{"/ui/event-types", "/ui/event-types/order.placed/edit", "/ui/event-types/order.placed/delete"} {
		for name, token := range map[string]string{"no token": "", "another session's": otherToken} {
			form := url.Values{"name": {"order.other"}, "validation": {"warn"}, "force": {"true"}}
			if token != "" {
				form.Set("_csrf", token)
			}
			if status, _ := admin.post(path, form); status != http.StatusForbidden {
				t.Errorf("POST %s with %s: %d, want 403", path, name, status)
			}
		}
	}
	if n := len(c.records(c.names.EventTypes())); n != typesBefore {
		t.Errorf("%d event type records written by forged forms", n-typesBefore)
	}
	if status, _ := admin.post("/ui/logout", nil); status != http.StatusForbidden {
		t.Errorf("sign out without a token: %d, want 403", status)
	}
	if n := len(c.records(c.names.Subscriptions())); n != subsBefore {
		t.Errorf("%d subscription records written by forged forms", n-subsBefore)
	}
	if n := len(c.records(c.names.Operations())); n != opsBefore {
		t.Errorf("%d operations written by forged forms", n-opsBefore)
	}
}

// TestPortalIsolation: a portal link shows its tenant's endpoints, dead
// letters and operations only; another tenant's, reached by editing the
// URL, are not found, and its forms cannot touch them; a forged, expired
// or tampered link is refused.
func TestPortalIsolation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	var mine, theirs service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "acme", "url": "https://a.example/",
		"event_types": []string{"*"}}, &mine)
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "globex", "url": "https://g.example/",
		"event_types": []string{"*"}}, &theirs)
	c.deadLetters(2, "acme-dead", mine.ID, "acme")
	c.deadLetters(3, "globex-dead", theirs.ID, "globex")
	var op service.Operation
	r.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", r.tenantKey("globex"), map[string]any{"rate": 1}, &op)

	portal := r.portalLink("acme")
	u := r.uiClient()
	status, body := u.get(portal + "/subscriptions")
	if status != http.StatusOK || !strings.Contains(body, mine.ID) || strings.Contains(body, theirs.ID) {
		t.Fatalf("the portal's endpoints: %d, want %s and not %s", status, mine.ID, theirs.ID)
	}
	status, body = u.get(portal + "/dlq")
	if status != http.StatusOK || !strings.Contains(body, "acme-dead-0") || strings.Contains(body, "globex-dead") {
		t.Fatalf("the portal's dead letters: %d %.500s", status, body)
	}
	for _, path := range []string{"/subscriptions/" + theirs.ID, "/operations/" + op.ID, "/operations/" + op.ID + "/progress"} {
		if status, _ := u.get(portal + path); status != http.StatusNotFound {
			t.Errorf("GET %s%s (globex's) in acme's portal: %d, want 404", "portal", path, status)
		}
	}
	token := u.csrf(portal + "/subscriptions")
	before := len(c.records(c.names.Subscriptions()))
	for _, action := range []string{"disable", "enable", "rotate-secret", "breaker-reset", "test"} {
		if status, _ := u.post(portal+"/subscriptions/"+theirs.ID+"/"+action, url.Values{"_csrf": {token}}); status != http.StatusNotFound {
			t.Errorf("%s globex's endpoint from acme's portal: %d, want 404", action, status)
		}
	}
	if n := len(c.records(c.names.Subscriptions())); n != before {
		t.Errorf("%d subscription records written from another tenant's portal", n-before)
	}
	// A redrive from the portal is its tenant's only.
	if status, _ := u.post(portal+"/dlq/redrive", url.Values{"_csrf": {token}, "subscription_id": {theirs.ID}}); status == http.StatusSeeOther {
		t.Errorf("acme's portal started a redrive of globex's endpoint")
	}
	for name, link := range map[string]string{
		"tampered":             portal[:len(portal)-3] + "abc",
		"not a portal session": "/portal/" + r.s.signer.Sign(session.New(session.Session{Tenant: "globex"}, time.Hour)),
		"a dashboard session":  "/portal/" + r.s.signer.Sign(session.New(session.Session{KeyID: "key_x"}, time.Hour)),
		"garbage":              "/portal/nope",
	} {
		if status, _ := u.get(link + "/subscriptions"); status != http.StatusUnauthorized {
			t.Errorf("portal link (%s): %d, want 401", name, status)
		}
	}
	expired := "/portal/" + r.s.signer.Sign(session.Session{Tenant: "acme", Portal: true, Nonce: "x", Expires: time.Now().Add(-time.Second).Unix()})
	if status, _ := u.get(expired + "/subscriptions"); status != http.StatusUnauthorized {
		t.Errorf("an expired portal link: %d, want 401", status)
	}
	if a := r.do("POST", "/v1/portal-sessions", r.tenantKey("acme"), map[string]any{"tenant": "globex"}); a.status != http.StatusUnprocessableEntity {
		t.Errorf("a tenant key opening another tenant's portal: %d", a.status)
	}
	if a := r.do("POST", "/v1/portal-sessions", adminKey, map[string]any{}); a.status != http.StatusUnprocessableEntity {
		t.Errorf("an admin portal link without a tenant: %d", a.status)
	}
}

// TestPortalMessages: a portal's message log shows its tenant's messages
// only; another tenant's message, by URL or by its retry form, is not
// found.
func TestPortalMessages(t *testing.T) {
	t.Parallel()
	r, _ := recordedAgo(t, time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"p1", "evt_acme", "order.created", "sub_a", "acme", uint32(1), "success", "", uint16(200), 2.0, t0, "", epoch, t0, "acme's answer"},
			{"p2", "evt_globex", "order.created", "sub_g", "globex", uint32(1), "dead", "permanent_4xx", uint16(400), 2.0, t0, "", epoch, t0, "globex's answer"},
		}
	})
	u := r.uiClient()
	portal := r.portalLink("acme")
	status, body := u.get(portal + "/messages?since=1h")
	if status != http.StatusOK || !strings.Contains(body, "evt_acme") || strings.Contains(body, "evt_globex") {
		t.Fatalf("acme's message log: %d, want evt_acme and not evt_globex: %.600s", status, body)
	}
	if status, body := u.get(portal + "/messages/evt_acme"); status != http.StatusOK || !strings.Contains(body, "acme&#39;s answer") {
		t.Fatalf("acme's message: %d %.600s", status, body)
	}
	if status, body := u.get(portal + "/messages/evt_globex"); status != http.StatusNotFound || strings.Contains(body, "globex's answer") {
		t.Fatalf("globex's message in acme's portal: %d", status)
	}
	token := u.csrf(portal + "/subscriptions")
	if status, _ := u.post(portal+"/messages/evt_globex/retry", url.Values{"_csrf": {token}, "subscription_id": {"sub_g"}}); status != http.StatusNotFound {
		t.Fatalf("retrying globex's message from acme's portal: %d, want 404", status)
	}
	if n := len(r.c.records(r.c.names.Deliveries())); n != 0 {
		t.Fatalf("%d deliveries written from another tenant's portal", n)
	}
}
