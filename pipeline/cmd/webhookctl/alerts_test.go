package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit/smtptest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestAlertChannels: add writes a channel (a tenant's or the operators'),
// its URL sealed with WEBHOOKS_SECRETS_KEY; list shows it with its URL masked, bad settings are a usage error naming
// the field, update changes the settings given and keeps the rest, test sends an email channel's test message through
// WEBHOOKS_SMTP_* (STARTTLS and AUTH), delete removes it.
func TestAlertChannels(t *testing.T) {
	h := newHarness(t, true)
	mail := smtptest.New(t, "ctl", "ctl-pass-1")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, mail.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"WEBHOOKS_SMTP_ADDR": mail.Addr, "WEBHOOKS_SMTP_FROM": "alerts@hookpipe.example",
		"WEBHOOKS_SMTP_USERNAME": "ctl", "WEBHOOKS_SMTP_PASSWORD": "ctl-pass-1", "WEBHOOKS_SMTP_CA": ca} {
		h.env[k] = v
	}
	var added []topics.AlertChannel
	h.json(&added, "alert-channels", "add", "--id", "ach_mail", "--tenant", "acme", "--kind", "email", "--to", "ops@acme.example", "--digest", "10m")
	if len(added) != 1 || added[0].Tenant != "acme" || added[0].DigestMS != 600000 {
		t.Fatalf("added %+v", added)
	}
	h.ok("alert-channels", "add", "--id", "ach_ops", "--kind", "slack", "--url", "https://hooks.example.com/services/T0/B0/s3cret",
		"--types", topics.NoticeDisabled+","+topics.NoticeMessageDead)
	for _, r := range h.records(h.names.AlertChannels()) {
		if strings.Contains(string(r.Value), "s3cret") {
			t.Fatalf("the URL is not sealed at rest: %s", r.Value)
		}
	}
	out := h.ok("alert-channels", "list")
	if !strings.Contains(out, "(operators)") || !strings.Contains(out, "https://hooks.example.com/…") || strings.Contains(out, "s3cret") ||
		!strings.Contains(out, "ops@acme.example") {
		t.Fatalf("list:\n%s", out)
	}
	var list []topics.AlertChannel
	h.json(&list, "alert-channels", "list", "--tenant", "acme")
	if len(list) != 1 || list[0].ID != "ach_mail" {
		t.Fatalf("acme's channels %+v", list)
	}
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--kind", "pager"}, "kind"},
		{[]string{"--kind", "email"}, "to"},
		{[]string{"--kind", "slack", "--url", "ftp://x.example"}, "url"},
		{[]string{"--kind", "slack", "--url", "https://x.example", "--types", "order.created"}, "types"},
		{[]string{"--kind", "slack", "--url", "https://x.example", "--digest", "10ms"}, "digest_ms"},
	} {
		if msg := h.fails(2, append([]string{"alert-channels", "add"}, bad.args...)...); !strings.Contains(msg, bad.says) {
			t.Errorf("add %v: %q does not name %s", bad.args, msg, bad.says)
		}
	}

	// update changes what it is given and keeps the rest: the URL too.
	var updated []topics.AlertChannel
	h.json(&updated, "alert-channels", "update", "ach_ops", "--digest", "15m", "--types", topics.NoticeFailing)
	if len(updated) != 1 || updated[0].Kind != topics.AlertSlack || updated[0].URL != "https://hooks.example.com/…" || updated[0].DigestMS != 900000 ||
		len(updated[0].Types) != 1 || updated[0].Types[0] != topics.NoticeFailing {
		t.Fatalf("updated %+v", updated)
	}
	h.json(&list, "alert-channels", "list")
	for _, ch := range list {
		if ch.ID == "ach_ops" && (ch.URL != "https://hooks.example.com/…" || ch.DigestMS != 900000) {
			t.Fatalf("listed after the update: %+v", ch)
		}
	}
	if msg := h.fails(2, "alert-channels", "update", "ach_ops", "--kind", "email"); !strings.Contains(msg, "to") {
		t.Errorf("made email without recipients: %q does not name to", msg)
	}
	if msg := h.fails(1, "alert-channels", "update", "ach_none", "--digest", "1m"); !strings.Contains(msg, "alert channel ach_none not found") {
		t.Errorf("update of no channel: %q", msg)
	}

	if out := h.ok("alert-channels", "test", "ach_mail"); !strings.Contains(out, "sent a test message") {
		t.Fatalf("test: %s", out)
	}
	mails := mail.Mails()
	if len(mails) != 1 || mails[0].User != "ctl" || !strings.Contains(string(mails[0].Data), "test of alert channel ach_mail") {
		t.Fatalf("mails %+v", mails)
	}

	if out := h.ok("alert-channels", "delete", "ach_mail"); out != "deleted alert channel ach_mail\n" {
		t.Fatalf("delete: %q", out)
	}
	if msg := h.fails(1, "alert-channels", "delete", "ach_mail"); !strings.Contains(msg, "alert channel ach_mail not found") {
		t.Fatalf("delete again: %q", msg)
	}
}
