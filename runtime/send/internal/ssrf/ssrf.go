// Package ssrf refuses connections to addresses a webhook must never reach:
// loopback, private, link-local, CGNAT, multicast, unspecified, reserved and
// cloud-metadata addresses. It checks at dial time, after name resolution,
// so DNS rebinding cannot slip past it. An allowlist of CIDRs reopens ranges
// for development and tests.
package ssrf

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
)

// blocked are refused unless allowlisted.
var blocked = mustPrefixes(
	"0.0.0.0/8",       // unspecified, "this network"
	"10.0.0.0/8",      // RFC 1918
	"100.64.0.0/10",   // CGNAT (also Alibaba's metadata 100.100.100.200)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local (AWS/GCP/Azure metadata 169.254.169.254)
	"172.16.0.0/12",   // RFC 1918
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation
	"192.168.0.0/16",  // RFC 1918
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation
	"203.0.113.0/24",  // documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, broadcast
	"::/96",           // unspecified, loopback (::1), IPv4-compatible (::127.0.0.1)
	"::ffff:0:0:0/96", // IPv4-translated (RFC 2765)
	"64:ff9b::/96",    // NAT64: embeds IPv4, may point inside
	"64:ff9b:1::/48",  // local-use NAT64
	"100::/64",        // discard
	"2001::/32",       // Teredo: embeds an IPv4 address
	"2001:db8::/32",   // documentation
	"2002::/16",       // 6to4: embeds IPv4
	"fc00::/7",        // unique local (AWS IPv6 metadata fd00:ec2::254)
	"fe80::/10",       // link-local
	"ff00::/8",        // multicast
)

// Guard decides which addresses may be dialled.
type Guard struct {
	allow []netip.Prefix
}

// New returns a guard that lets the allow prefixes through.
func New(allow []netip.Prefix) *Guard { return &Guard{allow: allow} }

// Allowed reports whether ip may be dialled.
func (g *Guard) Allowed(ip netip.Addr) bool {
	// ::ffff:127.0.0.1 is 127.0.0.1, and ::1%lo is ::1: a prefix never
	// contains an address with a zone.
	ip = ip.WithZone("").Unmap()
	for _, p := range g.allow {
		if p.Contains(ip) {
			return true
		}
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return false
		}
	}
	return ip.IsValid()
}

// Control is a net.Dialer Control hook: address is the resolved "ip:port"
// about to be connected.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparseable %q", classify.ErrBlockedAddress, address)
	}
	if !g.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", classify.ErrBlockedAddress, ap.Addr())
	}
	return nil
}

// ParseCIDRs parses a comma-separated list of CIDRs or single addresses.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR or address", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR or address", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}
