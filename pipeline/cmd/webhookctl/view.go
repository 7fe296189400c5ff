package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// redacted replaces secrets in JSON output.
const redacted = "redacted"

// masked returns s with its secrets replaced by "redacted".
func masked(s *topics.Subscription) topics.Subscription {
	m := *s
	m.Secret = redacted
	if m.PreviousSecret != "" {
		m.PreviousSecret = redacted
	}
	if s.Auth != nil {
		m.Auth = s.Auth.Masked(redacted)
	}
	if s.Destination != nil {
		m.Destination = s.Destination.Masked(redacted)
	}
	return m
}

// maskSecret shows the last four characters of a secret, enough to tell
// secrets apart.
func maskSecret(s string) string {
	if len(s) < len(topics.SecretPrefix)+8 {
		return topics.SecretPrefix + "…"
	}
	return topics.SecretPrefix + "…" + s[len(s)-4:]
}

// printSubscription prints s. Secrets are masked unless reveal is set, in
// which case the current secret is shown in full (the previous one never
// is) with a reminder that this is the only time.
func (c *cli) printSubscription(s *topics.Subscription, reveal bool) error {
	if c.output == outputJSON {
		m := masked(s)
		if reveal {
			m.Secret = s.Secret
		}
		if c.breaker != nil {
			return c.printJSON(withBreaker{m, c.breaker})
		}
		return c.printJSON(m)
	}
	secret := maskSecret(s.Secret)
	if reveal {
		secret = s.Secret
	}
	tw := newTable(c.stdout)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("id", s.ID)
	row("tenant", orDash(s.Tenant))
	row("url", s.URL)
	row("events", strings.Join(s.EventTypes, ", "))
	enabled := strconv.FormatBool(s.Enabled)
	if !s.Enabled && s.DisabledReason != "" {
		enabled += " (" + s.DisabledReason + ")"
	}
	row("enabled", enabled)
	row("ordering", or(s.Ordering, topics.OrderingNone))
	row("partitions", strconv.Itoa(s.Width()))
	var headers []string
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		headers = append(headers, k+": "+s.Headers[k])
	}
	row("headers", orDash(strings.Join(headers, ", ")))
	row("timeout", s.Timeout().String())
	rate := "unlimited"
	if s.RateLimitPerS > 0 {
		rate = strconv.FormatFloat(s.RateLimitPerS, 'g', -1, 64) + "/s"
	}
	row("rate limit", rate)
	row("retry schedule", or(strings.Join(s.RetrySchedule, ", "), "default"))
	if a := s.Auth; a != nil {
		row("auth", authSummary(a))
	}
	retried := make([]string, len(s.RetryStatuses))
	for i, code := range s.RetryStatuses {
		retried[i] = strconv.Itoa(code)
	}
	row("permanent statuses retried", orDash(strings.Join(retried, ", ")))
	row("secret", secret)
	if s.PreviousSecret != "" {
		row("previous secret", maskSecret(s.PreviousSecret)+", signs until "+formatTime(s.PreviousSecretUntil))
	}
	row("created", formatTime(s.CreatedAt))
	row("updated", formatTime(s.UpdatedAt))
	if c.breaker != nil {
		row("breaker", describeBreaker(c.breaker))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if reveal {
		fmt.Fprintln(c.stdout, "\nStore the secret now: webhookctl shows it only this once.")
	}
	return nil
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDash(v string) string { return or(v, "-") }

// authSummary describes an endpoint's auth without its secrets.
func authSummary(a *topics.EndpointAuth) string {
	switch a.Type {
	case topics.AuthOAuth2:
		return strings.TrimSpace(fmt.Sprintf("oauth2 %s at %s %s", a.ClientID, a.TokenURL, strings.Join(a.Scopes, " ")))
	case topics.AuthMTLS:
		if cert, err := a.ClientCertificate(); err == nil && cert.Leaf != nil {
			return fmt.Sprintf("mtls %s, expires %s", cert.Leaf.Subject, formatTime(cert.Leaf.NotAfter))
		}
		return "mtls"
	}
	return strings.TrimSpace(a.Type + " " + a.Username)
}
