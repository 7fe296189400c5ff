// Package redistest gives tests a real redis-server: the shared one that
// `make test` starts (WEBHOOKS_TEST_REDIS_URL), under a key prefix of
// their own, or a private one they can kill and restart.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/redis/go-redis/v9"
)

// EnvURL names the shared test server; `make test` sets it.
const EnvURL = "WEBHOOKS_TEST_REDIS_URL"

// Shared returns the shared test server's URL and a fresh key prefix
// whose keys are deleted when the test ends. It skips the test when
// WEBHOOKS_TEST_REDIS_URL is unset (fails it when services are required,
// see testkit.NeedService).
func Shared(tb testing.TB) (url, prefix string) {
	tb.Helper()
	url = os.Getenv(EnvURL)
	if url == "" {
		testkit.NeedService(tb, EnvURL+" is not set: this test needs a real redis-server (`make test` starts one; or run "+
			"`bash pipeline/scripts/services.sh start redis 16379 .build/test-services/redis` and export "+EnvURL+"=redis://127.0.0.1:16379/0)")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix = "test:" + hex.EncodeToString(b) + ":"
	tb.Cleanup(func() { deleteKeys(url, prefix) })
	return url, prefix
}

// deleteKeys removes every key under prefix (and redis_rate's "rate:"
// copies of them).
func deleteKeys(url, prefix string) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, pattern := range []string{prefix + "*", "rate:" + prefix + "*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}
}

// Server is a private redis-server on a free 127.0.0.1 port.
type Server struct {
	tb   testing.TB
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs a private redis-server (no persistence) that the test may
// Kill and Restart; it is stopped when the test ends. It skips the test
// when redis-server is not installed.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testkit.NeedService(tb, "redis-server is not installed (apt-get install redis-server)")
	}
	s := &Server{tb: tb}
	// The port is free when chosen, but another process may bind it
	// before redis-server does: then another one is tried.
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		err = s.start()
		if err == nil {
			break
		}
		if try == 3 {
			tb.Fatal(err)
		}
		tb.Logf("%v; trying another port", err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// URL is the server's URL, database 0.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Pid is the running server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Restart starts the server again on its port and waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *Server) start() error {
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.tb.TempDir())
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("redis-server: %w", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s.pong() {
			return nil
		}
		select {
		case <-s.done:
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d exited at start", s.Port)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d did not answer within 20s", s.Port)
		}
	}
}

// pong reports whether a Redis answers PING on the port: a process that
// took the port first does not.
func (s *Server) pong() bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	b := make([]byte, 7)
	_, err = io.ReadFull(c, b)
	return err == nil && string(b) == "+PONG\r\n"
}

// Kill stops the server at once (SIGKILL) and waits until it is gone.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
