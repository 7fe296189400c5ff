package main

import (
	"os"
	"syscall"
)

// stopWithParent has the kernel send this process SIGTERM when its parent
// dies; a parent already gone (the process adopted) sends it at once.
func stopWithParent() error {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return errno
	}
	if os.Getppid() != parent {
		return syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
	return nil
}
