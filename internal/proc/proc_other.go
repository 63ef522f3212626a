//go:build !unix

package proc

import (
	"os"
	"os/exec"
)

// Group leaves the child in the starter's process group: without Unix process groups, a Ctrl-C at the console
// reaches the children directly.
func Group(cmd *exec.Cmd) {}

// Signal ends the started child cmd: a system without Unix signals (Windows) cannot deliver SIGTERM or SIGINT to
// another process, so any signal kills it.
func Signal(cmd *exec.Cmd, sig os.Signal) error { return cmd.Process.Kill() }
