package redistest

import (
	"net"
	"os/exec"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestStartOnTakenPort: a port another process listens on is not taken
// for the Redis started on it, which cannot bind it.
func TestStartOnTakenPort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testkit.NeedService(t, "redis-server is not installed (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := &Server{tb: t, Port: l.Addr().(*net.TCPAddr).Port}
	if err := s.start(); err == nil {
		s.Kill()
		t.Fatal("started on a port another listener holds")
	}

	srv := Start(t)
	if !srv.pong() {
		t.Fatal("the started server does not answer PING")
	}
}
