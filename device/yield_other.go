//go:build !linux

package device

import "runtime"

// SchedYield is runtime.Gosched where there is no sched_yield: a hand-over to this process's goroutines only.
func SchedYield() { runtime.Gosched() }
