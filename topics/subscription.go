package topics

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Ordering modes of a subscription.
const (
	OrderingNone = "none" // deliveries never wait for each other
	OrderingKey  = "key"  // deliveries with the same event key are attempted in publish order
)

// DefaultTimeout is the HTTP timeout of a subscription without timeout_ms.
const DefaultTimeout = 15 * time.Second

// MaxURLLength bounds subscription URLs.
const MaxURLLength = 2048

// MaxFilterLength bounds a subscription's filter expression.
const MaxFilterLength = 2048

// MaxTransformationLength bounds a subscription's transformation script.
const MaxTransformationLength = 64 << 10

// SecretPrefix starts every signing secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// RotationGrace is how long a rotated-out secret keeps signing.
const RotationGrace = 24 * time.Hour

// Subscription is the value on the subscriptions topic, keyed by ID; a null
// value deletes it.
type Subscription struct {
	ID            string            `json:"id"`
	Tenant        string            `json:"tenant,omitempty"`
	URL           string            `json:"url"`
	EventTypes    []string          `json:"event_types"`
	Enabled       bool              `json:"enabled"`
	Ordering      string            `json:"ordering,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	TimeoutMS     int               `json:"timeout_ms,omitempty"`
	RateLimitPerS float64           `json:"rate_limit_per_s,omitempty"`
	RetrySchedule []string          `json:"retry_schedule,omitempty"`
	// RetryStatuses are permanent statuses (see PermanentStatus) this
	// subscription retries on its schedule instead of dead-lettering at
	// once: an endpoint that answers 404 while it is being deployed.
	RetryStatuses []int `json:"retry_statuses,omitempty"`
	// Filter, when set, is a CEL expression over the event's type, tenant,
	// key and data that must be true for the subscription to take it
	// (besides its types and tenant). Writers compile it before writing
	// (package runtime/filter); an expression that fails on an event does
	// not match it.
	Filter string `json:"filter,omitempty"`
	// Transformation, when set, is a JavaScript function handler(webhook)
	// run on each delivery before it is sent, which returns the body,
	// headers, method and URL path to send, or cancels the delivery.
	// Writers compile it before writing (package runtime/transform).
	Transformation string `json:"transformation,omitempty"`
	// Partitions spreads the subscription's deliveries over this many
	// partitions of the deliveries topics, by key (see DeliveryKeyOf), so
	// that several deliverers carry a hot subscription; 0 or 1: one
	// partition. Each deliverer lane of it gets that share of the
	// in-flight cap (ADR 0020).
	Partitions int `json:"partitions,omitempty"`
	// Auth, when set, authenticates the deliverer to the endpoint (its
	// secrets sealed at rest like Secret).
	Auth *EndpointAuth `json:"auth,omitempty"`
	// Destination, when set and not of type http, is where deliveries go
	// instead of an HTTP POST: a Kafka topic, a NATS subject, a RabbitMQ
	// exchange or an SQS queue (its secrets sealed at rest like Secret).
	// URL is then the destination's Address.
	Destination *Destination `json:"destination,omitempty"`
	// Batch, when set, sends the deliveries in batches: one request, a
	// JSON array, for up to Batch.MaxEvents of them (ADR 0040).
	Batch *Batch `json:"batch,omitempty"`
	// Secret signs every request. PreviousSecret also signs until
	// PreviousSecretUntil, so receivers can roll over without dropping.
	Secret              string    `json:"secret"`
	PreviousSecret      string    `json:"previous_secret,omitempty"`
	PreviousSecretUntil time.Time `json:"previous_secret_until,omitzero"`
	DisabledReason      string    `json:"disabled_reason,omitempty"`
	CreatedAt           time.Time `json:"created_at,omitzero"`
	UpdatedAt           time.Time `json:"updated_at,omitzero"`
}

// DecodeSubscription decodes and validates a subscription value whose
// secrets are in plaintext (DecodeSubscriptionWith a nil keyring). A missing
// "enabled" means enabled.
func DecodeSubscription(b []byte) (Subscription, error) {
	return DecodeSubscriptionWith(b, nil)
}

// DecodeSubscriptionWith decodes and validates a subscription value,
// opening sealed secrets ("enc:v1:...") with k. Plaintext "whsec_" secrets
// are accepted too (records written before a key was configured). A sealed
// secret that k cannot open (no keyring, unknown key id, altered, or copied
// from another subscription) is an error wrapping ErrInvalid.
func DecodeSubscriptionWith(b []byte, k *Keyring) (Subscription, error) {
	s, _, err := DecodeSubscriptionPlain(b, k)
	return s, err
}

// DecodeSubscriptionPlain is DecodeSubscriptionWith that also reports
// whether a keyring is given but a secret was stored in plaintext.
func DecodeSubscriptionPlain(b []byte, k *Keyring) (s Subscription, plaintext bool, err error) {
	s = Subscription{Enabled: true}
	if err := decodeStrict("subscription", b, &s); err != nil {
		return Subscription{}, false, err
	}
	// Empty is absent, as Encode writes it (omitempty): one value, however
	// it was spelled.
	if len(s.Headers) == 0 {
		s.Headers = nil
	}
	if len(s.RetrySchedule) == 0 {
		s.RetrySchedule = nil
	}
	if len(s.RetryStatuses) == 0 {
		s.RetryStatuses = nil
	}
	fields := secretFields{{"secret", &s.Secret}, {"previous_secret", &s.PreviousSecret}}
	if s.Auth != nil {
		fields = append(fields, s.Auth.secrets()...)
	}
	if s.Destination != nil {
		fields = append(fields, s.Destination.secrets()...)
	}
	for _, f := range fields {
		if !isSealed(*f.v) {
			plaintext = plaintext || (k != nil && *f.v != "")
			continue
		}
		if *f.v, err = k.open(s.ID, f.name, *f.v); err != nil {
			return Subscription{}, false, err
		}
	}
	return s, plaintext, s.Validate()
}

// reservedHeaders cannot be set by a subscription: they are the signature,
// the framing, or hop-by-hop.
var reservedHeaders = map[string]bool{
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
	"Content-Type": true, "Content-Length": true, "Host": true, "Connection": true,
	"Transfer-Encoding": true, "Te": true, "Upgrade": true, "Trailer": true,
	"Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
}

// EncodeWith renders the record value with the secrets sealed by k (see
// Keyring); every call seals with a fresh nonce. With a nil keyring it is
// Encode. Components write subscriptions with EncodeWith.
func (s *Subscription) EncodeWith(k *Keyring) []byte {
	if k == nil {
		return s.Encode()
	}
	w := *s
	seal := func(name, v string) string { return k.seal(s.ID, name, v) }
	w.Secret = k.seal(s.ID, "secret", s.Secret)
	if s.PreviousSecret != "" {
		w.PreviousSecret = k.seal(s.ID, "previous_secret", s.PreviousSecret)
	}
	if s.Auth != nil {
		a := *s.Auth
		a.secrets().replace(seal)
		w.Auth = &a
	}
	if s.Destination != nil {
		d := *s.Destination
		d.secrets().replace(seal)
		w.Destination = &d
	}
	return w.Encode()
}

// Encode renders the record value with the secrets in plaintext: for
// development (WEBHOOKS_DEV=1) and tests; see EncodeWith.
func (s *Subscription) Encode() []byte {
	return encodeRecord(s)
}

// Validate checks every field.
func (s Subscription) Validate() error {
	if err := checkID("subscription", "id", s.ID); err != nil {
		return err
	}
	if s.Tenant != "" {
		if err := checkID("subscription", "tenant", s.Tenant); err != nil {
			return err
		}
	}
	if err := s.validateDestination(); err != nil {
		return err
	}
	if err := s.validateBatch(); err != nil {
		return err
	}
	if len(s.EventTypes) == 0 {
		return invalid("subscription", "event_types", "at least one pattern is required")
	}
	for _, p := range s.EventTypes {
		if err := ValidatePattern(p); err != nil {
			return err
		}
	}
	switch s.Ordering {
	case "", OrderingNone, OrderingKey:
	default:
		return invalid("subscription", "ordering", "%q is not none or key", s.Ordering)
	}
	seen := map[string]bool{}
	for k, v := range s.Headers {
		if seen[http.CanonicalHeaderKey(k)] {
			return invalid("subscription", "headers", "%q is given twice (header names are case-insensitive)", k)
		}
		seen[http.CanonicalHeaderKey(k)] = true
		if !validHeaderName(k) {
			return invalid("subscription", "headers", "%q is not a valid header name", k)
		}
		if reservedHeaders[http.CanonicalHeaderKey(k)] {
			return invalid("subscription", "headers", "%q is set by the deliverer", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return invalid("subscription", "headers", "value of %q has a control character", k)
		}
	}
	if s.TimeoutMS < 0 || s.TimeoutMS > 300_000 {
		return invalid("subscription", "timeout_ms", "%d is not within 0..300000", s.TimeoutMS)
	}
	if s.RateLimitPerS < 0 || math.IsNaN(s.RateLimitPerS) || math.IsInf(s.RateLimitPerS, 0) {
		return invalid("subscription", "rate_limit_per_s", "must be a finite number, not negative")
	}
	if _, err := ParseSchedule(s.RetrySchedule); err != nil {
		return err
	}
	if s.Auth != nil {
		if err := s.Auth.validate(); err != nil {
			return err
		}
		if s.Auth.Type == AuthMTLS && !strings.HasPrefix(s.URL, "https://") {
			return invalid("subscription", "auth.type", "mtls needs an https endpoint")
		}
		for k := range s.Headers {
			if http.CanonicalHeaderKey(k) == "Authorization" {
				return invalid("subscription", "headers", "Authorization is set by auth")
			}
		}
	}
	if s.Partitions < 0 || s.Partitions > MaxPartitions {
		return invalid("subscription", "partitions", "%d is not within 1..%d", s.Partitions, MaxPartitions)
	}
	if len(s.Transformation) > MaxTransformationLength {
		return invalid("subscription", "transformation", "%d bytes; at most %d", len(s.Transformation), MaxTransformationLength)
	}
	if len(s.Filter) > MaxFilterLength {
		return invalid("subscription", "filter", "%d characters; at most %d", len(s.Filter), MaxFilterLength)
	}
	for i, code := range s.RetryStatuses {
		if !PermanentStatus(code) {
			return invalid("subscription", "retry_statuses", "%d is not a permanent status (%s); others are retried anyway", code, permanentList())
		}
		if slices.Contains(s.RetryStatuses[:i], code) {
			return invalid("subscription", "retry_statuses", "%d is given twice", code)
		}
	}
	if err := ValidateSecret(s.Secret); err != nil {
		return err
	}
	if s.PreviousSecret != "" {
		if err := ValidateSecret(s.PreviousSecret); err != nil {
			return invalid("subscription", "previous_secret", "%v", err)
		}
	}
	return nil
}

// maxQueueHeaders bounds the headers of a subscription delivering to SQS:
// a message carries at most 10 attributes, and the content type and the
// three Standard Webhooks headers take four.
const maxQueueHeaders = 6

// validateDestination checks the URL of an HTTP endpoint, or the
// destination and that URL is its Address.
func (s *Subscription) validateDestination() error {
	d := s.Destination
	if d.IsHTTP() {
		if d != nil {
			if err := d.validate(); err != nil {
				return err
			}
		}
		return ValidateURL(s.URL)
	}
	if err := d.validate(); err != nil {
		return err
	}
	if s.URL != d.Address() {
		return invalid("subscription", "url", "a %s destination's URL is its address, %q", d.Type, d.Address())
	}
	if s.Auth != nil {
		return invalid("subscription", "auth", "is for HTTP endpoints; a %s destination has credentials of its own", d.Type)
	}
	if d.Type == DestinationSQS && len(s.Headers) > maxQueueHeaders {
		return invalid("subscription", "headers", "an SQS message carries at most %d of them", maxQueueHeaders)
	}
	return nil
}

// Target sets s's destination and its URL: the destination's address, or
// url for an HTTP endpoint.
func (s *Subscription) Target(d *Destination, url string) {
	s.Destination = d
	if d.IsHTTP() {
		s.URL = url
		return
	}
	s.URL = d.Address()
}

// ValidateURL accepts absolute http(s) URLs with a host, without userinfo,
// at most MaxURLLength long.
func ValidateURL(raw string) error {
	if raw == "" {
		return invalid("subscription", "url", "required")
	}
	if len(raw) > MaxURLLength {
		return invalid("subscription", "url", "longer than %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The reason without the URL, which may hold credentials.
		reason := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			reason = ue.Err.Error()
		}
		return invalid("subscription", "url", "not a valid URL: %s", reason)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid("subscription", "url", "scheme must be http or https")
	}
	if u.Hostname() == "" {
		return invalid("subscription", "url", "has no host")
	}
	if strings.Contains(u.Hostname(), "%") {
		return invalid("subscription", "url", "an IPv6 zone (%%) is not allowed in the host")
	}
	if u.User != nil {
		return invalid("subscription", "url", "must not carry credentials (userinfo)")
	}
	if u.Fragment != "" {
		return invalid("subscription", "url", "must not have a fragment")
	}
	return nil
}

// RedactURL renders a URL for logs: scheme, host and path, without userinfo
// or query.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable url>"
	}
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// ValidatePattern accepts an exact type, "prefix.*" or "*".
func ValidatePattern(p string) error {
	if p == "*" {
		return nil
	}
	t := strings.TrimSuffix(p, ".*")
	if len(t) > 255 || !isType(t) || strings.HasSuffix(t, ".") {
		return invalid("subscription", "event_types", "%q is not a type, prefix.* or *", p)
	}
	return nil
}

// MatchType reports whether an event type matches a pattern: exact, "*", or
// "prefix.*" (matching "prefix.anything", not "prefix" itself).
func MatchType(pattern, typ string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(typ, prefix) && len(typ) > len(prefix)
	}
	return pattern == typ
}

// Matches reports whether this subscription wants the event: enabled, same
// tenant when the subscription has one, and a matching type pattern. An
// operational event (NoticePrefix) matches only patterns that name it
// ("webhook.*" or its type; "*" does not), and never the subscription it
// is about (keyed by its id), so a failing endpoint is never sent the news
// of its own failures.
func (s *Subscription) Matches(e *Event) bool {
	if !s.Enabled {
		return false
	}
	if IsNotice(e.Type) {
		if e.Key == s.ID {
			return false
		}
		if s.Tenant != "" && s.Tenant != e.Tenant {
			return false
		}
		for _, p := range s.EventTypes {
			if strings.HasPrefix(p, NoticePrefix) && MatchType(p, e.Type) {
				return true
			}
		}
		return false
	}
	if s.Tenant != "" && s.Tenant != e.Tenant {
		return false
	}
	for _, p := range s.EventTypes {
		if MatchType(p, e.Type) {
			return true
		}
	}
	return false
}

// permanentStatuses are the HTTP statuses that dead-letter a delivery at
// once: retrying a request the endpoint refuses for what it is does not
// change the answer.
var permanentStatuses = []int{400, 401, 403, 404, 405, 413, 414, 415, 422}

// PermanentStatus reports whether an HTTP status is a permanent failure.
func PermanentStatus(code int) bool { return slices.Contains(permanentStatuses, code) }

func permanentList() string {
	out := make([]string, len(permanentStatuses))
	for i, c := range permanentStatuses {
		out[i] = strconv.Itoa(c)
	}
	return strings.Join(out, ", ")
}

// Retries reports whether the subscription retries a permanent status.
func (s *Subscription) Retries(status int) bool { return slices.Contains(s.RetryStatuses, status) }

// Timeout is the HTTP timeout for one attempt.
func (s *Subscription) Timeout() time.Duration {
	if s.TimeoutMS <= 0 {
		return DefaultTimeout
	}
	return time.Duration(s.TimeoutMS) * time.Millisecond
}

// Secrets returns the secrets that sign a request sent at now: the current
// one, plus the previous one during its grace period.
func (s *Subscription) Secrets(now time.Time) []string {
	if s.PreviousSecret != "" && now.Before(s.PreviousSecretUntil) {
		return []string{s.Secret, s.PreviousSecret}
	}
	return []string{s.Secret}
}

// DeliveryKey is the key of a delivery record for this subscription (see
// DeliveryKeyOf): "<subscription id>/<ordering key>" for ordered
// subscriptions with an event key, else "<subscription id>/<event id>"; a
// spread subscription's id is followed by " <shard>".
func (s *Subscription) DeliveryKey(e *Event) string {
	if s.Ordering == OrderingKey && e.Key != "" {
		return DeliveryKeyOf(s.ID, s.Partitions, e.Key)
	}
	return DeliveryKeyOf(s.ID, s.Partitions, e.ID)
}

// Width is how many partitions the subscription's deliveries spread over:
// Partitions, at least 1.
func (s *Subscription) Width() int { return max(1, s.Partitions) }

// NewSecret returns "whsec_" + base64 of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ValidateSecret accepts "whsec_" + base64 of 24 to 64 bytes.
func ValidateSecret(s string) error {
	_, err := DecodeSecret(s)
	return err
}

// DecodeSecret returns the key bytes of a "whsec_" secret.
func DecodeSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, invalid("subscription", "secret", "must start with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, invalid("subscription", "secret", "not valid base64 after %q", SecretPrefix)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, invalid("subscription", "secret", "must encode 24 to 64 bytes, has %d", len(key))
	}
	return key, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}
