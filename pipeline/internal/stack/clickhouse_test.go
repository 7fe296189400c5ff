package stack

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// TestStartClickHouse: the generated configuration starts a server that
// answers on its port with everything under its directory; the progress
// counter reads the attempts table once it exists; Stop ends the server.
func TestStartClickHouse(t *testing.T) {
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		if _, err := exec.LookPath("/usr/sbin/clickhouse-server"); err != nil {
			testkit.NeedService(t, "clickhouse-server is not installed (make deps installs it)")
		}
	}
	dir := t.TempDir()
	tcp, http := testkit.FreePort(t), testkit.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := StartClickHouse(ctx, tcp, http, filepath.Join(dir, "clickhouse"), filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		t.Fatal("StartClickHouse found a server already on a free port")
	}
	defer func() { _ = p.Stop(30 * time.Second) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp))
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var tz string
	if err := conn.QueryRow(ctx, "SELECT timezone()").Scan(&tz); err != nil || tz != "UTC" && tz != "Etc/UTC" {
		t.Fatalf("SELECT timezone() = %q, %v; want UTC", tz, err)
	}
	if again, err := StartClickHouse(ctx, tcp, http, filepath.Join(dir, "other"), filepath.Join(dir, "logs")); err != nil || again != nil {
		t.Errorf("second start on a busy port = %v, %v; want nil, nil (use the running server)", again, err)
	}

	rec := NewRecorded()
	if s := rec.String(); s != "" {
		t.Errorf("unknown count renders %q", s)
	}
	for _, q := range []string{"CREATE DATABASE wh", "CREATE TABLE wh.attempts (x UInt8) ENGINE = MergeTree() ORDER BY x"} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO wh.attempts (x)")
	if err != nil {
		t.Fatal(err)
	}
	for x := range uint8(3) {
		if err := b.Append(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(rctx, addr, "wh", 10*time.Millisecond) }()
	for rec.String() != " | recorded 3" {
		select {
		case <-ctx.Done():
			t.Fatalf("progress counter says %q", rec.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	<-done

	if err := p.Stop(30 * time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the server still answers after Stop")
	}
}
