package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// StartRedis runs a real redis-server on 127.0.0.1:port with its files
// under dir. It returns an error that says what to install when the binary
// is missing.
func StartRedis(ctx context.Context, port int, dir, logDir string) (*Process, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: install it with `apt-get install redis-server` (Debian) or run `bash pipeline/scripts/services.sh install`")
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, nil // already running: use it
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := Start("redis", bin, []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no"}, os.Environ(), logDir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("redis-server exited: see %s", p.LogPath)
		case <-ctx.Done():
			_ = p.Stop(5 * time.Second)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = p.Stop(5 * time.Second)
	return nil, fmt.Errorf("redis-server did not answer on %s within 20s: see %s", addr, p.LogPath)
}
