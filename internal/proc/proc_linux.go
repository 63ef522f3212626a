package proc

import "syscall"

// dieWithStarter makes the kernel kill the child when the thread that started it ends, which for a Go program is
// when the program ends (Go ends an OS thread only when a goroutine locked to it exits, and no starter locks): a
// one-node job, which has no coordinator to lose, went on running when its launcher was killed.
func dieWithStarter(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
