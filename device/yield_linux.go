//go:build linux

package device

import "syscall"

// SchedYield gives the calling thread's core to any other thread the kernel has waiting for it (sched_yield), and
// returns at once when none waits. A system call the Go scheduler knows of: if the kernel runs another thread for
// long, sysmon may hand the caller's P to another goroutine meanwhile.
func SchedYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
