package recorder

import (
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/schema"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// clickHouseServer is a clickhouse-server of one test's own, started and
// stopped with the script the Makefile uses, so the test can stop it.
type clickHouseServer struct {
	t         *testing.T
	tcp, http string
	dir       string
}

func newClickHouseServer(t *testing.T) *clickHouseServer {
	t.Helper()
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		if _, err := exec.LookPath("/usr/sbin/clickhouse-server"); err != nil {
			testkit.NeedService(t, "clickhouse-server is not installed")
		}
	}
	s := &clickHouseServer{t: t, tcp: strconv.Itoa(testkit.FreePort(t)), http: strconv.Itoa(testkit.FreePort(t)), dir: t.TempDir()}
	s.script("start", "clickhouse", s.tcp, s.http, s.dir)
	t.Cleanup(s.stop)
	return s
}

func (s *clickHouseServer) addr() string { return net.JoinHostPort("127.0.0.1", s.tcp) }

func (s *clickHouseServer) start() { s.script("start", "clickhouse", s.tcp, s.http, s.dir) }

func (s *clickHouseServer) stop() { s.script("stop", "clickhouse", s.dir) }

func (s *clickHouseServer) script(args ...string) {
	s.t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join("..", "pipeline", "scripts", "services.sh")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("services.sh %v: %v\n%s", args, err, out)
	}
}

// TestClickHouseServerRestarted stops the real server mid-run and starts
// it again: the recorder keeps running and commits nothing while the
// server is down, and once it is back every attempt is there, once.
func TestClickHouseServerRestarted(t *testing.T) {
	t.Parallel()
	srv := newClickHouseServer(t)
	h := newHarness(t)
	h.ch = chtest.Conn(t, srv.addr())
	h.env[schema.EnvClickHouseAddr] = srv.addr()
	h.env["WEBHOOKS_RECORDER_BATCH_ROWS"] = "20"
	run := h.start(h.config())

	first := attempts(50, "before")
	h.produce(first...)
	h.waitRows(60*time.Second, len(first))
	waitFor(t, 30*time.Second, "the first commits", func() bool { return h.committedAll(topics.GroupRecorder) })
	before := h.committed(topics.GroupRecorder)

	srv.stop()
	during := attempts(150, "during")
	h.produce(during...)
	testkit.KeepsHolding(t, 2*time.Second, "nothing committed while ClickHouse is stopped", func() bool {
		return !run.Exited() && mapsEqual(h.committed(topics.GroupRecorder), before)
	})

	srv.start()
	all := append(first, during...)
	h.waitRows(120*time.Second, len(all))
	waitFor(t, 30*time.Second, "the group to commit to the end", func() bool { return h.committedAll(topics.GroupRecorder) })
	if got := h.count(false); got != uint64(len(all)) {
		t.Errorf("count() without FINAL = %d, want %d", got, len(all))
	}
	checkRows(t, h, all)
}
