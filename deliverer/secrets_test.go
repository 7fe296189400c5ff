package deliverer

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/endpointtest"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// echo answers status with everything the request held: its headers and
// body, the worst an endpoint can do with what it was sent.
func echo(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, "%v %s", r.Header, b)
	}
}

// TestSecretsStayHidden: the secrets of every kind the deliverer holds (the
// signing secrets, basic, bearer and OAuth2 credentials and the tokens
// fetched with them, a client certificate's private key, the egress proxy's
// password) appear in no log line (at debug level), attempt record, retry,
// dead letter or stored subscription, nor in /metrics, while endpoints that
// echo their requests refuse or fail every delivery.
func TestSecretsStayHidden(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	h := newHarness(t, nil)
	h.log = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zap.DebugLevel))

	proxy := endpointtest.NewConnectProxy(t, "egress", "proxy-pass-5f0c1d")
	const clientSecret = "cs_8f14e45fceea167a"
	ts := endpointtest.NewTokenServer(t, "hookpipe", clientSecret)
	refuse := httptest.NewServer(echo(http.StatusBadRequest))
	t.Cleanup(refuse.Close)
	fail := httptest.NewServer(echo(http.StatusInternalServerError))
	t.Cleanup(fail.Close)
	server, client := testcert.New(t, "endpoint"), testcert.New(t, "client")
	tlsEndpoint := httptest.NewUnstartedServer(echo(http.StatusBadRequest))
	trusted := x509.NewCertPool()
	trusted.AddCert(client.X509)
	tlsEndpoint.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: trusted}
	tlsEndpoint.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsEndpoint.StartTLS()
	t.Cleanup(tlsEndpoint.Close)

	subs := []topics.Subscription{
		newSub(t, "sub_basic", refuse.URL), newSub(t, "sub_bearer", refuse.URL), newSub(t, "sub_oauth", fail.URL),
		newSub(t, "sub_mtls", tlsEndpoint.URL), newSub(t, "sub_header", fail.URL),
	}
	subs[0].Auth = &topics.EndpointAuth{Type: topics.AuthBasic, Username: "hooks", Password: "pw_correct-horse-battery"}
	subs[1].Auth = &topics.EndpointAuth{Type: topics.AuthBearer, Token: "bt_0123456789abcdef"}
	subs[2].Auth = &topics.EndpointAuth{Type: topics.AuthOAuth2, TokenURL: ts.Srv.URL, ClientID: "hookpipe", ClientSecret: clientSecret}
	subs[3].Auth = &topics.EndpointAuth{Type: topics.AuthMTLS, Certificate: string(client.CertPEM), Key: string(client.KeyPEM), CA: string(server.CertPEM)}
	subs[4].Headers = map[string]string{"X-Api-Key": "hk_5d41402abc4b2a76"}
	secrets := []string{"proxy-pass-5f0c1d", endpointtest.BasicAuth("egress", "proxy-pass-5f0c1d"), endpointtest.BasicAuth("hooks", "pw_correct-horse-battery")}
	for _, s := range subs {
		h.putSub(s)
		secrets = append(secrets, s.Secret, strings.TrimPrefix(s.Secret, topics.SecretPrefix))
		secrets = append(secrets, s.Auth.Secrets()...)
	}
	// The private key's base64 lines, any of which would give part of it away.
	for _, line := range strings.Split(string(client.KeyPEM), "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, line)
		}
	}

	h.start(map[string]string{"WEBHOOKS_EGRESS_PROXY": "http://egress:proxy-pass-5f0c1d@" + proxy.Srv.Listener.Addr().String(),
		"WEBHOOKS_HTTP_ADDR": "127.0.0.1:0"})
	var events []string
	for _, s := range subs {
		for i := range 2 {
			d := newDelivery(s.ID, fmt.Sprintf("evt_%s_%d", s.ID, i))
			h.deliver(d)
			events = append(events, d.EventID)
		}
	}
	for _, id := range events {
		if a := h.waitAttempt(id); a.Outcome == topics.OutcomeSuccess {
			t.Fatalf("%s was delivered: %+v", id, a)
		}
	}
	if ts.Fetches() == 0 || len(proxy.Tunnels()) == 0 {
		t.Fatalf("%d tokens fetched, %d tunnels: the auth or the proxy was not used", ts.Fetches(), len(proxy.Tunnels()))
	}
	for i := range ts.Fetches() {
		secrets = append(secrets, fmt.Sprintf("tok-%d", i+1))
	}

	places := map[string]string{"logs": logs.String(), "metrics": scrapeMetrics(t, logs.String())}
	for _, topic := range append([]string{h.names.Attempts(), h.names.DLQ(), h.names.Subscriptions()}, h.names.RetryTopics()...) {
		recs := h.records(topic)
		if topic == h.names.Subscriptions() {
			recs = h.readAll(topic)
		}
		var all strings.Builder
		for _, r := range recs {
			all.Write(r.Key)
			all.Write(r.Value)
			for _, hd := range r.Headers {
				all.WriteString(hd.Key + "=" + string(hd.Value))
			}
		}
		places[topic] = all.String()
	}
	if !strings.Contains(places[h.names.Attempts()], "Bearer [redacted]") || len(h.records(h.names.DLQ())) == 0 {
		t.Errorf("no attempt shows a redacted sample or no dead letter was written: the echoing endpoints were not heard")
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s show a secret (%.6s...)", where, s)
			}
		}
	}
}

// scrapeMetrics reads /metrics at the address the deliverer logged.
func scrapeMetrics(t *testing.T, logs string) string {
	t.Helper()
	var addr string
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "serving /metrics") {
			addr = l.Addr
		}
	}
	if addr == "" {
		t.Fatal("the deliverer did not log its metrics address")
	}
	var body []byte
	testkit.WaitFor(t, 10*time.Second, "/metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return string(body)
}
