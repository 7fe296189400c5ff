package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/api/alert"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/runtime/testkit/smtptest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestAlertChannelMails: an endpoint failing until its breaker opens sends
// its tenant's email channel exactly one mail for the digest window, then
// one "recovered" when the breaker closes, with no subscription naming the
// operational events; another tenant's channel hears nothing, and the
// operators' channel (a JSON webhook) hears of both transitions.
func TestAlertChannelMails(t *testing.T) {
	e := newEnv(t)
	url, prefix := redistest.Shared(t)
	// A Redis call that times out fails open and its breaker transition,
	// so its notice, is missed: a loaded machine must not make the test
	// about that (the retry interval is at least the timeout).
	e.withRedis(url, prefix, map[string]string{"WEBHOOKS_BREAKER_MIN_CALLS": "3", "WEBHOOKS_BREAKER_SLEEP": "2s",
		"WEBHOOKS_BREAKER_PROBES": "1", "WEBHOOKS_REDIS_TIMEOUT": "1s", "WEBHOOKS_REDIS_RETRY_INTERVAL": "1s"})
	mail := smtptest.New(t, "alerter", "mail-pass-123")
	ca := filepath.Join(t.TempDir(), "smtp-ca.pem")
	if err := os.WriteFile(ca, mail.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"WEBHOOKS_SMTP_ADDR": mail.Addr, "WEBHOOKS_SMTP_FROM": "alerts@hookpipe.example",
		"WEBHOOKS_SMTP_USERNAME": "alerter", "WEBHOOKS_SMTP_PASSWORD": "mail-pass-123", "WEBHOOKS_SMTP_CA": ca} {
		e.vars[k] = v
	}
	var (
		opsMu   sync.Mutex
		opsGot  []alert.Digest
		opsPost = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			var d alert.Digest
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &d); err != nil {
				t.Errorf("operators' digest %s: %v", b, err)
			}
			opsMu.Lock()
			opsGot = append(opsGot, d)
			opsMu.Unlock()
		}))
	)
	t.Cleanup(opsPost.Close)

	r := newReceiver(t)
	var bad atomic.Int32
	bad.Store(http.StatusInternalServerError)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if q.Sub == "bad" {
			return int(bad.Load())
		}
		return http.StatusNoContent
	})
	for _, s := range []topics.Subscription{
		{ID: "bad", Tenant: "acme", URL: r.url("bad"), EventTypes: []string{"*"}, Enabled: true, RetrySchedule: []string{"1s", "1s", "1s", "1s", "1s", "1s"}},
		{ID: "fine", Tenant: "globex", URL: r.url("fine"), EventTypes: []string{"*"}, Enabled: true},
	} {
		r.trust(e.subscribe(s))
	}
	base := e.startAPI()
	for _, ch := range []map[string]any{
		{"tenant": "acme", "kind": "email", "to": []string{"ops@acme.example"}, "digest_ms": 1000},
		{"tenant": "globex", "kind": "email", "to": []string{"ops@globex.example"}, "digest_ms": 1000},
		{"kind": "webhook", "url": opsPost.URL + "/alerts", "digest_ms": 1000},
	} {
		call(t, "POST", base+"/v1/alert-channels", apiAdminKey, ch, nil, http.StatusCreated)
	}
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()

	mailsTo := func(to string) []smtptest.Mail {
		var out []smtptest.Mail
		for _, m := range mail.Mails() {
			if strings.Join(m.To, ",") == to {
				out = append(out, m)
			}
		}
		return out
	}
	for i := range 4 {
		e.publish(topics.Event{ID: fmt.Sprintf("evt_failing_%d", i), Type: "order.created", Tenant: "acme", Data: json.RawMessage(`{}`)})
		e.publish(topics.Event{ID: fmt.Sprintf("evt_fine_%d", i), Type: "order.created", Tenant: "globex", Data: json.RawMessage(`{}`)})
	}
	wait(t, 60*time.Second, "the failing mail", func() bool { return len(mailsTo("ops@acme.example")) >= 1 })
	bad.Store(http.StatusOK)
	wait(t, 60*time.Second, "the recovered mail", func() bool { return len(mailsTo("ops@acme.example")) >= 2 })
	wait(t, 60*time.Second, "the failing events delivered", func() bool {
		n := 0
		for _, q := range r.got() {
			if q.Sub == "bad" {
				n++
			}
		}
		return n == 4
	})
	wait(t, 30*time.Second, "the operators' digests", func() bool {
		opsMu.Lock()
		defer opsMu.Unlock()
		n := 0
		for _, d := range opsGot {
			n += d.Total
		}
		return n >= 2
	})

	got := mailsTo("ops@acme.example")
	if len(got) != 2 {
		t.Fatalf("acme got %d mails, want 2 (failing, then recovered)", len(got))
	}
	for i, want := range []string{"Subject: [hookpipe] tenant acme: 1 endpoint.failing", "Subject: [hookpipe] tenant acme: 1 endpoint.recovered"} {
		if body := string(got[i].Data); !strings.Contains(body, want) || !strings.Contains(body, "subscription bad") || got[i].User != "alerter" {
			t.Errorf("mail %d, want %q:\n%s", i, want, body)
		}
	}
	if n := len(mailsTo("ops@globex.example")); n != 0 {
		t.Errorf("globex got %d mails about another tenant", n)
	}
	opsMu.Lock()
	defer opsMu.Unlock()
	counts := map[string]int{}
	for _, d := range opsGot {
		if d.Tenant != "" {
			t.Errorf("operators' digest of tenant %q", d.Tenant)
		}
		for typ, n := range d.Counts {
			counts[typ] += n
		}
		for _, n := range d.Notices {
			if n.Tenant != "acme" || n.Data.SubscriptionID != "bad" {
				t.Errorf("operators' notice %+v", n)
			}
		}
	}
	if counts[topics.NoticeFailing] != 1 || counts[topics.NoticeRecovered] != 1 || len(counts) != 2 {
		t.Errorf("operators heard %v, want one failing and one recovered", counts)
	}
}
