package api

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/deliverer"
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
	env := maps.Clone(c.env)
	env[deliverer.EnvAllowCIDRs] = "127.0.0.0/8"
	r := c.replicaWith(env)
	acme, globex := r.tenantKey("acme"), r.tenantKey("globex")

	var ch AlertChannel
	r.must(http.StatusCreated, "POST", "/v1/alert-channels", acme, map[string]any{"kind": "slack", "url": hook.URL + "/services/T0/B0/s3cret",
		"digest_ms": 60000}, &ch)
	if ch.Tenant != "acme" || ch.Kind != topics.AlertSlack || ch.URL != hook.URL+"/…" || ch.DigestMS != 60000 || !strings.HasPrefix(ch.ID, "ach_") {
		t.Fatalf("created %+v", ch)
	}
	var ops AlertChannel
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

	var list struct{ Data []AlertChannel }
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

	r.must(http.StatusNoContent, "DELETE", "/v1/alert-channels/"+ch.ID, acme, nil, nil)
	r.must(http.StatusNotFound, "GET", "/v1/alert-channels/"+ch.ID, acme, nil, nil)
}
