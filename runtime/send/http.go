package send

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/send/internal/http1"
	"github.com/hookpipe/hookpipe/runtime/send/internal/sign"
	"github.com/hookpipe/hookpipe/runtime/send/internal/ssrf"
	"github.com/hookpipe/hookpipe/topics"
)

// Sender makes one HTTP attempt. One per process: its transport pools
// connections for every endpoint.
type Sender struct {
	client *http.Client
	// plain sends to http:// endpoints over HTTP/1.1 (all net/http speaks
	// there too) at about half the CPU (ADR 0025), secure to https://
	// endpoints without a client certificate, over HTTP/1.1 with TLS
	// sessions resumed (ADR 0032); nil when the config replaces the
	// transport.
	plain, secure *http1.Transport
	keys          keyCache
	urls          urlCache
	auth          *endpointAuth
	requireHTTPS  bool
	maxBody       int64

	// dial reaches destinations other than HTTP endpoints, each kind
	// through its publisher, made on first use.
	dial       dialFunc
	mu         sync.Mutex
	publishers map[string]Publisher

	// scripts are the subscriptions' transformations, compiled.
	scripts scripts
}

// New returns a Sender with the settings h, sized by o.
func New(h HTTP, o Options) *Sender {
	guard := ssrf.New(h.AllowCIDRs)
	dialer := &net.Dialer{Timeout: h.ConnectTimeout, KeepAlive: 30 * time.Second, Control: guard.Control}
	dial := dialer.DialContext
	if proxy, err := parseProxy(h.EgressProxy); h.EgressProxy != "" && err == nil { // validated with the config
		dial = newEgress(proxy, guard, h.ConnectTimeout).DialContext
	}
	tr := &http.Transport{
		// Not http.Transport's proxy: it would have the proxy resolve and
		// dial the endpoint, past the SSRF guard (see egress).
		Proxy:             nil,
		DialContext:       dial,
		ForceAttemptHTTP2: true,
		// Idle connections are pooled per host, and many subscriptions may
		// share one host: keep as many as can be in flight at once.
		MaxIdleConns:          2 * o.MaxInFlight,
		MaxIdleConnsPerHost:   o.MaxInFlight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   h.ConnectTimeout,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 0, // bounded by the per-attempt context
		// Only a sample of the answer is kept: not asking for gzip spares
		// every request the header and the check for a compressed answer
		// (1.5 µs of a client's 31 on this machine).
		DisableCompression: true,
	}
	var rt http.RoundTripper = tr
	var plain, secure *http1.Transport
	if o.Transport != nil {
		rt = o.Transport
	} else {
		plain = &http1.Transport{Dial: dial, MaxIdlePerHost: o.MaxInFlight, IdleTimeout: tr.IdleConnTimeout}
		secure = &http1.Transport{Dial: dial, MaxIdlePerHost: o.MaxInFlight, IdleTimeout: tr.IdleConnTimeout,
			TLS: &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize)}}
	}
	return &Sender{
		plain:  plain,
		secure: secure,
		auth:   newEndpointAuth(tr, h.RequireHTTPS),
		client: &http.Client{
			Transport: rt,
			// Redirects are failures: following one would send the payload
			// somewhere the subscriber did not register.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		requireHTTPS: h.RequireHTTPS,
		maxBody:      o.MaxResponseBytes,
		dial:         dial,
		publishers:   map[string]Publisher{},
	}
}

// Close closes the idle connections to endpoints and every publisher's
// connections: at shutdown, so that endpoints and brokers see them closed
// rather than left to time out.
func (s *Sender) Close() {
	s.client.CloseIdleConnections()
	if s.plain != nil {
		s.plain.CloseIdle()
		s.secure.CloseIdle()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for kind, p := range s.publishers {
		p.Close()
		delete(s.publishers, kind)
	}
}

// sampleBytes is how much of a response body is kept as its sample.
const sampleBytes = 1024

// body renders the request body: the data bytes go out exactly as
// published.
func body(d *topics.Delivery) []byte {
	b := make([]byte, 0, len(d.Data)+len(d.EventID)+len(d.EventType)+len(d.Timestamp)+48)
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.EventID)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, d.EventType)
	b = append(b, `,"timestamp":`...)
	b = appendJSONString(b, d.Timestamp)
	b = append(b, `,"data":`...)
	b = append(b, d.Data...)
	return append(b, '}')
}

// appendJSONString quotes s; ids, types and timestamps are validated
// printable ASCII, so only '"' and '\\' need escaping, but control bytes
// are escaped too for safety.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Send posts one delivery to the subscription's endpoint (or publishes it
// to its destination, see Publisher), through the subscription's
// transformation when it has one, within the subscription's timeout, with
// the trace headers traced (traceparent, tracestate), which replace any the
// subscription sets. With oauth2 auth, a 401 answer to a cached token
// fetches a new one and sends again, once.
func (s *Sender) Send(ctx context.Context, sub *topics.Subscription, d *topics.Delivery,
	traced []kgo.RecordHeader) (Response, error) {
	start := time.Now()
	deadline := start.Add(sub.Timeout())
	// The script and a destination's publish run under a context that
	// ends at the deadline; an HTTP request takes ctx and the deadline
	// (sendHTTP): a connection of the pool watches the context of its
	// requests, so one ending with the delivery would end the connection.
	bounded := ctx
	if sub.Transformation != "" || !sub.Destination.IsHTTP() {
		var cancel context.CancelFunc
		bounded, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	req, err := s.prepare(bounded, sub, d)
	if err != nil {
		return Response{Duration: time.Since(start)}, err
	}
	if !sub.Destination.IsHTTP() {
		return s.publish(bounded, req, d, traced)
	}
	return s.sendHTTP(ctx, deadline, req, traced)
}

// HeaderBatch lists the ids of a batch's events, space-separated (ids
// have no spaces), in the order of the body's array.
const HeaderBatch = "webhook-batch"

// SendBatch posts deliveries to the subscription's endpoint in one request
// (ADR 0040), within the subscription's timeout: the body is a JSON array
// of what Send would post for each, in their order; webhook-id is their
// batch id (topics.BatchID), the same whenever the same events are sent
// again; HeaderBatch lists their ids. The signature covers the array as
// any body. Only HTTP endpoints without a transformation take batches
// (topics.Subscription validates it).
func (s *Sender) SendBatch(ctx context.Context, sub *topics.Subscription, ds []*topics.Delivery,
	traced []kgo.RecordHeader) (Response, error) {
	if !sub.Destination.IsHTTP() || sub.Transformation != "" {
		return Response{}, fmt.Errorf("%w: batches are for HTTP endpoints without a transformation", classify.ErrRefused)
	}
	deadline := time.Now().Add(sub.Timeout())
	ids := make([]string, len(ds))
	b := []byte{'['}
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, body(d)...)
		ids[i] = d.EventID
	}
	b = append(b, ']')
	return s.sendHTTP(ctx, deadline, request{sub: sub, body: b, method: http.MethodPost, id: topics.BatchID(ids), batch: strings.Join(ids, " ")}, traced)
}

// sendHTTP makes the request of an HTTP endpoint, answered by deadline.
// A request through the HTTP/1.1 pool takes the deadline as its own (the
// connection's deadline: no timer of its own) and ctx, which its
// connection watches while it is kept (http1.conn.watch): ctx must live as
// long as the Sender's callers do, not end with the delivery. The other
// requests, and the OAuth token's, are made under a context that ends at
// the deadline.
func (s *Sender) sendHTTP(ctx context.Context, deadline time.Time, req request, traced []kgo.RecordHeader) (Response, error) {
	sub := req.sub
	u, err := s.urls.parse(sub.URL)
	if err != nil {
		return Response{}, err
	}
	if s.requireHTTPS && u.Scheme != "https" {
		return Response{}, ErrHTTPSRequired
	}
	client, err := s.auth.client(s.client, sub)
	if err != nil {
		return Response{}, err
	}
	keys := s.keys.of(sub, time.Now())
	authz := authorization(sub.Auth)
	oauth := sub.Auth != nil && sub.Auth.Type == topics.AuthOAuth2
	bounded := ctx
	if oauth {
		var cancel context.CancelFunc
		bounded, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	var token string
	for try := 0; ; try++ {
		if oauth {
			start := time.Now()
			if token, err = s.auth.token(bounded, sub, token); err != nil {
				return Response{Duration: time.Since(start)}, err
			}
			authz = "Bearer " + token
		}
		resp, err := s.post(ctx, deadline, client, u, req, keys, authz, traced)
		if oauth {
			resp.Sample = strings.ReplaceAll(resp.Sample, token, "[redacted]")
		}
		if err != nil || !oauth || resp.Status != http.StatusUnauthorized || try == 1 {
			return resp, err
		}
	}
}

// sessionCacheSize is how many endpoints' TLS sessions are kept for
// resumption.
const sessionCacheSize = 4096

// pool is the HTTP/1.1 pool for u, nil when the request goes through
// client: an endpoint with a client certificate (its own transport), a
// transport replaced by the config, a host that is not ASCII.
func (s *Sender) pool(client *http.Client, u *url.URL) *http1.Transport {
	if client != s.client || s.plain == nil || !ascii(u.Host) {
		return nil
	}
	switch u.Scheme {
	case "http":
		return s.plain
	case "https":
		return s.secure
	}
	return nil
}

// post makes one request.
func (s *Sender) post(ctx context.Context, deadline time.Time, client *http.Client, u *url.URL, r request,
	keys []*sign.Key, authz string, traced []kgo.RecordHeader) (Response, error) {
	now := time.Now()
	b := r.body
	header := requestHeader(r, keys, authz, traced, now)
	var resp *http.Response
	var err error
	if pool := s.pool(client, u); pool != nil && r.method == http.MethodPost {
		// As client.Do, which never follows a redirect here either.
		if resp, err = pool.Post(ctx, &http1.Request{URL: u, Header: header, Body: b, Deadline: deadline}); err != nil {
			err = &url.Error{Op: "Post", URL: u.Redacted(), Err: err}
		}
	} else {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		req, rerr := http.NewRequestWithContext(ctx, r.method, r.sub.URL, bytes.NewReader(b))
		if rerr != nil {
			return Response{}, rerr
		}
		for _, f := range header {
			req.Header[f.Name] = []string{f.Value}
		}
		resp, err = client.Do(req)
	}
	if err != nil {
		return Response{Duration: time.Since(now)}, err
	}
	// Read at most maxBody, then close: an endpoint that streams forever
	// costs one connection, not memory or time. The first bytes are kept.
	var head []byte
	if resp.ContentLength != 0 {
		head = make([]byte, min(sampleBytes, s.maxBody))
	}
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, s.maxBody-int64(n)))
	resp.Body.Close()
	return Response{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Duration: time.Since(now),
		Sample: sampleOf(head[:n])}, nil
}

// requestHeader is a request's header: the subscription's and the trace
// headers (subscriptionHeader), the auth, a batch's event ids, and the
// signature's.
func requestHeader(r request, keys []*sign.Key, authz string, traced []kgo.RecordHeader, now time.Time) []http1.Field {
	h := subscriptionHeader(r.sub, traced, 7)
	if !slices.ContainsFunc(h, func(f http1.Field) bool { return f.Name == "User-Agent" }) {
		h = append(h, http1.Field{Name: "User-Agent", Value: "hookpipe/1"})
	}
	if authz != "" {
		h = append(h, http1.Field{Name: "Authorization", Value: authz})
	}
	if r.batch != "" {
		h = append(h, http1.Field{Name: HeaderBatch, Value: r.batch})
	}
	return append(h,
		http1.Field{Name: "Content-Type", Value: "application/json"},
		http1.Field{Name: "webhook-id", Value: r.id},
		http1.Field{Name: "webhook-timestamp", Value: strconv.FormatInt(now.Unix(), 10)},
		http1.Field{Name: "webhook-signature", Value: sign.Signature(keys, r.id, now.Unix(), r.body)})
}

// subscriptionHeader is the subscription's headers, then the trace headers
// (which replace any of the subscription's by the same name), canonical,
// with room for spare more.
func subscriptionHeader(sub *topics.Subscription, traced []kgo.RecordHeader, spare int) []http1.Field {
	h := make([]http1.Field, 0, len(sub.Headers)+len(traced)+spare)
	for k, v := range sub.Headers {
		if slices.ContainsFunc(traced, func(t kgo.RecordHeader) bool { return strings.EqualFold(t.Key, k) }) {
			continue
		}
		h = append(h, http1.Field{Name: http.CanonicalHeaderKey(k), Value: v})
	}
	for _, t := range traced {
		h = append(h, http1.Field{Name: http.CanonicalHeaderKey(t.Key), Value: string(t.Value)})
	}
	return h
}

// urlCache holds the parsed URL of each endpoint in use, so that a
// delivery does not parse its subscription's URL anew. The URLs it returns
// are shared: read only.
type urlCache struct {
	mu sync.RWMutex
	m  map[string]*url.URL
}

// maxURLs bounds a urlCache: past it, it starts over.
const maxURLs = 1 << 14

// parse is raw parsed, as url.Parse.
func (c *urlCache) parse(raw string) (*url.URL, error) {
	c.mu.RLock()
	u := c.m[raw]
	c.mu.RUnlock()
	if u != nil {
		return u, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxURLs {
		c.m = map[string]*url.URL{}
	}
	c.m[raw] = u
	c.mu.Unlock()
	return u, nil
}

// keyCache holds the signing key of each secret in use, so that a
// delivery neither decodes its secrets nor keys an HMAC anew.
type keyCache struct {
	mu sync.RWMutex
	m  map[string]*sign.Key
}

// maxKeys bounds a keyCache: past it, it starts over.
const maxKeys = 1 << 14

// of is the keys sub signs with at now, current first.
func (c *keyCache) of(sub *topics.Subscription, now time.Time) []*sign.Key {
	secrets := sub.Secrets(now)
	keys := make([]*sign.Key, 0, len(secrets))
	for _, secret := range secrets {
		if k := c.key(secret); k != nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// key is secret's key, nil for a secret that does not decode (the table
// holds validated subscriptions only).
func (c *keyCache) key(secret string) *sign.Key {
	c.mu.RLock()
	k := c.m[secret]
	c.mu.RUnlock()
	if k != nil {
		return k
	}
	raw, err := topics.DecodeSecret(secret)
	if err != nil {
		return nil
	}
	k = sign.NewKey(raw)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxKeys {
		c.m = map[string]*sign.Key{}
	}
	c.m[secret] = k
	c.mu.Unlock()
	return k
}

// ascii reports whether a host needs no IDNA conversion (net/http does it
// for the others).
func ascii(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sampleOf is a body's first bytes as text: a character the limit cut in
// two is dropped, invalid UTF-8 replaced.
func sampleOf(b []byte) string {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// Redact hides, in a response sample, what the subscription holds that an
// endpoint echoing its request would give away: its secrets and the values
// of its headers (a token in Authorization, say).
func Redact(sample string, sub *topics.Subscription, now time.Time) string {
	if sample == "" {
		return ""
	}
	for _, s := range sub.Secrets(now) {
		sample = strings.ReplaceAll(sample, s, "[redacted]")
		sample = strings.ReplaceAll(sample, strings.TrimPrefix(s, topics.SecretPrefix), "[redacted]")
	}
	for _, v := range sub.Headers {
		if len(v) >= 4 {
			sample = strings.ReplaceAll(sample, v, "[redacted]")
		}
	}
	for _, v := range sub.Destination.Secrets() {
		if len(v) >= 4 {
			sample = strings.ReplaceAll(sample, v, "[redacted]")
		}
	}
	if a := sub.Auth; a != nil {
		// The header value first: it holds the others.
		for _, v := range append([]string{strings.TrimPrefix(strings.TrimPrefix(authorization(a), "Basic "), "Bearer ")}, a.Secrets()...) {
			if len(v) >= 4 {
				sample = strings.ReplaceAll(sample, v, "[redacted]")
			}
		}
	}
	return sample
}

// authorization is the Authorization header value of an endpoint's auth,
// "" without one.
func authorization(a *topics.EndpointAuth) string {
	switch {
	case a == nil:
		return ""
	case a.Type == topics.AuthBasic:
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(a.Username+":"+a.Password))
	case a.Type == topics.AuthBearer:
		return "Bearer " + a.Token
	}
	return ""
}
