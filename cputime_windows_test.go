//go:build windows

package gompj_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and kernel) the process has used so far.
func cpuTime() time.Duration {
	var creation, exit, kernel, user syscall.Filetime
	self, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	if err := syscall.GetProcessTimes(self, &creation, &exit, &kernel, &user); err != nil {
		return 0
	}
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) } // 100 ns
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
