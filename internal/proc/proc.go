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
	if s, ok := EndSignal(cmd); ok {
		return 128 + int(s)
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	return 1
}

// Describe says how the started child cmd ended, for a message: "exited with status 3", "was killed by signal 9
// (killed)".
func Describe(cmd *exec.Cmd) string {
	if cmd.ProcessState == nil {
		return "did not finish"
	}
	if s, ok := EndSignal(cmd); ok {
		return fmt.Sprintf("was killed by signal %d (%v)", int(s), s)
	}
	return fmt.Sprintf("exited with status %d", cmd.ProcessState.ExitCode())
}

// Signaled reports whether a signal ended the started child cmd.
func Signaled(cmd *exec.Cmd) bool {
	_, ok := EndSignal(cmd)
	return ok
}

// EndSignal returns the signal that ended the started child cmd, if one did.
func EndSignal(cmd *exec.Cmd) (syscall.Signal, bool) {
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal(), true
		}
	}
	return 0, false
}
