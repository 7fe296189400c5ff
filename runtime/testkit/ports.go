package testkit

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// handed is every port FreePorts returned in this process: never twice.
var handed struct {
	sync.Mutex
	ports map[int]bool
}

// FreePorts finds n free 127.0.0.1 ports in a row, for a server the test
// starts later, and returns the first. They lie below the kernel's range
// of ephemeral ports, so no listener on port 0 (an httptest server, a
// receiver) and no outgoing connection can be given one of them before
// the server binds it (a port chosen by listening on port 0 and closing
// was given to the next httptest server at once, once in CI). Another
// process may still take one: a server that cannot bind fails its test.
func FreePorts(tb testing.TB, n int) int {
	tb.Helper()
	lo, hi := 20000, ephemeralLow()-n
	if hi <= lo {
		tb.Fatalf("no room for %d ports below the ephemeral range", n)
	}
	handed.Lock()
	defer handed.Unlock()
	if handed.ports == nil {
		handed.ports = map[int]bool{}
	}
	for range 100 {
		port := lo + rand.IntN(hi-lo)
		ok := true
		for p := port; ok && p < port+n; p++ {
			ok = !handed.ports[p] && free(p)
		}
		if ok {
			for p := port; p < port+n; p++ {
				handed.ports[p] = true
			}
			return port
		}
	}
	tb.Fatalf("no %d free ports in a row", n)
	return 0
}

// FreePort is one port of FreePorts.
func FreePort(tb testing.TB) int {
	tb.Helper()
	return FreePorts(tb, 1)
}

// FreeAddr is FreePort as a 127.0.0.1 address.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), Linux's default when unreadable.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
