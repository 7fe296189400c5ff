package send

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit/endpointtest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestEgressProxy: with WEBHOOKS_EGRESS_PROXY every request goes through
// the CONNECT proxy, which is asked for the address the SSRF guard checked
// (not the name, which it would resolve again); an address the guard
// refuses never reaches the proxy; a proxy refusing the tunnel is a
// failure that names its status and never the credentials.
func TestEgressProxy(t *testing.T) {
	var got int
	var mu sync.Mutex
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(endpoint.Close)
	port := endpoint.URL[strings.LastIndexByte(endpoint.URL, ':')+1:]
	proxy := endpointtest.NewConnectProxy(t, "egress", "s3cret-pw")
	proxyURL := func(user, pw string) string {
		u, _ := url.Parse(proxy.Srv.URL)
		u.User = url.UserPassword(user, pw)
		return u.String()
	}
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	secret, err := topics.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	sub := &topics.Subscription{ID: "sub_1", URL: "http://localhost:" + port + "/hooks", EventTypes: []string{"*"}, Enabled: true, Secret: secret}
	del := &topics.Delivery{SubscriptionID: "sub_1", EventID: "evt_1", EventType: "a", Timestamp: time.Now().Format(time.RFC3339), Data: []byte(`{}`), Attempt: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	h := HTTP{AllowCIDRs: loopback, EgressProxy: proxyURL("egress", "s3cret-pw"), ConnectTimeout: 5 * time.Second}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	res := NewProber(h).Probe(ctx, sub, del)
	tunnels := proxy.Tunnels()
	if !res.Delivered || got != 1 || len(tunnels) != 1 {
		t.Fatalf("through the proxy: %+v, endpoint got %d, tunnels %v", res, got, tunnels)
	}
	if host, _, _ := net.SplitHostPort(tunnels[0]); !netip.MustParseAddr(host).IsLoopback() {
		t.Fatalf("the proxy was asked for %q, want the checked address, not the name", tunnels[0])
	}

	res = NewProber(HTTP{EgressProxy: h.EgressProxy, ConnectTimeout: 5 * time.Second}).Probe(ctx, sub, del)
	if res.Delivered || res.Category != topics.FailureBlockedAddr || len(proxy.Tunnels()) != 1 {
		t.Fatalf("a refused address: %+v, tunnels %v; want blocked before any CONNECT", res, proxy.Tunnels())
	}

	res = NewProber(HTTP{AllowCIDRs: loopback, EgressProxy: proxyURL("egress", "wrong"), ConnectTimeout: 5 * time.Second}).Probe(ctx, sub, del)
	if res.Delivered || !strings.Contains(res.Error, "407") || strings.Contains(res.Error, "wrong") || strings.Contains(res.Error, "s3cret") {
		t.Fatalf("wrong proxy credentials: %+v", res)
	}

	for _, bad := range []string{"socks5://p:1080", "http://p", "http://u:pw@p:3128/path", ":::"} {
		err := (&HTTP{EgressProxy: bad}).Validate()
		if err == nil || !strings.Contains(err.Error(), "WEBHOOKS_EGRESS_PROXY") || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
