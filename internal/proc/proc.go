package proc

import (
	"fmt"
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

// Describe says how the started child cmd ended, for a message: "exited with status 3", "was killed by signal 9
// (killed)".
func Describe(cmd *exec.Cmd) string {
	ps := cmd.ProcessState
	if ps == nil {
		return "did not finish"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ps.ExitCode())
}

// Signaled reports whether a signal ended the started child cmd.
func Signaled(cmd *exec.Cmd) bool {
	if ps := cmd.ProcessState; ps != nil {
		ws, ok := ps.Sys().(syscall.WaitStatus)
		return ok && ws.Signaled()
	}
	return false
}
