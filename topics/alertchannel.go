package topics

import (
	"errors"
	"net/mail"
	"net/url"
	"slices"
	"time"
)

// Kinds of alert channel: where the alerter sends its digests of
// operational events.
const (
	// AlertEmail mails the digest through the SMTP server the API is
	// configured with (WEBHOOKS_SMTP_*).
	AlertEmail = "email"
	// AlertSlack POSTs {"text": ...} to a Slack-compatible incoming
	// webhook.
	AlertSlack = "slack"
	// AlertWebhook POSTs a JSON document listing the notices.
	AlertWebhook = "webhook"
)

// Bounds of an alert channel record.
const (
	// DefaultDigestWindow is a channel's digest window when it sets none:
	// the notices of five minutes make one message.
	DefaultDigestWindow = 5 * time.Minute
	MinDigestWindow     = time.Second
	MaxDigestWindow     = 24 * time.Hour
	MaxAlertRecipients  = 20
)

// NoticeTypes are the operational event types an alert channel can hear
// of, in the order digests list them.
var NoticeTypes = []string{NoticeFailing, NoticeRecovered, NoticeDisabled, NoticeMessageDead}

// AlertChannel is the value on the alert-channels topic (compacted, keyed
// by the id): where a tenant's owners (or, without a tenant, the
// operators, hearing of every tenant) are told of operational events, in
// digests. A tombstone deletes the channel.
type AlertChannel struct {
	ID string `json:"id"`
	// Tenant is whose notices the channel hears; empty: the operators'
	// channel, hearing of every tenant's.
	Tenant string `json:"tenant,omitempty"`
	// Kind is email, slack or webhook.
	Kind string `json:"kind"`
	// To are the recipients of an email channel.
	To []string `json:"to,omitempty"`
	// URL is where a slack or webhook channel POSTs. It often holds a
	// credential (a Slack incoming webhook's path does): readers show it
	// redacted (RedactURL) and logs never carry it.
	URL string `json:"url,omitempty"`
	// Types are the notice types the channel hears of; empty: all of
	// NoticeTypes.
	Types []string `json:"types,omitempty"`
	// DigestMS is the digest window in milliseconds: the notices of a
	// window are sent as one message at its end. 0: DefaultDigestWindow.
	DigestMS  int64     `json:"digest_ms,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Digest is the channel's digest window.
func (c *AlertChannel) Digest() time.Duration {
	if c.DigestMS == 0 {
		return DefaultDigestWindow
	}
	return time.Duration(c.DigestMS) * time.Millisecond
}

// SetKind makes c a channel of kind, dropping what that kind has no use
// for: the URL of a channel made email, the recipients of one made slack
// or webhook. A change that gives the new kind's settings sets them after.
func (c *AlertChannel) SetKind(kind string) {
	if kind == c.Kind {
		return
	}
	c.Kind = kind
	if kind == AlertEmail {
		c.URL = ""
	} else {
		c.To = nil
	}
}

// MaskedURL is the channel's URL as readers show it: the scheme and host
// only, since an incoming webhook's path is its credential; "" without a
// URL.
func (c *AlertChannel) MaskedURL() string {
	if c.URL == "" {
		return ""
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return "<unparseable url>"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// Hears reports whether the channel is told of an operational event of
// type typ in tenant: a tenant's channel of its tenant's only, the
// operators' of every tenant's, either of the types it names (all when it
// names none).
func (c *AlertChannel) Hears(tenant, typ string) bool {
	if c.Tenant != "" && c.Tenant != tenant {
		return false
	}
	return len(c.Types) == 0 && IsNotice(typ) || slices.Contains(c.Types, typ)
}

// Validate checks every field; an InvalidError names the one at fault.
func (c *AlertChannel) Validate() error {
	if err := checkID("alert channel", "id", c.ID); err != nil {
		return err
	}
	if c.Tenant != "" {
		if err := checkID("alert channel", "tenant", c.Tenant); err != nil {
			return err
		}
	}
	switch c.Kind {
	case AlertEmail:
		if len(c.To) == 0 {
			return invalid("alert channel", "to", "an email channel needs at least one recipient")
		}
		if len(c.To) > MaxAlertRecipients {
			return invalid("alert channel", "to", "more than %d recipients", MaxAlertRecipients)
		}
		for _, to := range c.To {
			a, err := mail.ParseAddress(to)
			if err != nil || a.Name != "" || a.Address != to {
				return invalid("alert channel", "to", "%q is not a bare email address (name@example.com)", to)
			}
		}
		if c.URL != "" {
			return invalid("alert channel", "url", "an email channel has no url")
		}
	case AlertSlack, AlertWebhook:
		if err := ValidateURL(c.URL); err != nil {
			var ie *InvalidError
			if errors.As(err, &ie) {
				return invalid("alert channel", "url", "%s", ie.Reason)
			}
			return err
		}
		if len(c.To) > 0 {
			return invalid("alert channel", "to", "only an email channel has recipients")
		}
	case "":
		return invalid("alert channel", "kind", "required: email, slack or webhook")
	default:
		return invalid("alert channel", "kind", "%q is not email, slack or webhook", c.Kind)
	}
	for _, t := range c.Types {
		if !slices.Contains(NoticeTypes, t) {
			return invalid("alert channel", "types", "%q is not an operational event type (%s, %s, %s, %s)", t,
				NoticeFailing, NoticeRecovered, NoticeDisabled, NoticeMessageDead)
		}
	}
	if c.DigestMS != 0 {
		if d := c.Digest(); d < MinDigestWindow || d > MaxDigestWindow {
			return invalid("alert channel", "digest_ms", "must be between %d and %d (ms), or 0 for the default",
				MinDigestWindow.Milliseconds(), MaxDigestWindow.Milliseconds())
		}
	}
	return nil
}

// alertURLField names a channel's URL in the additional data of its seal,
// so that it opens as nothing else (a subscription's secret included).
const alertURLField = "alert_channel.url"

// EncodeWith renders the record value with the URL (which often holds a
// credential) sealed by k, as subscription secrets are; with a nil keyring
// it is Encode.
func (c *AlertChannel) EncodeWith(k *Keyring) []byte {
	if k == nil || c.URL == "" {
		return c.Encode()
	}
	w := *c
	w.URL = k.seal(c.ID, alertURLField, c.URL)
	return w.Encode()
}

// Encode renders the record value with the URL in plaintext: for
// development (WEBHOOKS_DEV=1) and tests; see EncodeWith.
func (c *AlertChannel) Encode() []byte {
	return encodeRecord(c)
}

// DecodeAlertChannel decodes and validates an alert-channels value
// strictly, its URL unsealed (a sealed one needs DecodeAlertChannelWith).
func DecodeAlertChannel(b []byte) (AlertChannel, error) { return DecodeAlertChannelWith(b, nil) }

// DecodeAlertChannelWith decodes and validates an alert-channels value
// strictly, opening a sealed URL with k; a URL in plaintext is read as it
// is.
func DecodeAlertChannelWith(b []byte, k *Keyring) (AlertChannel, error) {
	var c AlertChannel
	if err := decodeStrict("alert channel", b, &c); err != nil {
		return AlertChannel{}, err
	}
	if isSealed(c.URL) {
		u, err := k.open(c.ID, alertURLField, c.URL)
		if err != nil {
			var ie *InvalidError
			if errors.As(err, &ie) {
				return AlertChannel{}, invalid("alert channel", "url", "%s", ie.Reason)
			}
			return AlertChannel{}, err
		}
		c.URL = u
	}
	return c, c.Validate()
}
