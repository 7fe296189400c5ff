package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a child process whose output goes to a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start runs bin with env, logging to logDir/name.log.
func Start(name, bin string, args, env []string, logDir string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C in the terminal reaches only the runner,
	// which then stops children in order. The parent-death signal stops
	// them when the runner dies without doing so (SIGKILL, a crash).
	// (The kernel sends it when the thread that started the child exits;
	// Go ends a thread only when a goroutine locked to it exits, and no
	// goroutine that starts children here is locked.)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit error, valid after Done.
func (p *Process) Err() error { return p.err }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits up to grace, then kills.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitErr()
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %v and was killed", p.Name, grace)
	}
}

// Wait waits for the process to exit or ctx to end.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.exitErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Process) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.ExitCode() == -1 {
		return nil // killed by a signal we sent
	}
	return p.err
}
