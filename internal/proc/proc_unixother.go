//go:build unix && !linux

package proc

import "syscall"

// dieWithStarter: only Linux's children can be told to die with their starter (proc_linux.go).
func dieWithStarter(a *syscall.SysProcAttr) {}
