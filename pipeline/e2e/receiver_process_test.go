package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// envReceiverProcess, set to a port, makes the test binary a receiver
// process (serveReceiver) instead of running tests.
const envReceiverProcess = "WEBHOOKS_E2E_RECEIVER_PORT"

// envReceiverTLS, set to a directory with cert.pem and key.pem, makes a
// receiver process serve https (TLS 1.3, HTTP/2 offered) with them.
const envReceiverTLS = "WEBHOOKS_E2E_RECEIVER_TLS"

// controlPrefix is where a receiver process takes its instructions and
// tells what it received; subscription ids never start with '_'.
const controlPrefix = "/_/"

// serveReceiver runs a lean receiver on 127.0.0.1:port, answering 204 to
// every request it verifies, until SIGTERM: an endpoint in a process of
// its own, as a subscriber's is, whose CPU, garbage collections and
// scheduling are apart from the benchmark's producer's.
func serveReceiver(port string) int {
	r := &receiver{secrets: map[string]string{}, perSub: map[string]int{}, lean: true}
	mux := http.NewServeMux()
	mux.Handle("/", r)
	mux.HandleFunc("POST "+controlPrefix+"trust", func(_ http.ResponseWriter, q *http.Request) {
		r.trust(topics.Subscription{ID: q.FormValue("sub"), Secret: q.FormValue("secret")})
	})
	mux.HandleFunc("GET "+controlPrefix+"accepted", func(w http.ResponseWriter, q *http.Request) {
		fmt.Fprint(w, r.accepted(q.FormValue("prefix")))
	})
	mux.HandleFunc("GET "+controlPrefix+"count", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, r.count())
	})
	mux.HandleFunc("GET "+controlPrefix+"invalid", func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		_ = json.NewEncoder(w).Encode(r.invalid)
	})
	mux.HandleFunc("GET "+controlPrefix+"got", func(w http.ResponseWriter, q *http.Request) {
		from, _ := strconv.Atoi(q.FormValue("from"))
		reqs := r.got()
		_ = json.NewEncoder(w).Encode(reqs[min(max(from, 0), len(reqs)):])
	})
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "receiver listening on %s since %s\n", l.Addr(), time.Now().Format(time.RFC3339Nano))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if dir := os.Getenv(envReceiverTLS); dir != "" {
		go func() { _ = srv.ServeTLS(l, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")) }()
	} else {
		go func() { _ = srv.Serve(l) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	return 0
}

// receiverProcess is the benchmark's side of a receiver process.
type receiverProcess struct {
	t      testing.TB
	base   string // http://127.0.0.1:port, or https://
	proc   *stack.Process
	roots  *x509.CertPool // with https: the CA of its certificate
	client *http.Client   // for the control paths
}

// newReceiverProcess starts the test binary as a receiver process.
func newReceiverProcess(t testing.TB) *receiverProcess {
	t.Helper()
	p, addr, _ := startSelf(t, "receiver", envReceiverProcess)
	return waitReceiverProcess(t, &receiverProcess{t: t, base: "http://" + addr, proc: p, client: http.DefaultClient})
}

// newReceiverProcessTLS starts a receiver process serving https with a
// certificate of a CA of its own, whose PEM file it returns (for
// SSL_CERT_FILE: the deliverer trusts it as a system root).
func newReceiverProcessTLS(t testing.TB) (*receiverProcess, string) {
	t.Helper()
	c := testcert.New(t, "receiver")
	dir := t.TempDir()
	ca := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(ca, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p, addr, _ := startSelf(t, "receiver-tls", envReceiverProcess, envReceiverTLS+"="+dir)
	roots := x509.NewCertPool()
	roots.AddCert(c.X509)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	return waitReceiverProcess(t, &receiverProcess{t: t, base: "https://" + addr, proc: p, roots: roots, client: client}), ca
}

func waitReceiverProcess(t testing.TB, r *receiverProcess) *receiverProcess {
	t.Helper()
	wait(t, 30*time.Second, "the receiver process to listen", func() bool {
		_, err := r.get("count")
		return err == nil
	})
	return r
}

func (r *receiverProcess) url(sub string) string { return r.base + "/" + sub }

func (r *receiverProcess) pid() int { return r.proc.Pid() }

// tlsRoots is the CA of an https receiver's certificate (nil with http).
func (r *receiverProcess) tlsRoots() *x509.CertPool { return r.roots }

// get reads a control path's answer.
func (r *receiverProcess) get(path string) ([]byte, error) {
	resp, err := r.client.Get(r.base + controlPrefix + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("receiver %s: %s", path, resp.Status)
	}
	return b, err
}

// number reads a control path's number, failing the benchmark on error.
func (r *receiverProcess) number(path string) int {
	b, err := r.get(path)
	if err != nil {
		r.t.Fatal(err)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		r.t.Fatalf("receiver %s: %v", path, err)
	}
	return n
}

func (r *receiverProcess) trust(s topics.Subscription) {
	resp, err := r.client.PostForm(r.base+controlPrefix+"trust", url.Values{"sub": {s.ID}, "secret": {s.Secret}})
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("receiver trust %s: %s", s.ID, resp.Status)
	}
}

func (r *receiverProcess) accepted(prefix string) int {
	return r.number("accepted?prefix=" + url.QueryEscape(prefix))
}

func (r *receiverProcess) count() int { return r.number("count") }

// got returns the accepted requests from the from-th on, as a lean
// receiver keeps them (subscription, id, type and times).
func (r *receiverProcess) got(from int) []request {
	b, err := r.get("got?from=" + strconv.Itoa(from))
	var reqs []request
	if err == nil {
		err = json.Unmarshal(b, &reqs)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return reqs
}

// checkSignatures fails the benchmark if a request failed verification.
func (r *receiverProcess) checkSignatures() {
	b, err := r.get("invalid")
	var invalid []string
	if err == nil {
		err = json.Unmarshal(b, &invalid)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	if len(invalid) > 0 {
		r.t.Errorf("%d requests failed signature verification, first: %s", len(invalid), invalid[0])
	}
}

// TestReceiverProcess: a receiver process accepts what is signed with a
// secret it was told, refuses and counts what is not, and tells what it
// accepted: the benchmark's own check that its instrument answers as it
// reads.
func TestReceiverProcess(t *testing.T) {
	r := newReceiverProcess(t)
	secret, err := topics.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	r.trust(topics.Subscription{ID: "rp-1", Secret: secret})
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Truncate(time.Millisecond)
	post := func(sub, id string, sign bool) int {
		body := []byte(`{"id":"` + id + `","type":"t.x","timestamp":"` + created.Format(time.RFC3339Nano) + `","data":{}}`)
		req, err := http.NewRequest(http.MethodPost, r.url(sub), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", "v1,bm90IHNpZ25lZA==")
		if sign {
			sig, err := wh.Sign(id, now, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("webhook-signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("rp-1", "evt_a", true); code != http.StatusNoContent {
		t.Fatalf("signed request answered %d, want 204", code)
	}
	if code := post("rp-1", "evt_b", false); code != http.StatusUnauthorized {
		t.Fatalf("unsigned request answered %d, want 401", code)
	}
	if code := post("rp-1", "evt_c", true); code != http.StatusNoContent {
		t.Fatalf("signed request answered %d, want 204", code)
	}
	if n := r.count(); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	if n, m := r.accepted("rp-"), r.accepted("other"); n != 2 || m != 0 {
		t.Fatalf("accepted = %d for rp- and %d for other, want 2 and 0", n, m)
	}
	got := r.got(1)
	if len(got) != 1 || got[0].ID != "evt_c" || got[0].Sub != "rp-1" || got[0].Type != "t.x" ||
		!got[0].Timestamp.Equal(created) || got[0].At.Before(created) {
		t.Fatalf("got(1) = %+v, want evt_c of rp-1 created at %s", got, created)
	}
	b, err := r.get("invalid")
	if err != nil || !strings.Contains(string(b), "rp-1") {
		t.Fatalf("invalid = %s (%v), want the unsigned request", b, err)
	}
}
