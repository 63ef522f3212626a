package proc

import (
	"os/exec"
	"syscall"
)

// ExitStatus is how a child that has been waited for ended, as a shell reports it: its exit code, 128+N when
// signal N ended it, and 1 when it never ran.
func ExitStatus(cmd *exec.Cmd) int {
	ps := cmd.ProcessState
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	return 1
}
