package deliverer

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// TestEndpointAuth: basic and bearer auth reach the endpoint in the
// Authorization header; an endpoint that echoes its request leaves neither
// the password, the token nor the header value in the response sample.
func TestEndpointAuth(t *testing.T) {
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, ok := r.BasicAuth()
		switch {
		case ok && user == "hooks" && pw == "correct-horse-battery":
		case r.Header.Get("Authorization") == "Bearer tok_0123456789abcdef":
		default:
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "you sent: "+r.Header.Get("Authorization")+" "+pw)
	}))
	t.Cleanup(endpoint.Close)
	p := NewProber(HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ConnectTimeout: 5 * time.Second})
	secret, err := topics.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	del := &topics.Delivery{SubscriptionID: "sub_1", EventID: "evt_1", EventType: "a", Timestamp: time.Now().Format(time.RFC3339), Data: []byte(`{}`), Attempt: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, a := range []*topics.EndpointAuth{
		{Type: topics.AuthBasic, Username: "hooks", Password: "correct-horse-battery"},
		{Type: topics.AuthBearer, Token: "tok_0123456789abcdef"},
		nil,
	} {
		sub := &topics.Subscription{ID: "sub_1", URL: endpoint.URL + "/hooks", EventTypes: []string{"*"}, Enabled: true, Secret: secret, Auth: a}
		res := p.Probe(ctx, sub, del)
		if a == nil {
			if res.Status != http.StatusUnauthorized {
				t.Fatalf("without auth: %+v", res)
			}
			continue
		}
		if !res.Delivered || !strings.Contains(res.Body, "[redacted]") {
			t.Fatalf("%s: %+v", a.Type, res)
		}
		for _, s := range append(a.Secrets(), strings.TrimPrefix(strings.TrimPrefix(authorization(a), "Basic "), "Bearer ")) {
			if strings.Contains(res.Body, s) {
				t.Fatalf("%s: the response sample shows %q: %q", a.Type, s, res.Body)
			}
		}
	}
}
