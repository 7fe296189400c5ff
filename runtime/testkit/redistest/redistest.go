// Package redistest gives tests a real redis-server: the shared one that
// `make test` starts (WEBHOOKS_TEST_REDIS_URL), under a key prefix of
// their own, or a private one they can kill and restart; and a real Redis
// Cluster the same two ways (WEBHOOKS_TEST_REDIS_CLUSTER_ADDRS).
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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/redisstate"
	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/redis/go-redis/v9"
)

// EnvURL names the shared test server; `make test` sets it.
const EnvURL = "WEBHOOKS_TEST_REDIS_URL"

// EnvClusterAddrs lists the nodes of the shared test Redis Cluster
// (host:port, comma-separated); `make test` sets it.
const EnvClusterAddrs = "WEBHOOKS_TEST_REDIS_CLUSTER_ADDRS"

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
	prefix = newPrefix()
	tb.Cleanup(func() {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		deleteKeys(rdb, prefix)
	})
	return url, prefix
}

// SharedCluster returns the addresses of the shared test Redis Cluster
// (comma-separated, as WEBHOOKS_REDIS_CLUSTER_ADDRS takes them) and a
// fresh key prefix whose keys are deleted when the test ends. It skips the
// test when WEBHOOKS_TEST_REDIS_CLUSTER_ADDRS is unset (fails it when
// services are required).
func SharedCluster(tb testing.TB) (addrs, prefix string) {
	tb.Helper()
	addrs = os.Getenv(EnvClusterAddrs)
	if addrs == "" {
		testkit.NeedService(tb, EnvClusterAddrs+" is not set: this test needs a real Redis Cluster (`make test` starts one; or run "+
			"`bash pipeline/scripts/services.sh start redis-cluster 17100 .build/test-services/redis-cluster` and export "+
			EnvClusterAddrs+"=127.0.0.1:17100,127.0.0.1:17101,127.0.0.1:17102)")
	}
	prefix = newPrefix()
	tb.Cleanup(func() {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rdb.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
			deleteKeys(node, prefix)
			return nil
		})
	})
	return addrs, prefix
}

func newPrefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "test:" + hex.EncodeToString(b) + ":"
}

// deleteKeys removes every key of one server under prefix (and
// redis_rate's "rate:" copies of them).
func deleteKeys(rdb *redis.Client, prefix string) {
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
	args []string // more redis-server arguments
	dir  string
	conf string // a Sentinel's config file
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs a private redis-server (no persistence) that the test may
// Kill and Restart; it is stopped when the test ends. It skips the test
// when redis-server is not installed.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb)
}

func start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testkit.NeedService(tb, "redis-server is not installed (apt-get install redis-server)")
	}
	s := &Server{tb: tb, args: args, dir: tb.TempDir()}
	s.startOnFreePort(func() {})
	return s
}

// startOnFreePort starts s on a free port, calling prepare once the port
// is chosen; it is killed when the test ends. The port is free when
// chosen, but another process may bind it before redis-server does: then
// another one is tried.
func (s *Server) startOnFreePort(prepare func()) {
	s.tb.Helper()
	for try := 1; ; try++ {
		s.Port = testkit.FreePort(s.tb)
		prepare()
		err := s.start()
		if err == nil {
			break
		}
		if try == 3 {
			s.tb.Fatal(err)
		}
		s.tb.Logf("%v; trying another port", err)
	}
	s.tb.Cleanup(s.Kill)
}

// URL is the server's URL, database 0.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Pid is the running server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Restart starts the server again on its port and waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *Server) start() error {
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir}
	if s.conf != "" {
		// A Sentinel: its config file (which it rewrites) comes first.
		args = append([]string{s.conf, "--sentinel", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1"}, s.args...)
	} else {
		args = append(args, s.args...)
	}
	s.cmd = exec.Command("redis-server", args...)
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

// Cluster is a private Redis Cluster of three masters (no replicas, full
// slot coverage not required: a dead master fails only its slots).
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs a private Redis Cluster that the test may kill nodes
// of; it is stopped when the test ends. It skips the test when
// redis-server or redis-cli is not installed.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		testkit.NeedService(tb, "redis-cli is not installed (apt-get install redis-tools)")
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range 3 {
		n := start(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no")
		c.Nodes = append(c.Nodes, n)
		args = append(args, n.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		testkit.WaitFor(tb, 30*time.Second, "cluster_state:ok on "+n.Addr(), func() bool {
			info, err := rdb.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		rdb.Close()
	}
	return c
}

// Addrs is the nodes' addresses, comma-separated (as
// WEBHOOKS_REDIS_CLUSTER_ADDRS takes them).
func (c *Cluster) Addrs() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr())
	}
	return strings.Join(addrs, ",")
}

// Topologies runs fn as two subtests: "single" on the shared server
// (Shared) and "cluster" on the shared Redis Cluster (SharedCluster), each
// with a Config locating it under a fresh key prefix. Timeout and
// RetryInterval are left for fn to set.
func Topologies(t *testing.T, fn func(t *testing.T, cfg redisstate.Config)) {
	t.Run("single", func(t *testing.T) {
		url, prefix := Shared(t)
		fn(t, redisstate.Config{URL: url, KeyPrefix: prefix})
	})
	t.Run("cluster", func(t *testing.T) {
		addrs, prefix := SharedCluster(t)
		fn(t, redisstate.Config{URL: "redis://", ClusterAddrs: addrs, KeyPrefix: prefix})
	})
}

// Placed is a subscription and the node holding its key.
type Placed struct {
	Sub  string
	Node *Server
}

// SubsOnTwoMasters finds two subscriptions whose keys (key(sub)) are on
// different masters of the cluster.
func (c *Cluster) SubsOnTwoMasters(tb testing.TB, key func(sub string) string) (a, b Placed) {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(c.Addrs(), ",")})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 100 {
		sub := "s" + strconv.Itoa(i)
		m, err := rdb.MasterForKey(ctx, key(sub))
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range c.Nodes {
			if n.Addr() != m.Options().Addr {
				continue
			}
			switch {
			case a.Node == nil:
				a = Placed{sub, n}
			case n != a.Node:
				return a, Placed{sub, n}
			}
		}
	}
	tb.Fatal("100 subscriptions on one master")
	return a, b
}

// StartSentinel runs a private Sentinel watching master under the name
// master (quorum 1); it is stopped when the test ends.
func StartSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	s := &Server{tb: tb, dir: tb.TempDir()}
	s.conf = filepath.Join(s.dir, "sentinel.conf")
	// Written before each try: a Sentinel rewrites its config file.
	s.startOnFreePort(func() {
		conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 1000\n", name, master.Port, name)
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			tb.Fatal(err)
		}
	})
	return s
}
