package stack

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// envParent, set, makes the test binary a parent that starts a child
// (sleep) through Start, prints its pid and waits to be killed.
const envParent = "HOOKPIPE_STACK_TEST_PARENT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envParent); dir != "" {
		p, err := Start("child", "sleep", []string{"300"}, os.Environ(), dir)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println(p.Pid())
		select {}
	}
	os.Exit(m.Run())
}

// TestChildDiesWithParent: a child started by a parent that is SIGKILLed
// (make run killed) does not outlive it.
func TestChildDiesWithParent(t *testing.T) {
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), envParent+"="+t.TempDir())
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the parent printed %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if !running(child) {
		t.Fatal("the child is not running")
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	testkit.WaitFor(t, 10*time.Second, "the child to end with its parent", func() bool { return !running(child) })
}

// running reports whether pid is a live process (not gone, not a zombie
// nobody reaped).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
