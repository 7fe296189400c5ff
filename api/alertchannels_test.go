package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/topics"
)

// TestAlertChannels: a tenant key manages its tenant's channels, an admin
// any tenant's and the operators'; bad settings answer 422 naming the
// field; a URL is shown masked; the test route sends a test message.
func TestAlertChannels(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	t.Cleanup(hook.Close)
	c := newCluster(t)
	r := c.loopbackReplica()
	acme, globex := r.tenantKey("acme"), r.tenantKey("globex")

	var ch service.AlertChannel
	r.must(http.StatusCreated, "POST", "/v1/alert-channels", acme, map[string]any{"kind": "slack", "url": hook.URL + "/services/T0/B0/s3cret",
		"digest_ms": 60000}, &ch)
	if ch.Tenant != "acme" || ch.Kind != topics.AlertSlack || ch.URL != hook.URL+"/…" || ch.DigestMS != 60000 || !strings.HasPrefix(ch.ID, "ach_") {
		t.Fatalf("created %+v", ch)
	}
	var ops service.AlertChannel
	r.must(http.StatusCreated, "POST", "/v1/alert-channels", adminKey, map[string]any{"kind": "webhook", "url": hook.URL + "/ops",
		"types": []string{topics.NoticeFailing}}, &ops)
	if ops.Tenant != "" || ops.DigestMS != topics.DefaultDigestWindow.Milliseconds() {
		t.Fatalf("operators' channel %+v", ops)
	}

	for _, bad := range []struct {
		name, key string
		body      map[string]any
		location  string
	}{
		{"unknown kind", acme, map[string]any{"kind": "pager"}, "body.kind"},
		{"slack without url", acme, map[string]any{"kind": "slack"}, "body.url"},
		{"url not http", acme, map[string]any{"kind": "webhook", "url": "ftp://example.com/x"}, "body.url"},
		{"email without SMTP", acme, map[string]any{"kind": "email", "to": []string{"ops@acme.example"}}, "body.kind"},
		{"email without recipient", acme, map[string]any{"kind": "email"}, "body.to"},
		{"bad recipient", acme, map[string]any{"kind": "email", "to": []string{"not an address"}}, "body.to"},
		{"ordinary type", acme, map[string]any{"kind": "slack", "url": hook.URL, "types": []string{"order.created"}}, "body.types"},
		{"window too short", acme, map[string]any{"kind": "slack", "url": hook.URL, "digest_ms": 5}, "body.digest_ms"},
		{"another tenant", acme, map[string]any{"kind": "slack", "url": hook.URL, "tenant": "globex"}, "body.tenant"},
	} {
		var p problem
		r.must(http.StatusUnprocessableEntity, "POST", "/v1/alert-channels", bad.key, bad.body, &p)
		if len(p.Errors) != 1 || p.Errors[0].Location != bad.location {
			t.Errorf("%s: %+v, want one error at %s", bad.name, p.Errors, bad.location)
		}
	}

	// A tenant cannot forge operational events to set its channels (and
	// the operators') off.
	var forged problem
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/events", acme, map[string]any{"type": topics.NoticeFailing, "data": map[string]any{}}, &forged)
	if len(forged.Errors) != 1 || forged.Errors[0].Location != "body.type" {
		t.Errorf("a forged operational event: %+v", forged.Errors)
	}

	var list struct{ Data []service.AlertChannel }
	r.must(http.StatusOK, "GET", "/v1/alert-channels", acme, nil, &list)
	if len(list.Data) != 1 || list.Data[0].ID != ch.ID {
		t.Errorf("acme lists %+v", list.Data)
	}
	r.must(http.StatusOK, "GET", "/v1/alert-channels", globex, nil, &list)
	if len(list.Data) != 0 {
		t.Errorf("globex lists %+v", list.Data)
	}
	r.must(http.StatusOK, "GET", "/v1/alert-channels", adminKey, nil, &list)
	if len(list.Data) != 2 {
		t.Errorf("the admin lists %+v", list.Data)
	}
	r.must(http.StatusNotFound, "GET", "/v1/alert-channels/"+ch.ID, globex, nil, nil)
	r.must(http.StatusNotFound, "GET", "/v1/alert-channels/"+ops.ID, acme, nil, nil)
	r.must(http.StatusNotFound, "DELETE", "/v1/alert-channels/"+ch.ID, globex, nil, nil)
	r.must(http.StatusOK, "GET", "/v1/alert-channels/"+ops.ID, adminKey, nil, nil)

	var sent struct {
		Sent  bool
		Error string
	}
	r.must(http.StatusOK, "POST", "/v1/alert-channels/"+ch.ID+"/test", acme, nil, &sent)
	if !sent.Sent {
		t.Fatalf("test message not sent: %s", sent.Error)
	}
	if body := <-got; !strings.Contains(body, `"text"`) || !strings.Contains(body, "test of hookpipe alert channel "+ch.ID) {
		t.Errorf("test message %s", body)
	}

	var changed service.AlertChannel
	r.must(http.StatusOK, "PUT", "/v1/alert-channels/"+ch.ID, acme, map[string]any{"kind": "webhook", "url": hook.URL + "/json",
		"types": []string{topics.NoticeDisabled}}, &changed)
	if changed.ID != ch.ID || changed.Tenant != "acme" || changed.Kind != topics.AlertWebhook || changed.DigestMS != topics.DefaultDigestWindow.Milliseconds() ||
		!changed.CreatedAt.Equal(ch.CreatedAt) {
		t.Errorf("changed %+v", changed)
	}
	var p problem
	r.must(http.StatusUnprocessableEntity, "PUT", "/v1/alert-channels/"+ch.ID, acme, map[string]any{"kind": "webhook"}, &p)
	if len(p.Errors) != 1 || p.Errors[0].Location != "body.url" {
		t.Errorf("a bad change: %+v", p.Errors)
	}
	r.must(http.StatusUnprocessableEntity, "PUT", "/v1/alert-channels/"+ch.ID, adminKey, map[string]any{"kind": "webhook", "url": hook.URL, "tenant": "globex"}, nil)
	r.must(http.StatusNotFound, "PUT", "/v1/alert-channels/"+ch.ID, globex, map[string]any{"kind": "webhook", "url": hook.URL}, nil)

	// A change keeps what it does not give: the URL, seen masked only.
	var patched service.AlertChannel
	r.must(http.StatusOK, "PATCH", "/v1/alert-channels/"+ch.ID, acme, map[string]any{"kind": "slack", "types": []string{}, "digest_ms": 120000}, &patched)
	if patched.Kind != topics.AlertSlack || len(patched.Types) != 0 || patched.DigestMS != 120000 || patched.URL != changed.URL ||
		patched.Tenant != "acme" || !patched.CreatedAt.Equal(ch.CreatedAt) {
		t.Errorf("patched %+v", patched)
	}
	// {} rewrites it as it is (under the first secrets key, say).
	var rewritten service.AlertChannel
	r.must(http.StatusOK, "PATCH", "/v1/alert-channels/"+ch.ID, acme, map[string]any{}, &rewritten)
	if rewritten.Kind != patched.Kind || rewritten.URL != patched.URL || rewritten.DigestMS != patched.DigestMS || !rewritten.UpdatedAt.After(patched.UpdatedAt) {
		t.Errorf("rewritten %+v, was %+v", rewritten, patched)
	}
	r.must(http.StatusOK, "POST", "/v1/alert-channels/"+ch.ID+"/test", acme, nil, &sent)
	if body := <-got; !sent.Sent || !strings.Contains(body, `"text"`) {
		t.Errorf("test message after a change that kept the URL: %v %s", sent, body)
	}
	for _, bad := range []struct {
		body     map[string]any
		location string
	}{
		{map[string]any{"digest_ms": 5}, "body.digest_ms"},
		{map[string]any{"url": "ftp://example.com/x"}, "body.url"},
		{map[string]any{"kind": "email"}, "body.to"}, // the URL goes, recipients are needed
	} {
		var p problem
		r.must(http.StatusUnprocessableEntity, "PATCH", "/v1/alert-channels/"+ch.ID, acme, bad.body, &p)
		if len(p.Errors) != 1 || p.Errors[0].Location != bad.location {
			t.Errorf("change %v: %+v, want one error at %s", bad.body, p.Errors, bad.location)
		}
	}
	r.must(http.StatusNotFound, "PATCH", "/v1/alert-channels/"+ch.ID, globex, map[string]any{"digest_ms": 60000}, nil)

	r.must(http.StatusNoContent, "DELETE", "/v1/alert-channels/"+ch.ID, acme, nil, nil)
	r.must(http.StatusNotFound, "GET", "/v1/alert-channels/"+ch.ID, acme, nil, nil)
}

// TestAlertPages: the portal lists, adds, tests and deletes its tenant's
// alert channels only; the dashboard sees every tenant's and adds the
// operators'.
func TestAlertPages(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	c := newCluster(t)
	r := c.loopbackReplica()
	var theirs service.AlertChannel
	r.must(http.StatusCreated, "POST", "/v1/alert-channels", adminKey, map[string]any{"tenant": "globex", "kind": "slack", "url": hook.URL}, &theirs)

	portal := r.portalLink("acme")
	u := r.uiClient()
	token := u.csrf(portal + "/alerts")
	status, body := u.post(portal+"/alerts", url.Values{"_csrf": {token}, "kind": {"webhook"}, "url": {hook.URL + "/acme/s3cret"},
		"digest_minutes": {"10"}, "tenant": {"globex"}})
	if status != http.StatusOK || !strings.Contains(body, "Added alert channel") || strings.Contains(body, theirs.ID) || strings.Contains(body, "s3cret") ||
		!strings.Contains(body, "600000 ms") {
		t.Fatalf("adding from the portal: %d %.800s", status, body)
	}
	var list struct{ Data []service.AlertChannel }
	r.must(http.StatusOK, "GET", "/v1/alert-channels", r.tenantKey("acme"), nil, &list)
	if len(list.Data) != 1 || list.Data[0].Tenant != "acme" {
		t.Fatalf("acme's channels %+v (the portal's form may not name another tenant)", list.Data)
	}
	mine := list.Data[0].ID
	if status, body := u.post(portal+"/alerts/"+mine+"/test", url.Values{"_csrf": {token}}); status != http.StatusOK || !strings.Contains(body, "Sent a test message") {
		t.Errorf("test from the portal: %d %.500s", status, body)
	}
	if status, body := u.post(portal+"/alerts", url.Values{"_csrf": {token}, "kind": {"slack"}}); status != http.StatusOK || !strings.Contains(body, "Not added") ||
		!strings.Contains(body, "url: required") {
		t.Errorf("a bad channel from the portal: %d %.500s", status, body)
	}
	// Changed from its page: what the form leaves empty (the URL, shown
	// masked) is kept.
	if status, body := u.get(portal + "/alerts/" + mine); status != http.StatusOK || !strings.Contains(body, hook.URL+"/…") ||
		strings.Contains(body, "s3cret") || !strings.Contains(body, `value="10"`) {
		t.Errorf("a channel's page in the portal: %d %.800s", status, body)
	}
	if status, body := u.post(portal+"/alerts/"+mine+"/edit", url.Values{"_csrf": {token}, "kind": {"slack"}, "url": {""},
		"types": {topics.NoticeFailing}, "digest_minutes": {"2"}}); status != http.StatusOK || !strings.Contains(body, "Saved alert channel") {
		t.Fatalf("changing a channel from the portal: %d %.800s", status, body)
	}
	var changed service.AlertChannel
	r.must(http.StatusOK, "GET", "/v1/alert-channels/"+mine, r.tenantKey("acme"), nil, &changed)
	if changed.Kind != topics.AlertSlack || len(changed.Types) != 1 || changed.Types[0] != topics.NoticeFailing || changed.DigestMS != 120000 ||
		changed.URL != hook.URL+"/…" {
		t.Errorf("changed from the portal: %+v", changed)
	}
	if status, body := u.post(portal+"/alerts/"+mine+"/test", url.Values{"_csrf": {token}}); status != http.StatusOK || !strings.Contains(body, "Sent a test message") {
		t.Errorf("test after a change that kept the URL: %d %.500s", status, body)
	}
	for _, bad := range []struct{ field, value, says string }{
		{"digest_minutes", "soon", "the digest window is a number of minutes"},
		{"types", "order.created", "types:"},
	} {
		form := url.Values{"_csrf": {token}, "kind": {"slack"}, bad.field: {bad.value}}
		if status, body := u.post(portal+"/alerts/"+mine+"/edit", form); status != http.StatusOK || !strings.Contains(body, "Not saved: ") ||
			!strings.Contains(body, bad.says) || !strings.Contains(body, `id="alert-form"`) {
			t.Errorf("a bad change (%s) from the portal: %d %.800s", bad.field, status, body)
		}
	}
	if status, _ := u.get(portal + "/alerts/" + theirs.ID); status != http.StatusNotFound {
		t.Errorf("globex's channel's page in acme's portal: %d", status)
	}
	if _, body := u.post(portal+"/alerts/"+theirs.ID+"/edit", url.Values{"_csrf": {token}, "kind": {"webhook"}}); strings.Contains(body, "Saved") {
		t.Errorf("changing globex's channel from acme's portal: %.300s", body)
	}
	if status, body := u.post(portal+"/alerts/"+theirs.ID+"/delete", url.Values{"_csrf": {token}}); !strings.Contains(body, "Not deleted") {
		t.Errorf("deleting globex's channel from acme's portal: %d %.300s", status, body)
	}
	if status, body := u.post(portal+"/alerts/"+mine+"/delete", url.Values{"_csrf": {token}}); status != http.StatusOK || !strings.Contains(body, "Deleted alert channel") {
		t.Errorf("delete from the portal: %d %.300s", status, body)
	}

	admin := r.uiClient()
	admin.signIn(adminKey)
	token = admin.csrf("/ui/alerts")
	status, body = admin.post("/ui/alerts", url.Values{"_csrf": {token}, "kind": {"slack"}, "url": {hook.URL}})
	if status != http.StatusOK || !strings.Contains(body, "<em>operators</em>") || !strings.Contains(body, theirs.ID) {
		t.Fatalf("the dashboard's alerts: %d %.800s", status, body)
	}
}
