//go:build unix

package proc

import (
	"os"
	"os/exec"
	"syscall"
)

// Group makes the child cmd starts lead a process group of its own, so that Signal reaches whatever it starts
// in turn, and a Ctrl-C at the terminal reaches the starter alone (which then decides what the children get). Where
// the system allows, the child also dies with its starter (dieWithStarter).
func Group(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	dieWithStarter(cmd.SysProcAttr)
}

// Signal sends sig to the process group of the started child cmd.
func Signal(cmd *exec.Cmd, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return cmd.Process.Signal(sig)
	}
	return syscall.Kill(-cmd.Process.Pid, s)
}
