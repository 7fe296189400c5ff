package alert

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/smtp"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// Sender sends digests to channels of every kind.
type Sender struct {
	cfg    Config
	client *http.Client
	tls    *tls.Config // of the SMTP connection
}

// NewSender sends mail as cfg says and POSTs with client (the
// deliverer's, whose SSRF guard keeps tenants' URLs off the private
// network). cfg must be valid.
func NewSender(cfg Config, client *http.Client) (*Sender, error) {
	roots, err := cfg.roots()
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(cfg.SMTPAddr)
	return &Sender{cfg: cfg, client: client, tls: &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}}, nil
}

// Send sends d to c, within the send timeout. Errors never hold the
// channel's URL or the SMTP password.
func (s *Sender) Send(ctx context.Context, c *topics.AlertChannel, d *Digest) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	defer cancel()
	switch c.Kind {
	case topics.AlertEmail:
		return s.mail(ctx, c.To, d)
	case topics.AlertSlack:
		return s.post(ctx, c.URL, d.SlackBody())
	case topics.AlertWebhook:
		return s.post(ctx, c.URL, d.JSON())
	}
	return fmt.Errorf("alert channel %s: unknown kind %q", c.ID, c.Kind)
}

// post sends body as JSON; any 2xx is success.
func (s *Sender) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return errors.New("building the request failed") // the error quotes the URL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookpipe-alerter")
	resp, err := s.client.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // *url.Error quotes the URL
		}
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST: answered %d", resp.StatusCode)
	}
	return nil
}

// mail sends d to the recipients through the SMTP server: STARTTLS (or TLS
// from the start) and AUTH PLAIN as configured.
func (s *Sender) mail(ctx context.Context, to []string, d *Digest) error {
	if !s.cfg.Email() {
		return errors.New("no SMTP server (WEBHOOKS_SMTP_ADDR) is configured")
	}
	deadline, _ := ctx.Deadline()
	var conn net.Conn
	var err error
	if s.cfg.SMTPTLS == TLSImplicit {
		conn, err = (&tls.Dialer{Config: s.tls}).DialContext(ctx, "tcp", s.cfg.SMTPAddr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", s.cfg.SMTPAddr)
	}
	if err != nil {
		return fmt.Errorf("SMTP: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	c, err := smtp.NewClient(conn, s.tls.ServerName)
	if err != nil {
		return fmt.Errorf("SMTP greeting: %w", err)
	}
	defer c.Close()
	if s.cfg.SMTPTLS == TLSStartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("SMTP: the server offers no STARTTLS (WEBHOOKS_SMTP_TLS=starttls requires it)")
		}
		if err := c.StartTLS(s.tls); err != nil {
			return fmt.Errorf("SMTP STARTTLS: %w", err)
		}
	}
	if s.cfg.SMTPUsername != "" {
		if err := c.Auth(smtp.PlainAuth("", s.cfg.SMTPUsername, s.cfg.SMTPPassword, s.tls.ServerName)); err != nil {
			return fmt.Errorf("SMTP AUTH: %w", err)
		}
	}
	if err := c.Mail(s.cfg.SMTPFrom); err != nil {
		return fmt.Errorf("SMTP MAIL: %w", err)
	}
	for _, r := range to {
		if err := c.Rcpt(r); err != nil {
			return fmt.Errorf("SMTP RCPT: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	if _, err := w.Write(s.message(to, d, time.Now())); err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	return c.Quit()
}

// message is the mail: headers and the digest's text, quoted-printable,
// with CRLF line ends.
func (s *Sender) message(to []string, d *Digest, now time.Time) []byte {
	var b bytes.Buffer
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	host := "hookpipe"
	if at := strings.LastIndexByte(s.cfg.SMTPFrom, '@'); at >= 0 {
		host = strings.TrimSuffix(s.cfg.SMTPFrom[at+1:], ">")
	}
	for _, h := range [][2]string{
		{"From", s.cfg.SMTPFrom},
		{"To", strings.Join(to, ", ")},
		{"Subject", mime.QEncoding.Encode("utf-8", d.Subject())},
		{"Date", now.Format(time.RFC1123Z)},
		{"Message-ID", "<" + hex.EncodeToString(id) + "@" + host + ">"},
		{"MIME-Version", "1.0"},
		{"Content-Type", "text/plain; charset=utf-8"},
		{"Content-Transfer-Encoding", "quoted-printable"},
	} {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(d.Text(), "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}
