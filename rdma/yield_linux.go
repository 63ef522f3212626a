//go:build linux

package rdma

import "golang.org/x/sys/unix"

// schedYield gives the calling thread's core to any other thread the kernel has waiting for it (Poll); a variable,
// so that tests count the calls.
var schedYield = func() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
