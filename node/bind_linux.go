//go:build linux

package node

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// bindShare binds this node process, every thread of it, to its part of the CPUs it may run on (bindPart), when
// mode is BindCores and index is its place among the count node processes of its host. It returns a line for the
// route table (`gompj info -nodes`), or "" when there is nothing to do.
//
// GOMAXPROCS then follows the part's size, as it does in a process started bound, unless the user set it.
//
// Why: on a host that several node processes share, each on its own CPUs keeps its threads and caches to itself, as
// mpirun binds Open MPI's processes by default. Between 2 node processes on 2 vCPUs, each bound to one (GOMAXPROCS
// 1), 1 MiB nonblocking collectives over TCP hid 96 % of their time behind idle computation (81-89 % unbound: the
// processes' threads no longer preempt one another), with pure times, latencies and NPB as fast or faster (15 and 3
// interleaved runs). Not by default, because of what it costs where CPUs are this few: behind busy computation
// 0-1 % hid (0-47 % unbound), since the progress loop runs only when the computing rank lets go of the one processor.
// The waiting policies stay those of the unbound process (bindShare runs after policy): told one core each from the
// start, the ranks parked instead of spinning, and the 0-byte latency over TCP was 13-15 us instead of 4.
//
// Threads started later inherit the mask from the thread that starts them, so the process stays bound; the tasks
// are walked until a pass finds none new, since a thread may start meanwhile from one not yet bound. A kernel or
// container that refuses leaves the process as it was, and says so once.
func bindShare(mode string, index, count int) string {
	if mode != BindCores || count <= 1 {
		return ""
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		fmt.Fprintf(os.Stderr, "gompj: GOMPJ_BIND=cores: the CPUs this process may run on: %v\n", err)
		return ""
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	part := bindPart(cpus, index, count)
	if len(part) == 0 {
		return ""
	}
	var mine unix.CPUSet
	for _, c := range part {
		mine.Set(c)
	}
	if err := bindThreads(&mine); err != nil {
		fmt.Fprintf(os.Stderr, "gompj: GOMPJ_BIND=cores: binding to CPUs %s failed, threads left where they are: %v\n",
			spans(part), err)
		return ""
	}
	// As Go sizes GOMAXPROCS for a process started bound (taskset, a cpuset), unless the user chose it.
	if _, userSet := os.LookupEnv("GOMAXPROCS"); !userSet && runtime.GOMAXPROCS(0) > len(part) {
		runtime.GOMAXPROCS(len(part))
	}
	return fmt.Sprintf("\n  %-8s CPUs %s, GOMAXPROCS %d: node process %d of %d on this host (GOMPJ_BIND=cores)", "cores",
		spans(part), runtime.GOMAXPROCS(0), index+1, count)
}

// bindThreads sets every thread of the process to set.
func bindThreads(set *unix.CPUSet) error {
	done := map[int]bool{}
	for pass := 0; pass < 8; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return err // ESRCH: the thread ended meanwhile
			}
			done[tid] = true
		}
		if !fresh {
			return nil
		}
	}
	return nil
}
