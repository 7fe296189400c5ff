package ssrf

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
)

func TestAllowed(t *testing.T) {
	tests := []struct {
		ip   string
		want bool
	}{
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"127.0.0.1", false},
		{"127.255.0.9", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"172.32.0.1", true},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"100.64.0.1", false},
		{"100.100.100.200", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"0.0.0.0", false},
		{"::", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:8.8.8.8", true},
		{"fd00:ec2::254", false},
		{"fc00::1", false},
		{"fe80::1", false},
		{"::1%lo", false},
		{"fe80::1%eth0", false},
		{"fd00:ec2::254%eth0", false},
		{"2606:4700::1111%eth0", true},
		{"ff02::1", false},
		{"64:ff9b::a00:1", false},
		{"::127.0.0.1", false},         // IPv4-compatible
		{"::a00:1", false},             // IPv4-compatible 10.0.0.1
		{"::ffff:0:7f00:1", false},     // IPv4-translated 127.0.0.1
		{"2001:0:4136:e378::1", false}, // Teredo
		{"2001:4860:4860::8888", true}, // public, just past Teredo's /32
	}
	g := New(nil)
	for _, tt := range tests {
		if got := g.Allowed(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("Allowed(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

func TestAllowlist(t *testing.T) {
	allow, err := ParseCIDRs("127.0.0.0/8, 10.0.0.5")
	if err != nil {
		t.Fatal(err)
	}
	g := New(allow)
	for ip, want := range map[string]bool{"127.0.0.1": true, "::ffff:127.0.0.1": true, "10.0.0.5": true, "10.0.0.6": false, "::1": false} {
		if got := g.Allowed(netip.MustParseAddr(ip)); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", ip, got, want)
		}
	}
	if _, err := ParseCIDRs("10.0.0.0/33"); err == nil {
		t.Error("ParseCIDRs accepted a bad prefix")
	}
	if _, err := ParseCIDRs("localhost"); err == nil {
		t.Error("ParseCIDRs accepted a name")
	}
}

// TestDialRefusesResolvedLoopback connects through a real dialer to a real
// server on 127.0.0.1, reached both by address and by a name that resolves
// to it: the guard refuses both, and the allowlist lets them through.
func TestDialRefusesResolvedLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	get := func(g *Guard, host string) error {
		d := &net.Dialer{Timeout: 5 * time.Second, Control: g.Control}
		c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port), nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := get(New(nil), host); !errors.Is(err, classify.ErrBlockedAddress) {
			t.Errorf("dial %s without allowlist: err = %v, want ErrBlockedAddress", host, err)
		}
		allow, _ := ParseCIDRs("127.0.0.0/8,::1")
		if err := get(New(allow), host); err != nil {
			t.Errorf("dial %s with allowlist: %v", host, err)
		}
	}
}
