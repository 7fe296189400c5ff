// Package http1 posts over pooled HTTP/1.1 keep-alive connections, one
// request at a time on each, with no goroutine per connection: the request
// is written and its answer read by the caller's goroutine. It is what
// net/http's Transport does for HTTP/1.1, less its two goroutines and
// hand-offs per request and the header map (ADR 0025, and ADR 0032 for
// https); answers are read with net/http's parser.
package http1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Transport posts to http:// URLs, or with TLS set to https:// URLs.
// Redirects are answers like any other: it never follows one.
type Transport struct {
	// Dial connects to "host:port"; the context holds the request's
	// deadline.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, when set, makes this a transport for https:// URLs: each
	// connection Dial makes is wrapped in TLS with this config (its
	// ServerName the URL's host unless set) and offers only http/1.1 by
	// ALPN. Give it a ClientSessionCache so that new connections to a
	// host resume its session instead of a full handshake.
	TLS *tls.Config
	// MaxIdlePerHost is how many idle connections are kept per host:port.
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle that long.
	IdleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*conn // by host:port, the last used on top
}

// conn is one keep-alive connection.
type conn struct {
	t    *Transport
	addr string
	nc   net.Conn
	in   limited // nc, limited while an answer's head is read
	br   *bufio.Reader
	bw   *bufio.Writer
	// timer closes the connection once idle for IdleTimeout; stopped
	// while it is in use.
	timer *time.Timer
	// watched is the Done channel of the context whose end ends the
	// connection's request (watch); unwatch stops watching it.
	watched <-chan struct{}
	unwatch func() bool
}

// Field is one header line. Its name is a valid token (the caller's to
// check); CR, LF and NUL in its value are sent as spaces.
type Field struct{ Name, Value string }

// Request is one POST of Body to URL (http:// or, with TLS, https://; an
// ASCII host), with Header after Host and Content-Length, to be answered
// by Deadline (none when zero) or the context's deadline, the earlier. A
// deadline of the request's own costs no timer: the connection's deadline
// is the one timer.
type Request struct {
	URL      *url.URL
	Header   []Field
	Body     []byte
	Deadline time.Time
}

// deadline is the earlier of r's deadline and ctx's, zero when neither
// has one.
func (r *Request) deadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok || !r.Deadline.IsZero() && r.Deadline.Before(d) {
		return r.Deadline
	}
	return d
}

// asPost is what the answers' parser is told was sent: a POST.
var asPost = &http.Request{Method: http.MethodPost}

// maxHeadBytes bounds an answer's status line and headers (1xx answers
// included): an endpoint sending headers without end costs this much
// memory, not all it sends until the request's deadline.
const maxHeadBytes = 1 << 20

// max1xx is how many informational answers may come before the answer,
// as net/http allows.
const max1xx = 5

// errHeadTooLong is an answer's head past maxHeadBytes.
var errHeadTooLong = fmt.Errorf("http1: the answer's headers are longer than %d bytes", maxHeadBytes)

// limited reads r, at most n bytes more when n >= 0.
type limited struct {
	r io.Reader
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n == 0 {
		return 0, errHeadTooLong
	}
	if l.n > 0 && int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	if l.n > 0 {
		l.n -= int64(n)
	}
	return n, err
}

// bufSize holds a request's headers and a typical event in one write, and
// an answer's headers in one read.
const bufSize = 8 << 10

// closedByPeer is an error meaning the server had closed the connection
// before answering: on a reused connection, the request is sent again on a
// new one.
type closedByPeer struct{ err error }

func (e closedByPeer) Error() string { return e.err.Error() }
func (e closedByPeer) Unwrap() error { return e.err }

// Post sends r and reads the answer's headers; the caller reads and closes
// its body, which puts the connection back for the next request when the
// body was read to its end. A connection reused from the pool that fails
// before any byte of an answer was read (the server had closed it while
// idle) is dropped and the request sent once more, on a new one: no answer
// means the endpoint did not take it, and a delivery that got no answer is
// sent again anyway.
func (t *Transport) Post(ctx context.Context, r *Request) (*http.Response, error) {
	scheme, port := "http", "80"
	if t.TLS != nil {
		scheme, port = "https", "443"
	}
	if r.URL.Scheme != scheme {
		return nil, fmt.Errorf("http1: scheme %q: only %s", r.URL.Scheme, scheme)
	}
	addr := r.URL.Host
	if r.URL.Port() == "" {
		addr = net.JoinHostPort(r.URL.Hostname(), port)
	}
	deadline := r.deadline(ctx)
	for fresh := false; ; fresh = true {
		c, reused, err := t.get(ctx, addr, deadline, fresh)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(ctx, r, deadline)
		if err == nil {
			return resp, nil
		}
		c.close()
		var cp closedByPeer
		if !reused || !errors.As(err, &cp) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("http1: %w", ctx.Err())
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return nil, fmt.Errorf("http1: %w", context.DeadlineExceeded)
			}
			return nil, err
		}
	}
}

// CloseIdle closes every idle connection.
func (t *Transport) CloseIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.close()
		}
	}
}

// get is the connection used last to addr, or (fresh, or none idle) a new
// one, dialed by deadline.
func (t *Transport) get(ctx context.Context, addr string, deadline time.Time, fresh bool) (c *conn, reused bool, err error) {
	t.mu.Lock()
	if cs := t.idle[addr]; len(cs) > 0 && !fresh {
		c = cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.idle[addr] = cs[:len(cs)-1]
	}
	t.mu.Unlock()
	if c != nil && c.timer.Stop() {
		return c, true, nil
	}
	// A connection whose timer had fired is being closed by it: dial.
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	nc, err := t.dial(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	c = &conn{t: t, addr: addr, nc: nc, in: limited{r: nc, n: -1}, bw: bufio.NewWriterSize(nc, bufSize)}
	c.br = bufio.NewReaderSize(&c.in, bufSize)
	c.timer = time.AfterFunc(time.Hour, c.expire)
	c.timer.Stop()
	return c, false, nil
}

// dial connects to addr, with a TLS handshake when t.TLS is set.
func (t *Transport) dial(ctx context.Context, addr string) (net.Conn, error) {
	nc, err := t.Dial(ctx, "tcp", addr)
	if err != nil || t.TLS == nil {
		return nc, err
	}
	cfg := t.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// put keeps c for the next request to its host, or closes it when the
// host has enough idle.
func (t *Transport) put(c *conn) {
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	cs := t.idle[c.addr]
	if len(cs) >= t.MaxIdlePerHost {
		t.mu.Unlock()
		c.close()
		return
	}
	t.idle[c.addr] = append(cs, c)
	c.timer.Reset(t.IdleTimeout)
	t.mu.Unlock()
}

// expire closes c, idle for IdleTimeout, unless it was taken meanwhile.
func (c *conn) expire() {
	t := c.t
	t.mu.Lock()
	cs := t.idle[c.addr]
	for i := range cs {
		if cs[i] == c {
			t.idle[c.addr] = append(cs[:i], cs[i+1:]...)
			break
		}
	}
	if len(t.idle[c.addr]) == 0 {
		delete(t.idle, c.addr)
	}
	t.mu.Unlock()
	c.close()
}

func (c *conn) close() {
	c.timer.Stop()
	if c.unwatch != nil {
		c.unwatch()
	}
	c.nc.Close()
}

// watch makes the end of ctx (shutdown) end the connection's request: it
// sets the connection's deadline in the past. The watch stays while the
// connection is idle, for its next request: the deliverer's contexts all
// end with its one, so a connection registers once, not once a request.
// False when the context watched before has ended (the deadline may be in
// the past at any moment), and the connection is of no more use.
func (c *conn) watch(ctx context.Context) bool {
	done := ctx.Done()
	if done == c.watched {
		return true
	}
	if c.unwatch != nil && !c.unwatch() {
		return false
	}
	c.watched, c.unwatch = done, nil
	if done != nil {
		c.unwatch = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(past) })
	}
	return true
}

// ended reports whether the watched context has ended.
func (c *conn) ended() bool {
	select {
	case <-c.watched:
		return true
	default:
		return false
	}
}

// errWatchEnded is a reused connection whose last request's context ended
// while it was idle: its deadline may be set in the past at any moment.
var errWatchEnded = closedByPeer{errors.New("http1: the connection's last context ended")}

// past is a deadline that has passed: set, it ends any read or write.
var past = time.Unix(1, 0)

// roundTrip writes r and reads the answer's headers, skipping 1xx
// answers. The connection's deadline is the request's; the context ending
// earlier (shutdown) ends the request too.
func (c *conn) roundTrip(ctx context.Context, r *Request, deadline time.Time) (*http.Response, error) {
	if !c.watch(ctx) {
		return nil, errWatchEnded
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// Past this check an end of ctx comes after the deadline was set, and
	// its watch sets it in the past.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.write(r); err != nil {
		return nil, peerClosed(err)
	}
	c.in.n = maxHeadBytes
	for informational := 0; ; informational++ {
		if _, err := c.br.Peek(1); err != nil {
			return nil, peerClosed(err)
		}
		resp, err := http.ReadResponse(c.br, asPost)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("http1: the server switched protocols (101) on a webhook request")
		case resp.StatusCode >= 100 && resp.StatusCode < 200 && informational < max1xx:
			continue
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			return nil, fmt.Errorf("http1: more than %d informational (1xx) answers", max1xx)
		}
		c.in.n = -1 // the body: the caller bounds what it reads
		resp.Body = &body{ReadCloser: resp.Body, c: c, keep: !resp.Close, eof: resp.Body == http.NoBody}
		return resp, nil
	}
}

// write sends r: its head and, when it fits, its body in one write.
func (c *conn) write(r *Request) error {
	b := c.bw.AvailableBuffer()
	b = append(b, "POST "...)
	b = append(b, r.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.URL.Host...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(r.Body)), 10)
	for _, f := range r.Header {
		b = append(b, "\r\n"...)
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = appendValue(b, f.Value)
	}
	b = append(b, "\r\n\r\n"...)
	if _, err := c.bw.Write(b); err != nil {
		return err
	}
	if _, err := c.bw.Write(r.Body); err != nil {
		return err
	}
	return c.bw.Flush()
}

// appendValue appends a header value with CR, LF and NUL as spaces: none
// can end the line early.
func appendValue(b []byte, v string) []byte {
	start := len(b)
	b = append(b, v...)
	for i := start; i < len(b); i++ {
		if c := b[i]; c == '\r' || c == '\n' || c == 0 {
			b[i] = ' '
		}
	}
	return b
}

// peerClosed is err, met before any byte of an answer was read, as
// closedByPeer when it means the server had closed the connection (an
// end of stream, a reset, a broken pipe), err itself otherwise.
func peerClosed(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return closedByPeer{err}
	}
	return err
}

// body is an answer's body: read to its end and closed, its connection
// goes back to the pool; closed before, the connection is closed (what is
// left could be endless).
type body struct {
	io.ReadCloser
	c    *conn
	keep bool
	eof  bool
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// With the context ended the connection's deadline is in the past, of
	// no more use.
	if !b.eof || !b.keep || b.c.ended() {
		b.c.close()
		_ = b.ReadCloser.Close()
		return nil
	}
	_ = b.ReadCloser.Close()
	b.c.t.put(b.c)
	return nil
}
