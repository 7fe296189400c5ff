package stack

import "syscall"

// sysProcAttr puts a child in a process group of its own and has the
// kernel send it SIGTERM when its parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
