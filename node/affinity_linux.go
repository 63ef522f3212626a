//go:build linux

package node

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// canPin says whether pin binds ranks to cores here.
const canPin = true

// pin binds the calling goroutine's thread to one core.
func pin(id int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Zero()
	set.Set(id % runtime.NumCPU())
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		// Pinning is an optimisation; a container may forbid it. Say so once per rank, and go on.
		fmt.Fprintf(os.Stderr, "gompj: rank %d: pinning to a core failed: %v\n", id, err)
	}
}
