//go:build unix

package gompj_test

import (
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
