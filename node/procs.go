package node

import (
	"fmt"
	"os"
	"runtime"
)

// procShare is the GOMAXPROCS a node process takes when it shares its host with other node processes of the job
// (gompj run -nodes on one box, or several Slurm tasks per host) and the host's ranks outnumber its cores: the
// host's cores times this node's share of the host's ranks, rounded, at least 1. 0 leaves GOMAXPROCS alone: when
// the cores suffice, when the user set GOMAXPROCS, and when the process was started on fewer CPUs than the host
// has online (a cpuset from Slurm, taskset or numactl has already divided the cores).
//
// Why: where ranks outnumber cores they park instead of spinning (queues.DefaultPolicy). Inside one process a parked
// rank hands its thread to a rank with work through the Go scheduler; across k node processes that each run a
// thread per core, it is a futex sleep and wake-up, and the kernel shares the cores among k times as many threads.
// NPB CG class A -np 4 -nodes 2 on this 2-core box took 0.41 s with 2 threads per process and 0.27 s with 1, as
// fast as -np 4 in one process. Where the cores suffice, a node process keeps them all: a rank computing on one
// leaves the others to the device's loop and the worker pool, which progress its nonblocking operations.
func procShare(cpus, online, mine, host int, userSet bool) int {
	if userSet || mine <= 0 || host <= mine || host <= cpus || (online > 0 && cpus < online) {
		return 0
	}
	return max(1, (cpus*mine+host/2)/host)
}

// shareCores applies procShare to this process. It returns a line for the route table (`gompj info -nodes`) when
// it changed GOMAXPROCS, else "".
func shareCores(mine, host int) string {
	_, userSet := os.LookupEnv("GOMAXPROCS")
	n := procShare(runtime.NumCPU(), onlineCPUs(), mine, host, userSet)
	if n <= 0 || n >= runtime.GOMAXPROCS(0) {
		return ""
	}
	runtime.GOMAXPROCS(n)
	return fmt.Sprintf("\n  %-8s GOMAXPROCS %d: this host's %d ranks outnumber its %d CPUs, which its node processes share",
		"cores", n, host, runtime.NumCPU())
}
