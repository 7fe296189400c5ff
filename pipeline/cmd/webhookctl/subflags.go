package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/topics"
)

// subFlags are the subscription fields settable by "subscriptions create"
// and "subscriptions update".
type subFlags struct {
	url      string
	events   string
	secret   string
	tenant   string
	ordering string
	headers  headerFlag
	rate     float64
	timeout  time.Duration
	schedule string
	statuses string
	filter   string
	parts    int
	dest     string
	script   string
	auth     string
	authUser string
	authPass string
	authTok  string
	tokenURL string
	clientID string
	clientSc string
	scopes   string
	certFile string
	keyFile  string
	caFile   string
	disabled bool
}

// subFlagNames are the flags define registers, for telling which were given.
var subFlagNames = []string{"url", "events", "secret", "tenant", "ordering", "header", "rate-limit", "http-timeout", "retry-schedule", "retry-statuses", "filter", "partitions", "auth", "auth-username", "auth-password", "auth-token",
	"auth-token-url", "auth-client-id", "auth-client-secret", "auth-scopes", "auth-cert", "auth-key", "auth-ca", "destination", "transformation", "disabled"}

// authValueFlags are the flags that go with --auth.
var authValueFlags = []string{"auth-username", "auth-password", "auth-token", "auth-token-url", "auth-client-id", "auth-client-secret", "auth-scopes", "auth-cert", "auth-key", "auth-ca"}

func (f *subFlags) define(fs *flag.FlagSet, update bool) {
	secretHelp := "signing secret, whsec_ + base64 of 24-64 bytes (default: generated)"
	disabledHelp := "create the subscription disabled"
	if update {
		secretHelp = "replace the secret at once, dropping any previous one (for a leaked secret; rotate-secret keeps the old one signing for a grace period)"
		disabledHelp = "disable (--disabled) or enable (--disabled=false)"
	}
	fs.StringVar(&f.url, "url", "", "endpoint URL, http or https")
	fs.StringVar(&f.events, "events", "", "comma-separated event type patterns: type, prefix.* or *")
	fs.StringVar(&f.secret, "secret", "", secretHelp)
	fs.StringVar(&f.tenant, "tenant", "", "match only this tenant's events (empty: every tenant)")
	fs.StringVar(&f.ordering, "ordering", topics.OrderingNone, "none, or key: deliver events with the same key in publish order")
	fs.Var(&f.headers, "header", "K:V header sent with every request; repeatable; an empty value clears the headers")
	fs.Float64Var(&f.rate, "rate-limit", 0, "max requests per second to the endpoint; 0 is unlimited")
	fs.DurationVar(&f.timeout, "http-timeout", topics.DefaultTimeout, "HTTP timeout of one attempt")
	fs.StringVar(&f.schedule, "retry-schedule", "", "comma-separated delays of the retries after the first attempt (empty: 5s,5m,30m,2h,5h,10h,10h)")
	fs.StringVar(&f.statuses, "retry-statuses", "", "comma-separated permanent statuses to retry instead of dead-lettering at once, e.g. 404 (empty: none)")
	fs.StringVar(&f.filter, "filter", "", `CEL expression over the event (type, tenant, key, data) that must be true for the subscription to take it, e.g. 'data.total > 100 && "vip" in data.tags' (empty: none)`)
	fs.IntVar(&f.parts, "partitions", 1, fmt.Sprintf("spread the deliveries over this many partitions (1-%d), by key, so that as many deliverers carry a hot subscription; each partition's deliverer gets that share of the per-subscription in-flight cap; a change moves keys between partitions (see docs/operations.md, Hot subscriptions)", topics.MaxPartitions))
	fs.StringVar(&f.auth, "auth", "", "endpoint auth: basic (--auth-username, --auth-password), bearer (--auth-token), oauth2 client credentials (--auth-token-url, --auth-client-id, --auth-client-secret, --auth-scopes) or mtls (--auth-cert, --auth-key, --auth-ca); none removes it")
	fs.StringVar(&f.authUser, "auth-username", "", "basic auth username")
	fs.StringVar(&f.authPass, "auth-password", "", "basic auth password (sealed at rest, never printed)")
	fs.StringVar(&f.authTok, "auth-token", "", "bearer token (sealed at rest, never printed)")
	fs.StringVar(&f.tokenURL, "auth-token-url", "", "oauth2 token endpoint URL")
	fs.StringVar(&f.clientID, "auth-client-id", "", "oauth2 client id")
	fs.StringVar(&f.clientSc, "auth-client-secret", "", "oauth2 client secret (sealed at rest, never printed)")
	fs.StringVar(&f.scopes, "auth-scopes", "", "oauth2 scopes, comma-separated")
	fs.StringVar(&f.certFile, "auth-cert", "", "mtls: file holding the client certificate (chain), PEM")
	fs.StringVar(&f.keyFile, "auth-key", "", "mtls: file holding the certificate's private key, PEM (sealed at rest, never printed)")
	fs.StringVar(&f.caFile, "auth-ca", "", "mtls: file holding the CA certificates that sign the endpoint's certificate, PEM (default: the system's)")
	fs.StringVar(&f.dest, "destination", "", `deliver to a Kafka topic, NATS subject, RabbitMQ exchange or SQS queue instead of --url: the destination as JSON, or @file holding it, e.g. '{"type":"kafka","brokers":["b1:9092"],"topic":"hooks"}' (docs/api.md lists the fields; secrets sealed at rest, never printed); http goes back to --url`)
	fs.StringVar(&f.script, "transformation", "", "a JavaScript function handler(webhook) run on each delivery, or @file holding it: it returns the body, headers, method and path to send, or cancels the delivery (docs/api.md; try it with webhookctl transformations test; empty: none)")
	fs.BoolVar(&f.disabled, "disabled", false, disabledHelp)
}

// apply copies the flags for which given reports true into s.
func (f *subFlags) apply(s *topics.Subscription, given func(name string) bool) error {
	if given("url") {
		s.URL = f.url
	}
	if given("events") {
		s.EventTypes = config.SplitList(f.events)
	}
	if given("secret") {
		s.Secret = f.secret
		s.PreviousSecret = ""
		s.PreviousSecretUntil = time.Time{}
	}
	if given("tenant") {
		s.Tenant = f.tenant
	}
	if given("ordering") {
		s.Ordering = f.ordering
	}
	if given("header") {
		s.Headers = f.headers.m
	}
	if given("rate-limit") {
		if math.IsNaN(f.rate) || math.IsInf(f.rate, 0) {
			return usagef("--rate-limit %v: want a number", f.rate)
		}
		s.RateLimitPerS = f.rate
	}
	if given("http-timeout") {
		if f.timeout%time.Millisecond != 0 {
			return usagef("--http-timeout %s: want whole milliseconds", f.timeout)
		}
		s.TimeoutMS = int(f.timeout.Milliseconds())
	}
	if given("retry-schedule") {
		s.RetrySchedule = config.SplitList(f.schedule)
	}
	if given("retry-statuses") {
		s.RetryStatuses = nil
		for _, f := range config.SplitList(f.statuses) {
			code, err := strconv.Atoi(f)
			if err != nil {
				return usagef("--retry-statuses: %q is not an HTTP status", f)
			}
			s.RetryStatuses = append(s.RetryStatuses, code)
		}
	}
	if given("filter") {
		s.Filter = f.filter
	}
	if given("partitions") {
		if f.parts < 1 || f.parts > topics.MaxPartitions {
			return usagef("--partitions %d: want 1 to %d", f.parts, topics.MaxPartitions)
		}
		s.Partitions = f.parts
		if s.Partitions == 1 {
			s.Partitions = 0 // the default, stored as absent
		}
	}
	if f.auth == "" && f.authValues() {
		return usagef("--%s go with --auth", strings.Join(authValueFlags, ", --"))
	}
	if given("auth") {
		s.Auth = nil
		if f.auth != "" && f.auth != "none" {
			a, err := f.endpointAuth()
			if err != nil {
				return err
			}
			s.Auth = a
		}
	}
	if given("destination") {
		d, err := f.destination(s.Destination)
		if err != nil {
			return err
		}
		s.Destination = d
	}
	s.Target(s.Destination, s.URL)
	if given("transformation") {
		src, err := readValue(f.script)
		if err != nil {
			return usagef("--transformation: %v", err)
		}
		s.Transformation = string(src)
	}
	if given("disabled") {
		s.Enabled = !f.disabled
		if s.Enabled {
			s.DisabledReason = ""
		}
	}
	return nil
}

// checkURL refuses a malformed --url (not an absolute http(s) URL with a
// host, longer than topics.MaxURLLength, or with userinfo) with one line
// naming the problem, never echoing the URL (it may hold credentials), and
// warns on stderr when it is plain http.
func (c *cli) checkURL(raw string) error {
	if err := topics.ValidateURL(raw); err != nil {
		var ie *topics.InvalidError
		if errors.As(err, &ie) {
			return usagef("--url: %s", ie.Reason)
		}
		return usagef("--url: %v", err)
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme == "http" {
		fmt.Fprintln(c.stderr, "webhookctl: warning: --url is plain http: payloads and signatures travel unencrypted "+
			"(deliverers with WEBHOOKS_REQUIRE_HTTPS refuse it); use https outside development")
	}
	return nil
}

// headerFlag collects repeated --header K:V flags.
type headerFlag struct {
	m map[string]string
}

func (h *headerFlag) String() string {
	var parts []string
	for k, v := range h.m {
		parts = append(parts, k+":"+v)
	}
	return strings.Join(parts, ",")
}

// Type names the value in --help.
func (h *headerFlag) Type() string { return "K:V" }

func (h *headerFlag) Set(v string) error {
	if v == "" {
		h.m = nil
		return nil
	}
	k, val, ok := strings.Cut(v, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("want K:V")
	}
	for have := range h.m {
		if http.CanonicalHeaderKey(have) == http.CanonicalHeaderKey(k) {
			return fmt.Errorf("header %s given twice", k)
		}
	}
	if h.m == nil {
		h.m = map[string]string{}
	}
	h.m[k] = strings.TrimSpace(val)
	return nil
}

// authValues tells whether any flag going with --auth is set.
func (f *subFlags) authValues() bool {
	for _, v := range []string{f.authUser, f.authPass, f.authTok, f.tokenURL, f.clientID, f.clientSc, f.scopes, f.certFile, f.keyFile, f.caFile} {
		if v != "" {
			return true
		}
	}
	return false
}

// endpointAuth is the auth the --auth flags describe, the PEM files read.
func (f *subFlags) endpointAuth() (*topics.EndpointAuth, error) {
	a := &topics.EndpointAuth{Type: f.auth, Username: f.authUser, Password: f.authPass, Token: f.authTok,
		TokenURL: f.tokenURL, ClientID: f.clientID, ClientSecret: f.clientSc, Scopes: config.SplitList(f.scopes)}
	for _, file := range []struct {
		flag, path string
		dst        *string
	}{{"auth-cert", f.certFile, &a.Certificate}, {"auth-key", f.keyFile, &a.Key}, {"auth-ca", f.caFile, &a.CA}} {
		if file.path == "" {
			continue
		}
		b, err := os.ReadFile(file.path)
		if err != nil {
			return nil, usagef("--%s: %v", file.flag, err)
		}
		*file.dst = string(b)
	}
	return a, nil
}

// destination is the destination --destination gives (nil for http),
// keeping old's secrets where it leaves them out and old is of the same
// type, as the API does.
func (f *subFlags) destination(old *topics.Destination) (*topics.Destination, error) {
	if f.dest == topics.DestinationHTTP || f.dest == "" {
		return nil, nil
	}
	raw, err := readValue(f.dest)
	if err != nil {
		return nil, usagef("--destination: %v", err)
	}
	var d topics.Destination
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, usagef("--destination: not a destination in JSON: %v", err)
	}
	if d.IsHTTP() {
		return nil, nil
	}
	if old != nil && old.Type == d.Type {
		for _, kept := range [][2]*string{{&d.Password, &old.Password}, {&d.Token, &old.Token}, {&d.SecretAccessKey, &old.SecretAccessKey}} {
			if *kept[0] == "" {
				*kept[0] = *kept[1]
			}
		}
	}
	return &d, nil
}
