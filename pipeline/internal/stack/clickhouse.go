package stack

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// StartClickHouse runs a real clickhouse-server on 127.0.0.1 (native
// protocol on tcpPort, HTTP on httpPort) with its data, logs and generated
// configuration under dir. It returns nil, nil when a server already
// answers on tcpPort (use it), and an error saying what to install when the
// binary is missing.
func StartClickHouse(ctx context.Context, tcpPort, httpPort int, dir, logDir string) (*Process, error) {
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server", "/usr/bin/clickhouse"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("clickhouse-server not found: install it with `apt-get install clickhouse-server` (Debian) or run `bash pipeline/scripts/services.sh install`")
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort))
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, nil // already running: use it
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := writeClickHouseConfig(dir, tcpPort, httpPort); err != nil {
		return nil, err
	}
	args := []string{"--config-file=" + filepath.Join(dir, "config.xml")}
	if filepath.Base(bin) == "clickhouse" {
		args = append([]string{"server"}, args...)
	}
	p, err := Start("clickhouse", bin, args, os.Environ(), logDir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("clickhouse-server exited: see %s and %s", p.LogPath, filepath.Join(dir, "log"))
		case <-ctx.Done():
			_ = p.Stop(10 * time.Second)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = p.Stop(10 * time.Second)
	return nil, fmt.Errorf("clickhouse-server did not answer on %s within 60s: see %s", addr, p.LogPath)
}

// The one ClickHouse server configuration, also written by
// pipeline/scripts/services.sh for make test: 127.0.0.1 only, everything
// under the data directory, no interserver port, UTC.
//
//go:embed clickhouse/config.xml
var clickhouseConfig string

//go:embed clickhouse/users.xml
var clickhouseUsers string

// writeClickHouseConfig fills the configuration in for dir and the ports.
func writeClickHouseConfig(dir string, tcpPort, httpPort int) error {
	config := strings.NewReplacer("@DIR@", dir, "@TCP_PORT@", strconv.Itoa(tcpPort),
		"@HTTP_PORT@", strconv.Itoa(httpPort)).Replace(clickhouseConfig)
	for name, body := range map[string]string{
		"config.xml":  config,
		"users.xml":   clickhouseUsers,
		"metrika.xml": "<?xml version=\"1.0\"?>\n<yandex></yandex>\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Recorded counts the rows in the attempts table for the demo's progress
// line, asking ClickHouse every few seconds (count() of a MergeTree table is
// read from part metadata: cheap).
type Recorded struct {
	n atomic.Int64 // -1 until the first answer
}

// NewRecorded returns a counter that knows nothing yet.
func NewRecorded() *Recorded {
	r := &Recorded{}
	r.n.Store(-1)
	return r
}

// Run asks until ctx is done; failures (the table does not exist yet,
// ClickHouse is down) keep the last count.
func (r *Recorded) Run(ctx context.Context, addr, database string, every time.Duration) {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	if err != nil {
		return
	}
	defer conn.Close()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var n uint64
		if err := conn.QueryRow(qctx, "SELECT count() FROM "+database+".attempts").Scan(&n); err == nil {
			r.n.Store(int64(n))
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// String is " | recorded N" for the progress line, or "" until known.
func (r *Recorded) String() string {
	n := r.n.Load()
	if n < 0 {
		return ""
	}
	return fmt.Sprintf(" | recorded %d", n)
}
