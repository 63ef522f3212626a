package nbc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/node/bootstrap"
	"github.com/gompj/gompj/ranks"
)

// In overlap mode (GOMPJ_OVERLAP) a nonblocking collective that crosses node processes, and is larger than a small
// call, is started by a worker: its starting call (the I-call, a persistent Start) hands the first round to the
// pool. Small calls start on the caller's goroutine, as every call does without the mode. Either way the results
// are the blocking collective's, whether the rank's wait or the worker runs the first round, and a Start of a
// persistent collective and its Wait allocate nothing at steady state: over TCP, the mode's target, and over the
// host's shared memory, the default between node processes of one host.
func TestOverlapStartsOnWorkers(t *testing.T) {
	for _, c := range []struct{ overlap, hostSHM bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		overlap := c.overlap
		t.Run(fmt.Sprintf("overlap=%v,hostSHM=%v", overlap, c.hostSHM), func(t *testing.T) {
			var aside atomic.Int64
			count := func() { aside.Add(1) }
			asideHook.Store(&count)
			defer asideHook.Store(nil)
			errs := runOverlapJob(t, overlap, c.hostSHM, func(c *ranks.Comm) error {
				const large, small = 1 << 17, 8 // 1 MiB and 64 bytes of float64: rendezvous and eager
				for _, n := range []int{large, small} {
					send, want, got := make([]float64, n), make([]float64, n), make([]float64, n)
					for i := range send {
						send[i] = float64(c.Rank()*n + i)
					}
					if err := collectives.Allreduce(c, send, want, collectives.Sum); err != nil {
						return err
					}
					r, err := Iallreduce(c, send, got, collectives.Sum)
					if err != nil {
						return err
					}
					if _, err := r.Wait(); err != nil {
						return err
					}
					if err := equal("Iallreduce", got, want); err != nil {
						return err
					}
					p, err := AllreduceInit(c, send, got, collectives.Sum)
					if err != nil {
						return err
					}
					for run := range 2 {
						clear(got)
						if err := p.Start(); err != nil {
							return err
						}
						if _, err := p.Wait(); err != nil {
							return err
						}
						if err := equal(fmt.Sprintf("AllreduceInit, run %d", run), got, want); err != nil {
							return err
						}
					}
					if n == large && !raceEnabled { // the race detector allocates
						if err := startAllocations(c, p); err != nil {
							return err
						}
					}
					if err := p.Free(); err != nil {
						return err
					}
				}
				return nil
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("node %d: %v", i, err)
				}
			}
			// Two ranks, each with one large Iallreduce and two Starts of a large persistent one, and the Starts of
			// startAllocations.
			want := int64(6)
			if !raceEnabled {
				want += 2 * (allocWarmup + allocRuns + 1)
			}
			if !overlap {
				want = 0
			}
			if aside.Load() != want {
				t.Fatalf("%d starts handed to the pool, want %d", aside.Load(), want)
			}
		})
	}
}

// startAllocations checks that a Start of persistent collective p and its Wait allocate nothing at steady state:
// rank 0 counts while the other ranks run the same steps.
func startAllocations(c *ranks.Comm, p *ranks.Request) error {
	var runErr error
	step := func() {
		if err := p.Start(); err != nil {
			runErr = err
		}
		if _, err := p.Wait(); err != nil {
			runErr = err
		}
	}
	for range allocWarmup { // first runs grow lists that keep their memory
		step()
	}
	if c.Rank() != 0 {
		for range allocRuns + 1 { // AllocsPerRun's warm-up run and its runs
			step()
		}
		return runErr
	}
	allocs := testing.AllocsPerRun(allocRuns, step)
	if runErr != nil {
		return runErr
	}
	if allocs > 0 {
		return fmt.Errorf("%v allocations per Start and Wait", allocs)
	}
	return nil
}

const allocWarmup, allocRuns = 10, 100

func equal(what string, got, want []float64) error {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// runOverlapJob runs body on 2 ranks in 2 in-process node runtimes, in overlap mode or not, over TCP or the host's
// shared memory.
func runOverlapJob(t *testing.T, overlap, hostSHM bool, body func(c *ranks.Comm) error) []error {
	t.Helper()
	secret := []byte("nbc-overlap-test-secret-0123456789")
	co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: "127.0.0.1:0", Nodes: 2, Secret: secret,
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = node.Run(node.Config{Ranks: 2, Nodes: 2, NodeID: i, Coordinator: co.Addr(), Secret: secret,
				Timeout: 20 * time.Second, Overlap: overlap, NoHostSHM: !hostSHM}, body)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("job hung")
	}
	return errs
}
