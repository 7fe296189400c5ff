package main

import (
	"bufio"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// The test binary's roles in TestStopsWithParent: a parent that starts a
// child and waits to be killed, and a child that calls stopWithParent and
// writes a file when SIGTERM comes.
const (
	envRole = "HOOKPIPE_STACK_TEST_ROLE"
	envDir  = "HOOKPIPE_STACK_TEST_DIR"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "parent":
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), envRole+"=child")
		child.Stdout = os.Stdout
		if err := child.Start(); err != nil {
			os.Exit(1)
		}
		select {}
	case "child":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		if err := stopWithParent(); err != nil {
			os.Exit(1)
		}
		os.Stdout.WriteString("ready\n")
		<-term
		_ = os.WriteFile(filepath.Join(os.Getenv(envDir), "stopped"), nil, 0o600)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStopsWithParent: the stack gets SIGTERM (and so stops its children
// in order) when whatever started it, make, is SIGKILLed.
func TestStopsWithParent(t *testing.T) {
	dir := t.TempDir()
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), envRole+"=parent", envDir+"="+dir)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("the child said %q, %v", line, err)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	testkit.WaitFor(t, 10*time.Second, "the child to get SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(dir, "stopped"))
		return err == nil
	})
}
