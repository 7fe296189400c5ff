package queuetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// Kind is a kind of server, as services.sh names it.
type Kind string

// The kinds of server.
const (
	NATSServer Kind = "nats"
	RabbitMQ   Kind = "rabbitmq"
	ElasticMQ  Kind = "elasticmq"
)

// ports is how many ports in a row a server of the kind listens on: a
// RabbitMQ node has its Erlang distribution port and an epmd of its own
// after its AMQP port.
func (k Kind) ports() int {
	if k == RabbitMQ {
		return 3
	}
	return 1
}

// Server is a server of one test's own, started with services.sh on free
// 127.0.0.1 ports, its data in a directory of the test's. It is stopped
// when the test ends, its log written to the test's output if it failed.
type Server struct {
	tb   testing.TB
	Kind Kind
	Port int    // the client port (AMQP, NATS, HTTP)
	Dir  string // its data, config, logs
}

// Start starts a server of kind k for tb alone, and waits until it
// answers. It skips tb when services.sh cannot start k here (the package
// is not installed; fails it when services are required). A RabbitMQ node
// takes some seconds to boot.
func Start(tb testing.TB, k Kind) *Server {
	tb.Helper()
	if exec.Command("bash", script(), "installed", string(k)).Run() != nil {
		testkit.NeedService(tb, fmt.Sprintf("%s is not installed: run `bash pipeline/scripts/services.sh install` "+
			"(and install-elasticmq for elasticmq)", k))
	}
	s := &Server{tb: tb, Kind: k, Port: testkit.FreePorts(tb, k.ports()), Dir: tb.TempDir()}
	tb.Cleanup(func() {
		s.run("stop", string(s.Kind), s.Dir)
		if tb.Failed() {
			tb.Logf("--- %s log ---\n%s", s.Kind, s.log())
		}
	})
	s.Restart()
	return s
}

// URL is how a client reaches the server: a NATS URL, an AMQP URL (vhost
// /), or the SQS endpoint; with the credentials services.sh sets.
func (s *Server) URL() string {
	return serverURL(s.Kind, s.Port)
}

func serverURL(k Kind, port int) string {
	switch k {
	case NATSServer:
		return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", User, Password, port)
	case RabbitMQ:
		return fmt.Sprintf("amqp://%s:%s@127.0.0.1:%d/", User, Password, port)
	default:
		return fmt.Sprintf("http://127.0.0.1:%d", port)
	}
}

// Stop stops the server cleanly (SIGTERM) and waits until it is gone;
// its data stays for Restart.
func (s *Server) Stop() {
	s.tb.Helper()
	s.run("stop", string(s.Kind), s.Dir)
}

// Kill stops the server with SIGKILL, as a crash would.
func (s *Server) Kill() {
	s.tb.Helper()
	s.run("kill", string(s.Kind), s.Dir)
}

// Restart starts the server again on its port and data (streams, queues
// and their messages kept), and waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	s.run("start", string(s.Kind), strconv.Itoa(s.Port), s.Dir)
}

// run runs services.sh with args, failing the test if it fails.
func (s *Server) run(args ...string) {
	s.tb.Helper()
	out, err := exec.Command("bash", append([]string{script()}, args...)...).CombinedOutput()
	if err != nil {
		s.tb.Fatalf("services.sh %v: %v\n%s", args, err, out)
	}
}

// log is the end of the server's log.
func (s *Server) log() string {
	name := map[Kind]string{NATSServer: "nats.log", RabbitMQ: "log/rabbit.log", ElasticMQ: "elasticmq.out"}[s.Kind]
	b, _ := os.ReadFile(filepath.Join(s.Dir, name))
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// script is the path of pipeline/scripts/services.sh.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "pipeline", "scripts", "services.sh")
}
