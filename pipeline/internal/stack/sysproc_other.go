//go:build !linux

package stack

import "syscall"

// sysProcAttr puts a child in a process group of its own (no parent-death
// signal outside Linux).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
