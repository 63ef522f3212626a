package node

import (
	"fmt"
	"os"
	"runtime"
	"sync"
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

// progressCore gives a job that favours overlap (Config.Overlap) one more processor than it would have, unless the
// user set GOMAXPROCS: the device's progress loop and the worker pool then have a P to run on while every rank
// computes, and the kernel shares the cores between them and the computation. It returns a line for the route
// table ("" when it changed nothing) and what gives the processor back when the job ends. Jobs of one process run
// one after another in tests, and the node runtimes of a test's in-process job at once: the first takes the extra
// P and the last gives it back.
//
// Why: with as many Ps as ranks, a rank that computes holds its P, and the Go scheduler runs the loop or a worker
// only when another P is free; where the ranks hold all of them (a node process bound to each core of a host,
// GOMPJ_BIND=cores), nothing moved a 1 MiB Iallreduce between two node processes over TCP until the computation
// ended: 0-1 % of it hid behind busy computation (README, "Overlap mode").
func progressCore(overlap bool) (string, func()) {
	if _, userSet := os.LookupEnv("GOMAXPROCS"); !overlap || userSet {
		return "", func() {}
	}
	extra.mu.Lock()
	defer extra.mu.Unlock()
	if extra.users == 0 {
		extra.base = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(extra.base + 1)
	}
	extra.users++
	var once sync.Once
	return fmt.Sprintf("\n  %-8s GOMAXPROCS %d: one for progress beside the ranks (GOMPJ_OVERLAP=1)", "overlap",
			extra.base+1), func() {
			once.Do(func() {
				extra.mu.Lock()
				defer extra.mu.Unlock()
				if extra.users--; extra.users == 0 {
					runtime.GOMAXPROCS(extra.base)
				}
			})
		}
}

// extra is progressCore's count of the jobs of this process that hold the extra P.
var extra struct {
	mu    sync.Mutex
	users int
	base  int // GOMAXPROCS before the first took it
}
