package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/testkit/smtptest"
	"github.com/hookpipe/hookpipe/topics"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func notice(i int, typ, tenant string) Notice {
	return Notice{ID: fmt.Sprintf("ntf_%d", i), Type: typ, Tenant: tenant, Data: topics.Notice{SubscriptionID: "sub_1",
		URL: "https://a.example/hooks", Reason: "endpoint answered 500", EventID: fmt.Sprintf("evt_%d", i),
		EventType: "order.created", At: t0.Add(time.Duration(i) * time.Millisecond)}}
}

// TestDigestOfAStorm: a storm of 1,000 notices makes one message that
// counts them all and lists MaxListed.
func TestDigestOfAStorm(t *testing.T) {
	c := &topics.AlertChannel{ID: "ach_1", Tenant: "acme", Kind: topics.AlertEmail, To: []string{"ops@acme.example"}}
	b := newBatcher()
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = &kgo.Record{Offset: int64(i)}
		typ := topics.NoticeMessageDead
		if i == 0 {
			typ = topics.NoticeFailing
		}
		b.add(recs[i], notice(i, typ, "acme"), []*topics.AlertChannel{c}, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if due, ok := b.next(); !ok || !due.Equal(t0.Add(topics.DefaultDigestWindow)) {
		t.Fatalf("next due %v %v, want a window after the first notice", due, ok)
	}
	if got := b.due(t0.Add(time.Minute)); len(got) != 0 {
		t.Fatalf("%d digests due within the window", len(got))
	}
	if done := b.done(); len(done) != 0 {
		t.Fatalf("%d records done before their digest was sent", len(done))
	}
	got := b.due(t0.Add(topics.DefaultDigestWindow))
	if len(got) != 1 {
		t.Fatalf("%d digests, want one", len(got))
	}
	d := got[0].d
	if d.Total != 1000 || d.Counts[topics.NoticeMessageDead] != 999 || d.Counts[topics.NoticeFailing] != 1 ||
		len(d.Notices) != MaxListed || d.Omitted != 1000-MaxListed {
		t.Fatalf("digest total %d counts %v listed %d omitted %d", d.Total, d.Counts, len(d.Notices), d.Omitted)
	}
	if !d.From.Equal(t0) || !d.To.Equal(t0.Add(999*time.Millisecond)) {
		t.Errorf("digest from %v to %v", d.From, d.To)
	}
	if s := d.Subject(); s != "[hookpipe] tenant acme: 1 endpoint.failing, 999 message.dead" {
		t.Errorf("subject %q", s)
	}
	text := d.Text()
	for _, want := range []string{"webhook.message.dead         999", "webhook.endpoint.failing     1", "... and 980 more"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	b.release(got[0])
	if done := b.done(); len(done) != 1000 || done[999] != recs[999] {
		t.Fatalf("%d records done after the digest was sent, want 1000", len(done))
	}
}

// TestOperatorsChannel: the operators' channel hears of every tenant and
// lists whose each notice is; a tenant's hears of its own only.
func TestOperatorsChannel(t *testing.T) {
	ops := &topics.AlertChannel{ID: "ach_ops", Kind: topics.AlertWebhook, URL: "https://ops.example/alerts", DigestMS: 1000}
	acme := &topics.AlertChannel{ID: "ach_acme", Tenant: "acme", Kind: topics.AlertWebhook, URL: "https://acme.example/alerts", DigestMS: 1000}
	tbl := fakeChannels{ops, acme}
	b := newBatcher()
	for i, tenant := range []string{"acme", "globex", "globex"} {
		b.add(&kgo.Record{Offset: int64(i)}, notice(i, topics.NoticeFailing, tenant), tbl.Hearing(tenant, topics.NoticeFailing), t0)
	}
	byChannel := map[string]*Digest{}
	for _, p := range b.due(t0.Add(time.Second)) {
		byChannel[p.channel] = p.d
	}
	if d := byChannel["ach_ops"]; d == nil || d.Total != 3 || !strings.Contains(d.Text(), "tenant globex") || d.Subject() != "[hookpipe] every tenant: 3 endpoint.failing" {
		t.Errorf("operators' digest %+v", d)
	}
	if d := byChannel["ach_acme"]; d == nil || d.Total != 1 || strings.Contains(d.Text(), "globex") {
		t.Errorf("acme's digest %+v", d)
	}
}

type fakeChannels []*topics.AlertChannel

func (f fakeChannels) Hearing(tenant, typ string) []*topics.AlertChannel {
	var out []*topics.AlertChannel
	for _, c := range f {
		if c.Hears(tenant, typ) {
			out = append(out, c)
		}
	}
	return out
}

func (f fakeChannels) Get(id string) (*topics.AlertChannel, bool) {
	for _, c := range f {
		if c.ID == id {
			return c, true
		}
	}
	return nil, false
}

// TestSlackAndWebhookMessages: a slack channel gets {"text": ...}, a
// webhook channel the digest as JSON; a refusal is an error without the
// URL.
func TestSlackAndWebhookMessages(t *testing.T) {
	bodies := make(chan []byte, 4)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		bodies <- b
		w.WriteHeader(status)
	}))
	defer srv.Close()
	s, err := NewSender(Config{SMTPTLS: TLSStartTLS, SendTimeout: 5 * time.Second}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDigest(&topics.AlertChannel{ID: "ach_1", Tenant: "acme"})
	d.Add(notice(1, topics.NoticeDisabled, "acme"), t0)
	ctx := context.Background()

	slack := &topics.AlertChannel{ID: "ach_1", Tenant: "acme", Kind: topics.AlertSlack, URL: srv.URL + "/services/T0/B0/secret"}
	if err := s.Send(ctx, slack, d); err != nil {
		t.Fatal(err)
	}
	var text map[string]string
	if err := json.Unmarshal(<-bodies, &text); err != nil || len(text) != 1 ||
		!strings.Contains(text["text"], "1 endpoint.disabled") || !strings.Contains(text["text"], "subscription sub_1") {
		t.Errorf("slack body %v (%v)", text, err)
	}

	hook := &topics.AlertChannel{ID: "ach_1", Tenant: "acme", Kind: topics.AlertWebhook, URL: srv.URL + "/alerts"}
	if err := s.Send(ctx, hook, d); err != nil {
		t.Fatal(err)
	}
	var doc Digest
	if err := json.Unmarshal(<-bodies, &doc); err != nil || doc.Total != 1 || doc.Counts[topics.NoticeDisabled] != 1 ||
		len(doc.Notices) != 1 || doc.Notices[0].Data.EventID != "evt_1" || doc.Tenant != "acme" {
		t.Errorf("webhook body %+v (%v)", doc, err)
	}

	status = http.StatusForbidden
	err = s.Send(ctx, slack, d)
	<-bodies
	if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), srv.URL) {
		t.Errorf("refused: %v", err)
	}
}

// TestMailThroughSTARTTLSAndAuth: an email channel's digest goes through
// a real SMTP server, upgraded with STARTTLS and authenticated with AUTH
// PLAIN; a wrong password is an error that does not quote it, and a
// server offering no STARTTLS is refused.
func TestMailThroughSTARTTLSAndAuth(t *testing.T) {
	srv := smtptest.New(t, "alerter", "s3cret-pass")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{SMTPAddr: srv.Addr, SMTPFrom: "alerts@hookpipe.example", SMTPUsername: "alerter", SMTPPassword: "s3cret-pass",
		SMTPTLS: TLSStartTLS, SMTPCA: ca, SendTimeout: 10 * time.Second}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := NewSender(cfg, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	c := &topics.AlertChannel{ID: "ach_1", Tenant: "acme", Kind: topics.AlertEmail, To: []string{"ops@acme.example", "cto@acme.example"}}
	d := NewDigest(c)
	d.Add(notice(1, topics.NoticeFailing, "acme"), t0)
	if err := s.Send(context.Background(), c, d); err != nil {
		t.Fatal(err)
	}
	mails := srv.Mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails", len(mails))
	}
	m := mails[0]
	body := string(m.Data)
	if m.User != "alerter" || m.From != "alerts@hookpipe.example" || strings.Join(m.To, ",") != "ops@acme.example,cto@acme.example" ||
		!strings.Contains(body, "Subject: [hookpipe] tenant acme: 1 endpoint.failing") || !strings.Contains(body, "webhook.endpoint.failing") ||
		!strings.Contains(body, "\r\n\r\n") {
		t.Errorf("mail %+v:\n%s", m, body)
	}

	bad := cfg
	bad.SMTPPassword = "wrong-pass"
	s, err = NewSender(bad, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), c, d); err == nil || !strings.Contains(err.Error(), "AUTH") || strings.Contains(err.Error(), "wrong-pass") {
		t.Errorf("wrong password: %v", err)
	}

	untrusted := cfg
	untrusted.SMTPCA = ""
	s, err = NewSender(untrusted, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), c, d); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("a server certificate no CA signs: %v", err)
	}
	if len(srv.Mails()) != 1 {
		t.Errorf("%d mails after the failures, want 1", len(srv.Mails()))
	}
}

// TestConfigValidate names the variables at fault, those the tags check
// (config.Parse) and those Validate does alike.
func TestConfigValidate(t *testing.T) {
	env := map[string]string{"WEBHOOKS_SMTP_ADDR": "smtp.example.com", "WEBHOOKS_SMTP_TLS": "ssl", "WEBHOOKS_SMTP_USERNAME": "u",
		"WEBHOOKS_ALERT_SEND_TIMEOUT": "0s"}
	var c Config
	err := errors.Join(config.Parse(func(k string) string { return env[k] }, &c), c.Validate())
	for _, want := range []string{"WEBHOOKS_SMTP_ADDR", "WEBHOOKS_SMTP_FROM", `WEBHOOKS_SMTP_TLS: "ssl" is not starttls, tls or none`,
		"WEBHOOKS_SMTP_PASSWORD", "WEBHOOKS_ALERT_SEND_TIMEOUT must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// TestFailedDigestRetriedThenDropped: a digest that fails is sent again
// after the retry wait, dropped after maxTries, and its records are then
// done; a digest of a deleted channel is not sent.
func TestFailedDigestRetriedThenDropped(t *testing.T) {
	c := &topics.AlertChannel{ID: "ach_1", Tenant: "acme", Kind: topics.AlertWebhook, URL: "https://a.example", DigestMS: 1000}
	now := t0
	var tries int
	a := &Alerter{chans: fakeChannels{c}, log: zaptest.NewLogger(t), m: newMetrics(prometheus.NewRegistry()), b: newBatcher(),
		now: func() time.Time { return now }, retryWait: time.Minute,
		send: func(context.Context, *topics.AlertChannel, *Digest) error {
			tries++
			return fmt.Errorf("POST: answered 500")
		}}
	r := &kgo.Record{}
	a.b.add(r, notice(1, topics.NoticeFailing, "acme"), a.chans.Hearing("acme", topics.NoticeFailing), now)
	for i := range maxTries {
		now = now.Add(time.Minute)
		a.sendDue(context.Background())
		if tries != i+1 {
			t.Fatalf("after %d waits, %d tries", i+1, tries)
		}
		if done := a.b.done(); (len(done) == 1) != (i == maxTries-1) {
			t.Fatalf("try %d: %d records done", tries, len(done))
		}
	}
	if _, ok := a.b.next(); ok {
		t.Fatal("a digest is still due after being dropped")
	}

	a.chans = fakeChannels{}
	a.b.add(&kgo.Record{}, notice(2, topics.NoticeFailing, "acme"), []*topics.AlertChannel{c}, now)
	now = now.Add(time.Minute)
	a.sendDue(context.Background())
	if tries != maxTries || len(a.b.done()) != 1 {
		t.Fatalf("a deleted channel's digest: %d tries", tries)
	}
}
