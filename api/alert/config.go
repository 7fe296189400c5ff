// Package alert tells tenants' owners and operators of operational
// events (topics.Notice) through their alert channels (topics.AlertChannel):
// email, a Slack-compatible incoming webhook, or a JSON webhook. The
// Alerter consumes the notices topic in a consumer group of its own,
// gathers each channel's notices over its digest window into one Digest,
// sends it, and then commits: at least once, a crash or a rebalance
// repeating at most the digests not sent yet.
package alert

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// TLS modes of the SMTP connection.
const (
	// TLSStartTLS upgrades the connection with STARTTLS and refuses a
	// server that does not offer it (port 587).
	TLSStartTLS = "starttls"
	// TLSImplicit speaks TLS from the first byte (port 465).
	TLSImplicit = "tls"
	// TLSNone sends in the clear: a relay on the local network only; net/smtp
	// then refuses to authenticate except to localhost.
	TLSNone = "none"
)

// Config is how the alerter sends: the SMTP server of email channels, and
// its consumer group.
type Config struct {
	SMTPAddr     string `env:"WEBHOOKS_SMTP_ADDR" desc:"host:port of the SMTP server email alert channels send through; empty: email channels cannot be created."`
	SMTPFrom     string `env:"WEBHOOKS_SMTP_FROM" desc:"The From address of alert mails (alerts@example.com); required with WEBHOOKS_SMTP_ADDR."`
	SMTPUsername string `env:"WEBHOOKS_SMTP_USERNAME" desc:"User of the SMTP server's AUTH PLAIN; empty: no authentication."`
	SMTPPassword string `env:"WEBHOOKS_SMTP_PASSWORD" desc:"Password of WEBHOOKS_SMTP_USERNAME. Never logged."`
	SMTPTLS      string `env:"WEBHOOKS_SMTP_TLS" envDefault:"starttls" validate:"oneof=starttls tls none" desc:"starttls (upgrade, required; port 587), tls (TLS from the start; port 465) or none (plain: a local relay only, and no authentication but to localhost)."`
	SMTPCA       string `env:"WEBHOOKS_SMTP_CA" desc:"PEM file of the CA certificates that sign the SMTP server's; empty: the system's roots."`
	// Group is the alerter's consumer group: the replica assigned the
	// notices topic's partition sends the alerts.
	Group string `env:"WEBHOOKS_ALERTER_GROUP" envDefault:"webhooks-alerter" desc:"Consumer group of the API replicas' alerter: the one assigned the notices topic's partition sends the alert channels' digests."`
	// SendTimeout bounds one attempt at sending a digest.
	SendTimeout time.Duration `env:"WEBHOOKS_ALERT_SEND_TIMEOUT" envDefault:"15s" validate:"gt=0" desc:"Bounds one attempt at sending an alert digest (a mail, a POST); a digest is tried three times, a minute apart, then dropped and counted."`
}

// Validate checks what the tags cannot say (config.Parse checks them),
// naming the variables at fault: the SMTP server's address, the settings
// that go with it, and the CA file.
func (c *Config) Validate() error {
	var errs []error
	if c.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("%s: not host:port: %w", config.Name(c, &c.SMTPAddr), err))
		}
		if a, err := mail.ParseAddress(c.SMTPFrom); err != nil || a.Address == "" {
			errs = append(errs, fmt.Errorf("%s: an email address is required with %s", config.Name(c, &c.SMTPFrom), config.Name(c, &c.SMTPAddr)))
		}
	}
	if (c.SMTPUsername == "") != (c.SMTPPassword == "") {
		errs = append(errs, fmt.Errorf("%s and %s go together", config.Name(c, &c.SMTPUsername), config.Name(c, &c.SMTPPassword)))
	}
	if c.SMTPCA != "" {
		if _, err := c.roots(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", config.Name(c, &c.SMTPCA), err))
		}
	}
	return errors.Join(errs...)
}

// Email reports whether email channels can send: an SMTP server is set.
func (c *Config) Email() bool { return c.SMTPAddr != "" }

// roots are the CAs of WEBHOOKS_SMTP_CA; nil (the system's) without it.
func (c *Config) roots() (*x509.CertPool, error) {
	if c.SMTPCA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.SMTPCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in the file")
	}
	return pool, nil
}
