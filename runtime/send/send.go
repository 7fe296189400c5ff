// Package send makes one attempt of a delivery: it renders and signs the
// request (Standard Webhooks), sends it through the SSRF guard and the
// egress proxy with the endpoint's auth, and reports what came back. The
// deliverer sends every delivery through it, and the API's test-send and
// alert channels through its Prober, so that a probe goes exactly where and
// how a delivery would.
package send

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/send/internal/ssrf"
)

// EnvAllowCIDRs lists the private ranges the SSRF guard lets deliveries
// reach (comma-separated CIDRs; none by default).
const EnvAllowCIDRs = "WEBHOOKS_ALLOW_CIDRS"

// HTTP are the settings of the client that sends deliveries, which the
// deliverer and the API's test-send share.
type HTTP struct {
	// AllowCIDRs opens blocked address ranges (SSRF guard).
	AllowCIDRs []netip.Prefix `env:"WEBHOOKS_ALLOW_CIDRS" desc:"Private ranges deliveries may reach despite the SSRF guard, comma-separated CIDRs."`
	// RequireHTTPS refuses http:// endpoints.
	RequireHTTPS bool `env:"WEBHOOKS_REQUIRE_HTTPS" desc:"Refuse http:// endpoints."`
	// ConnectTimeout bounds TCP connect plus TLS handshake (never more
	// than the subscription's timeout, which bounds the whole attempt).
	ConnectTimeout time.Duration `env:"WEBHOOKS_CONNECT_TIMEOUT" envDefault:"10s" validate:"gt=0" desc:"Bounds TCP connect plus TLS handshake."`
	// EgressProxy sends every request through this HTTP CONNECT proxy,
	// tunnelled to the address the SSRF guard checked.
	EgressProxy string `env:"WEBHOOKS_EGRESS_PROXY" desc:"HTTP CONNECT proxy every request to an endpoint goes through, http://[user:password@]host:port (a fixed egress for receivers with IP allowlists); the SSRF guard still checks the endpoint's address, and the proxy is asked for that address. Never logged."`
}

// Validate checks what the tags cannot say (config.Parse checks them):
// that the egress proxy is a URL the sender can use.
func (h *HTTP) Validate() error {
	if h.EgressProxy == "" {
		return nil
	}
	if _, err := parseProxy(h.EgressProxy); err != nil {
		return fmt.Errorf("%s: %w", config.Name(h, &h.EgressProxy), err)
	}
	return nil
}

// Parsers read the fields of HTTP that runtime/config does not know (the
// allowlist's CIDRs and addresses), for config.Parse.
var Parsers = []config.Parser{config.ParserFor(ssrf.ParseCIDRs)}

// Options size a Sender.
type Options struct {
	// MaxInFlight is how many requests may run at once: the idle
	// connections kept per host.
	MaxInFlight int
	// MaxResponseBytes is how much of a response body is read; the
	// connection is dropped if more is left.
	MaxResponseBytes int64
	// Transport, when set, replaces the pooled transports and with them
	// the SSRF guard: tests run over in-memory networks with it.
	Transport http.RoundTripper
}

// Response is what an attempt learned.
type Response struct {
	// Status is the HTTP status; 0 when no answer came.
	Status int
	// RetryAfter is the answer's Retry-After header.
	RetryAfter string
	// Duration is from sending the request to reading the answer.
	Duration time.Duration
	// Sample is the first bytes of the answer's body, valid UTF-8.
	Sample string
}

// ErrHTTPSRequired refuses plain-http endpoints when HTTPS is required: a
// destination the configuration does not allow, dead-lettered at once like
// a blocked address (retrying cannot change it).
var ErrHTTPSRequired = fmt.Errorf("%w: endpoint is not https and WEBHOOKS_REQUIRE_HTTPS is set", classify.ErrBlockedAddress)

// ErrorText describes a transport error without the URL, which may carry a
// token in its query.
func ErrorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
