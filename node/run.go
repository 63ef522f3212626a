package node

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// Body is the SPMD function every rank runs.
type Body func(c *ranks.Comm) error

// Run runs body on cfg.Ranks goroutine ranks in this process and waits for all of them. With cfg.Nodes > 1 this
// process is node cfg.NodeID of a multi-node job and runs its block of the ranks (see runMulti). A rank that returns an
// error, panics or calls Abort aborts the job; Run then returns the cause (a *ranks.RankError naming the rank, or
// ErrAborted wrapping an *ranks.AbortError).
func Run(cfg Config, body Body) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if cfg.Nodes > 1 {
		return runMulti(cfg, body)
	}
	_, restore := progressCore(cfg.Overlap) // before the worker pool, sized by GOMAXPROCS
	defer restore()
	var w *ranks.World
	pool, exec, err := executor(cfg, func(err error) { w.Abort(err) })
	if err != nil {
		return err
	}
	defer pool.close()
	w, err = ranks.NewWorld(ranks.Options{Size: cfg.Ranks, Lo: 0, Hi: cfg.Ranks, EagerLimit: cfg.EagerLimit,
		Policy: policy(cfg, cfg.Ranks, cfg.Ranks, 1), UnexpectedLimit: cfg.UnexpectedLimit, UnexpectedShare: cfg.UnexpectedShare,
		Executor: exec, NbcSlots: cfg.NbcSlots})
	if err != nil {
		return err
	}
	return runRanks(w, cfg, body)
}

// policy is how the ranks of a node process wait: processRanks of its own, hostRanks on its host in all its
// hostProcesses node processes (the same ranks and 1 process for a job of one process). Whether they may spin
// depends on hostRanks.
func policy(cfg Config, processRanks, hostRanks, hostProcesses int) queues.Policy {
	p := queues.DefaultPolicy(hostRanks)
	if procs := runtime.GOMAXPROCS(0); hostRanks > procs && hostProcesses > 1 && hostProcesses <= procs &&
		processRanks <= procs {
		p.Yields = sharedHostYields
	}
	if cfg.SpinTime > 0 {
		p.Spin = cfg.SpinTime
	} else if cfg.SpinTime < 0 {
		p.Spin = 0
	}
	if cfg.Yields > 0 {
		p.Yields = cfg.Yields
	}
	return p
}

// sharedHostYields is how often a waiting rank yields before it parks when its node process's ranks would fit the
// host's cores but the host's node processes together hold more ranks than that (gompj run -nodes on one box, two
// Slurm tasks on one host), so that nobody spins, and there are no more node processes than cores. Such a process
// gets its share of the cores (shareCores), one here for two of its ranks, and a yield hands that processor to
// whichever of its goroutines has work (the other rank, a worker, the device's loop); parking instead makes every
// wake-up a sleeping thread's, which on a VM costs the halt and wake of an idle vCPU. With more node processes than
// cores a yielding rank would keep a core that another process's rank needs, so they park: the test harness's 3
// node processes on 2 vCPUs took the root package's tests from 180 to 354 s with 3000 yields.
//
// The 10 yields of queues.DefaultPolicy made an 8-byte Allreduce among 4 ranks in 2 node processes on 2 vCPUs take
// 116 us over shared memory (183 over TCP), 1 MiB 1745 us, against 4 (17) and 746 with 3000; NPB class A against
// one process of 4 ranks went from 0.97 to 1.18 (CG) and 0.90 to 0.98 (MG), IS and FT level (interleaved runs,
// GOMPJ_YIELDS; 1000 to 10000 did alike). A process that holds more ranks than cores keeps the 10: many ranks each
// yielding thousands of times churn its run queue, and the root package's tests, whose jobs of up to 17 ranks run
// in one process, then ran past 10 minutes.
const sharedHostYields = 3000

// netSpin is how long a rank waiting on the network spins: GOMPJ_NET_SPIN, or 1ms when ranks spin at all (a
// round trip across nodes takes microseconds to tens of microseconds on a loaded box, longer than the intra-node
// window; parking costs a wake-up through the progress loop).
func netSpin(cfg Config, p queues.Policy) time.Duration {
	switch {
	case cfg.NetSpin > 0:
		return cfg.NetSpin
	case cfg.NetSpin < 0 || p.Spin == 0:
		return 0
	}
	return max(p.Spin, time.Millisecond)
}

// busyPoll is how long the progress loops of devices that can change it (SetBusyPoll: netdev, rdma) poll before
// they sleep: GOMPJ_BUSY_POLL, else none (-1) where the host's ranks outnumber its cores, where a polling loop
// takes a core from a rank with work, else 0: the device's own default. Like spinning, it depends on every rank on
// the host, which the node learns only after its devices are open.
func busyPoll(cfg Config, hostRanks int) time.Duration {
	switch {
	case cfg.BusyPoll != 0:
		return cfg.BusyPoll
	case queues.DefaultPolicy(hostRanks).Spin > 0:
		return 0
	}
	return -1
}

// busyPoller is a device whose progress loop's busy polling can change after it is opened (netdev.Device,
// rdma.Device).
type busyPoller interface {
	SetBusyPoll(time.Duration)
}

// helped is a device whose progress goroutine runs the worker pool's tasks between its rounds (netdev, rdma;
// device.Helper).
type helped interface {
	SetHelper(device.Helper)
}

// runRanks starts the World's local ranks and waits for them.
func runRanks(w *ranks.World, cfg Config, body Body) error {
	lo, hi := w.Local()
	if cfg.Pin && !canPin {
		fmt.Fprintf(os.Stderr, "gompj: %s: pinning ranks to cores needs Linux; the ranks run unpinned\n", env.Pin.Name)
	}
	var wg sync.WaitGroup
	wg.Add(hi - lo)
	for id := lo; id < hi; id++ {
		go runRank(w, cfg, id, body, &wg)
	}
	wg.Wait()
	return w.AbortCause()
}

func runRank(w *ranks.World, cfg Config, id int, body Body, wg *sync.WaitGroup) {
	defer wg.Done()
	if cfg.Pin {
		pin(id)
	}
	returned := false
	defer func() {
		if p := recover(); p != nil {
			w.Abort(&ranks.RankError{Rank: id, Panic: p, Stack: debug.Stack()})
			return
		}
		if !returned && w.AbortCause() == nil {
			w.Abort(&ranks.RankError{Rank: id, Err: errors.New("the rank's goroutine exited (runtime.Goexit)")})
		}
	}()
	err := body(w.Comm(id))
	returned = true
	if err == nil {
		w.Returned(id) // the others' waits for it, if any, can no longer end (collectives' deadlock look)
		return
	}
	if errors.Is(err, ranks.ErrAborted) && w.AbortCause() == nil {
		// The rank met an abort's symptom (a transfer cut short, a send to a node whose connections closed)
		// before its cause reached this node: wait for the cause (see peerLost) rather than abort the job with
		// the symptom, its exit code 1 and its "connection closed".
		t := time.NewTimer(2 * lostGrace)
		select {
		case <-w.AbortCh():
		case <-t.C:
		}
		t.Stop()
	}
	w.Abort(&ranks.RankError{Rank: id, Err: err})
}
