package send

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/send/internal/ssrf"
)

// parseProxy reads WEBHOOKS_EGRESS_PROXY: http://[user:password@]host:port.
func parseProxy(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("not a URL") // the text may hold credentials: not quoted
	case u.Scheme != "http":
		return nil, fmt.Errorf("scheme %q: an HTTP CONNECT proxy is http://host:port", u.Scheme)
	case u.Hostname() == "" || u.Port() == "":
		return nil, errors.New("want http://[user:password@]host:port")
	case u.Path != "" && u.Path != "/" || u.RawQuery != "":
		return nil, errors.New("a proxy URL has no path or query")
	}
	return u, nil
}

// egress dials endpoints through an HTTP CONNECT proxy. The SSRF guard
// still decides: the endpoint's name is resolved here, its addresses
// checked, and the proxy is asked to connect to the address that passed
// (never the name, which it would resolve again), so neither DNS rebinding
// nor the proxy can reach a refused range.
type egress struct {
	proxy    *url.URL
	auth     string // Proxy-Authorization value, "" without credentials
	guard    *ssrf.Guard
	dialer   *net.Dialer // to the proxy: the operator's address, not guarded
	resolver *net.Resolver
}

func newEgress(proxy *url.URL, guard *ssrf.Guard, timeout time.Duration) *egress {
	e := &egress{proxy: proxy, guard: guard, dialer: &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second},
		resolver: net.DefaultResolver}
	if u := proxy.User; u != nil {
		pw, _ := u.Password()
		e.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw))
	}
	return e
}

// DialContext connects to addr ("host:port") through the proxy.
func (e *egress) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	target, err := e.allowed(ctx, host)
	if err != nil {
		return nil, err
	}
	conn, err := e.dialer.DialContext(ctx, "tcp", e.proxy.Host)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
	}
	if err := e.connect(ctx, conn, net.JoinHostPort(target.String(), port)); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// allowed resolves host and returns its first address the guard allows.
func (e *egress) allowed(ctx context.Context, host string) (netip.Addr, error) {
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = e.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return netip.Addr{}, err
	}
	for _, ip := range ips {
		if ip = ip.Unmap(); e.guard.Allowed(ip) {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: %s resolves to %v only", classify.ErrBlockedAddress, host, ips)
}

// connect asks the proxy for a tunnel to target and reads its answer.
func (e *egress) connect(ctx context.Context, conn net.Conn, target string) error {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
		defer conn.SetDeadline(time.Time{}) //nolint:errcheck // cleared on a conn about to be used or closed
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if e.auth != "" {
		req.Header.Set("Proxy-Authorization", e.auth)
	}
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
	}
	// Nothing comes from the endpoint before the client speaks, so the
	// reader holds no byte past the proxy's answer.
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), req)
	if err != nil {
		return fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("egress proxy %s refused the tunnel: %s", e.proxy.Host, resp.Status)
	}
	return nil
}
