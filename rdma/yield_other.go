//go:build !linux

package rdma

import "runtime"

// schedYield is runtime.Gosched where the device has no sched_yield (Poll): a hand-over to this process's
// goroutines only.
var schedYield = runtime.Gosched
