package http1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a raw HTTP/1.1 endpoint on 127.0.0.1: answer reads one request
// from a connection and writes what it returns (hangUp: then closes it).
type server struct {
	ln     net.Listener
	conns  atomic.Int32  // accepted
	closed chan struct{} // one per connection ended
	mu     sync.Mutex
	bodies []string
}

func newServer(t *testing.T, answer func(n int, req *http.Request) (reply string, hangUp bool)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, closed: make(chan struct{}, 64)}
	var served atomic.Int32
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			wg.Go(func() {
				defer func() {
					c.Close()
					select {
					case s.closed <- struct{}{}:
					default:
					}
				}()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					s.mu.Lock()
					s.bodies = append(s.bodies, string(b))
					s.mu.Unlock()
					reply, closeIt := answer(int(served.Add(1)), req)
					if _, err := io.WriteString(c, reply); err != nil || closeIt {
						return
					}
				}
			})
		}
	})
	return s
}

func (s *server) url() string { return "http://" + s.ln.Addr().String() + "/hook?x=1" }

const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func newTransport() *Transport {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &Transport{Dial: d.DialContext, MaxIdlePerHost: 4, IdleTimeout: time.Minute}
}

// post sends body to raw and reads the whole answer.
func post(ctx context.Context, t *Transport, raw, body string) (int, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, "", err
	}
	resp, err := t.Post(ctx, &Request{URL: u, Body: []byte(body)})
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestKeepAlive: requests one after another share one connection, and the
// request arrives as sent.
func TestKeepAlive(t *testing.T) {
	s := newServer(t, func(int, *http.Request) (string, bool) { return ok, false })
	tr := newTransport()
	defer tr.CloseIdle()
	for i := range 5 {
		status, body, err := post(ctx(t), tr, s.url(), "event-"+string(rune('a'+i)))
		if err != nil || status != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q %v", i, status, body, err)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections for five requests one after another, want 1", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := strings.Join(s.bodies, ","); got != "event-a,event-b,event-c,event-d,event-e" {
		t.Fatalf("bodies %s", got)
	}
}

// TestReusedConnectionClosedByServer: a server that closes a keep-alive
// connection while it is idle costs nothing: the request goes again on a
// new connection. A new connection closed without an answer is an error.
func TestReusedConnectionClosedByServer(t *testing.T) {
	s := newServer(t, func(int, *http.Request) (string, bool) { return ok, true }) // answers, then closes
	tr := newTransport()
	defer tr.CloseIdle()
	for i := range 3 {
		if status, _, err := post(ctx(t), tr, s.url(), "e"); err != nil || status != 200 {
			t.Fatalf("request %d: %d %v", i, status, err)
		}
	}
	if n := s.conns.Load(); n < 3 {
		t.Fatalf("%d connections, want one per request", n)
	}

	mute := newServer(t, func(int, *http.Request) (string, bool) { return "", true }) // closes without answering
	if _, _, err := post(ctx(t), tr, mute.url(), "e"); err == nil {
		t.Fatal("no error from a connection closed without an answer")
	}
	if n := mute.conns.Load(); n != 1 {
		t.Fatalf("a new connection closed without an answer was tried %d times, want 1", n)
	}
}

// TestStaleConnectionsRetriedOnce: with every idle connection closed by
// the server, a request is sent again once, on a new connection, not on
// the next stale one.
func TestStaleConnectionsRetriedOnce(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	s := newServer(t, func(n int, _ *http.Request) (string, bool) {
		if n <= 2 {
			arrived <- struct{}{}
			<-release
		}
		return ok, true // answers, then closes
	})
	tr := newTransport()
	defer tr.CloseIdle()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, _, err := post(ctx(t), tr, s.url(), "e"); err != nil {
				t.Error(err)
			}
		})
	}
	<-arrived
	<-arrived
	close(release)
	wg.Wait()
	if status, _, err := post(ctx(t), tr, s.url(), "e"); err != nil || status != 200 {
		t.Fatalf("with two stale connections idle: %d %v", status, err)
	}
	tr.mu.Lock()
	idle := len(tr.idle[s.ln.Addr().String()])
	tr.mu.Unlock()
	if idle != 2 {
		t.Fatalf("%d idle connections, want 2: one stale left untried, and the new one", idle)
	}
}

// TestInformational: up to five 1xx answers are skipped; a sixth, or 101,
// is an error.
func TestInformational(t *testing.T) {
	s := newServer(t, func(n int, _ *http.Request) (string, bool) {
		switch n {
		case 1:
			return strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 4) + "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
				"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", false
		case 2:
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", false
		}
		return strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6) + ok, false
	})
	tr := newTransport()
	defer tr.CloseIdle()
	if status, _, err := post(ctx(t), tr, s.url(), "e"); err != nil || status != 202 {
		t.Fatalf("after 100 and 103: %d %v, want 202", status, err)
	}
	if _, _, err := post(ctx(t), tr, s.url(), "e"); err == nil || !strings.Contains(err.Error(), "101") {
		t.Fatalf("101: %v, want an error", err)
	}
	if _, _, err := post(ctx(t), tr, s.url(), "e"); err == nil || !strings.Contains(err.Error(), "informational") {
		t.Fatalf("six 1xx answers: %v, want an error", err)
	}
}

// TestEndlessHeaders: an answer whose headers do not end is an error once
// past maxHeadBytes, not memory held until the deadline.
func TestEndlessHeaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"); err != nil {
			return
		}
		for range 100 * maxHeadBytes / len(line) { // until the client hangs up
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	tr := newTransport()
	defer tr.CloseIdle()
	if _, _, err := post(ctx(t), tr, "http://"+ln.Addr().String()+"/", "e"); !errors.Is(err, errHeadTooLong) {
		t.Fatalf("endless headers: %v, want errHeadTooLong", err)
	}
}

// TestConnectionNotReused: an answer whose body was not read to its end,
// or that says Connection: close, does not leave its connection for the
// next request; one read to its end does.
func TestConnectionNotReused(t *testing.T) {
	s := newServer(t, func(n int, _ *http.Request) (string, bool) {
		switch n {
		case 1:
			return "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", false
		case 2:
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false
		}
		return ok, false
	})
	tr := newTransport()
	defer tr.CloseIdle()
	u, _ := url.Parse(s.url())
	resp, err := tr.Post(ctx(t), &Request{URL: u, Body: []byte("e")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // six bytes left
	for range 2 {
		if _, _, err := post(ctx(t), tr, s.url(), "e"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := post(ctx(t), tr, s.url(), "e"); err != nil {
		t.Fatal(err)
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (a body left unread, then Connection: close, then kept)", n)
	}
}

// TestDeadlineAndCancel: a server that never answers ends the request at
// the context's deadline, or when the context is canceled; the error says
// which.
func TestDeadlineAndCancel(t *testing.T) {
	hold, arrived := make(chan struct{}), make(chan struct{}, 2)
	s := newServer(t, func(int, *http.Request) (string, bool) { arrived <- struct{}{}; <-hold; return "", true })
	t.Cleanup(func() { close(hold) })
	tr := newTransport()
	defer tr.CloseIdle()

	c, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	_, _, err := post(c, tr, s.url(), "e")
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && (!errors.As(err, &ne) || !ne.Timeout()) {
		t.Fatalf("past the deadline: %v, want a timeout", err)
	}
	<-arrived

	// No deadline: only the cancel can end it.
	c, cancel = context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	endsWith(t, context.Canceled, "canceled", func() error { _, _, err := post(c, tr, s.url(), "e"); return err })
}

// endsWith fails the test unless req, which the server does not answer,
// ends within 20 s with an error that is want.
func endsWith(t *testing.T, want error, what string, req func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- req() }()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the request did not end", what)
	}
}

// TestRequestDeadline: a request's own Deadline ends it under a context
// without one, and says so as a deadline; a context's earlier deadline
// wins over it.
func TestRequestDeadline(t *testing.T) {
	hold, arrived := make(chan struct{}), make(chan struct{}, 2)
	s := newServer(t, func(int, *http.Request) (string, bool) { arrived <- struct{}{}; <-hold; return "", true })
	t.Cleanup(func() { close(hold) })
	tr := newTransport()
	defer tr.CloseIdle()
	u, err := url.Parse(s.url())
	if err != nil {
		t.Fatal(err)
	}

	ended := func(c context.Context, r *Request, which string) {
		t.Helper()
		endsWith(t, context.DeadlineExceeded, "past the "+which+" deadline", func() error { _, err := tr.Post(c, r); return err })
		<-arrived
	}
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended(c, &Request{URL: u, Body: []byte("e"), Deadline: time.Now().Add(100 * time.Millisecond)}, "request's")
	c, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ended(c, &Request{URL: u, Body: []byte("e"), Deadline: time.Now().Add(time.Hour)}, "context's")
}

// TestCancelOnReusedConnection: a connection keeps watching the context
// of its requests while idle, so a request of the same context on it
// later ends when that context is canceled; a request of another context
// after the first one ended goes out and is answered.
func TestCancelOnReusedConnection(t *testing.T) {
	hold, arrived := make(chan struct{}), make(chan struct{}, 4)
	s := newServer(t, func(n int, _ *http.Request) (string, bool) {
		if n == 2 {
			arrived <- struct{}{}
			<-hold
		}
		return ok, false
	})
	t.Cleanup(func() { close(hold) })
	tr := newTransport()
	defer tr.CloseIdle()

	c, cancel := context.WithCancel(context.Background())
	if status, _, err := post(c, tr, s.url(), "first"); err != nil || status != 200 {
		t.Fatalf("first request: %d %v", status, err)
	}
	go func() { <-arrived; cancel() }()
	endsWith(t, context.Canceled, "canceled on a reused connection", func() error {
		_, _, err := post(c, tr, s.url(), "second")
		return err
	})
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the first one reused", n)
	}

	if status, _, err := post(ctx(t), tr, s.url(), "third"); err != nil || status != 200 {
		t.Fatalf("a request after the canceled one: %d %v", status, err)
	}
}

// TestIdle: at most MaxIdlePerHost connections are kept, and each is
// closed once idle for IdleTimeout.
func TestIdle(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 6)
	s := newServer(t, func(n int, _ *http.Request) (string, bool) {
		if n <= 6 {
			arrived <- struct{}{}
			<-release
		}
		return ok, false
	})
	tr := newTransport()
	defer tr.CloseIdle()
	idle := func() int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.idle[s.ln.Addr().String()])
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, _, err := post(ctx(t), tr, s.url(), "e"); err != nil {
				t.Error(err)
			}
		})
	}
	for range 6 {
		<-arrived
	}
	close(release)
	wg.Wait()
	if n := idle(); n != 4 {
		t.Fatalf("%d idle connections after six at once, want MaxIdlePerHost (4)", n)
	}

	// The connection used next goes back with a short timeout; the others
	// keep theirs (a minute).
	tr.IdleTimeout = 50 * time.Millisecond
	if _, _, err := post(ctx(t), tr, s.url(), "e"); err != nil {
		t.Fatal(err)
	}
	// The server sees three connections closed: the two past
	// MaxIdlePerHost, then the one idle past IdleTimeout.
	deadline := time.After(20 * time.Second)
	for range 3 {
		select {
		case <-s.closed:
		case <-deadline:
			t.Fatal("no idle connection closed after IdleTimeout")
		}
	}
	if n := idle(); n != 3 {
		t.Fatalf("%d idle connections, want 3: the one idle past IdleTimeout closed", n)
	}
	if n := s.conns.Load(); n != 6 {
		t.Fatalf("%d connections, want 6", n)
	}
}

// TestRequestOnTheWire: the server reads the request as sent, a value
// holding CR or LF as one line.
func TestRequestOnTheWire(t *testing.T) {
	reqs := make(chan *http.Request, 1)
	s := newServer(t, func(_ int, r *http.Request) (string, bool) { reqs <- r; return ok, false })
	tr := newTransport()
	defer tr.CloseIdle()
	u, _ := url.Parse(s.url())
	resp, err := tr.Post(ctx(t), &Request{URL: u, Body: []byte(`{"a":1}`), Header: []Field{
		{"webhook-id", "msg_1"}, {"User-Agent", "hookpipe/1"}, {"X-Note", "a\r\nInjected: yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	got := <-reqs
	if got.Method != "POST" || got.RequestURI != "/hook?x=1" || got.Host != s.ln.Addr().String() ||
		got.Header.Get("Webhook-Id") != "msg_1" || got.ContentLength != 7 || got.UserAgent() != "hookpipe/1" ||
		got.Header.Get("X-Note") != "a  Injected: yes" || got.Header.Get("Injected") != "" {
		t.Fatalf("server read %s %s host %s headers %v length %d", got.Method, got.RequestURI, got.Host, got.Header, got.ContentLength)
	}
	u.Scheme = "https"
	if _, err := tr.Post(ctx(t), &Request{URL: u}); err == nil {
		t.Fatal("https accepted")
	}
}
