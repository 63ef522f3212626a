package nbc

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/hang"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// TestIbarrierSkipped: rank 0 calls Ibarrier where the others call Iallreduce (an erroneous program): small (the
// tiny protocol) and large (a shared-memory schedule), with rank 0 starting first (parked before the others arrive:
// their arrivals wake it to look again) and last (it finds their arrivals before it parks). Nobody hangs: the job
// ends with ErrArg naming the barrier and the other call. Then a correct program on the same sizes: every member
// calls Ibarrier and then the Iallreduce, the Ibarrier waited on last, which must never be taken for a skip.
func TestIbarrierSkipped(t *testing.T) {
	for _, np := range []int{2, 3} {
		for _, n := range []int{1, 1 << 14} {
			for _, barrierFirst := range []bool{true, false} {
				name := fmt.Sprintf("np=%d n=%d barrier first=%v", np, n, barrierFirst)
				started := make(chan struct{})
				err := hang.Within(t, name, time.Minute, func() error {
					return node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
						if c.Rank() == 0 {
							if !barrierFirst {
								awaitOthers(started, np)
							}
							r, err := Ibarrier(c)
							if err != nil {
								return err
							}
							if barrierFirst {
								close(started)
							}
							_, err = r.Wait()
							return err
						}
						return allreduceBeside(c, n, barrierFirst, started)
					})
				})
				wantSkipped(t, name, err)
			}
		}
	}
	for _, n := range []int{1, 1 << 14} {
		err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
			for round := 0; round < 50; round++ {
				b, err := Ibarrier(c)
				if err != nil {
					return err
				}
				in, out := make([]float64, n), make([]float64, n)
				in[0] = float64(c.Rank())
				r, err := Iallreduce(c, in, out, collectives.Sum)
				if err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil || out[0] != 3 {
					return fmt.Errorf("round %d: allreduce %v, %v", round, out[0], err)
				}
				if _, err := b.Wait(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
	}
}

// TestIbarrierBesideBarrier: the members of one barrier may mix Ibarrier and Barrier (the call check counts them
// as one kind): rank 0 calls Ibarrier, several at once, where the others call Barrier, and the barriers pair up in
// order. Rank 1 counts its Barriers through; rank 0 must not see its k-th Ibarrier through before rank 1 has
// started its k-th Barrier.
func TestIbarrierBesideBarrier(t *testing.T) {
	const rounds, batch = 30, 4
	started := make([]chan struct{}, rounds*batch)
	for i := range started {
		started[i] = make(chan struct{})
	}
	err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
		for r := 0; r < rounds; r++ {
			if c.Rank() != 0 {
				for i := 0; i < batch; i++ {
					if c.Rank() == 1 {
						close(started[r*batch+i])
					}
					if err := collectives.Barrier(c); err != nil {
						return err
					}
				}
				continue
			}
			reqs := make([]*ranks.Request, batch)
			for i := range reqs {
				var err error
				if reqs[i], err = Ibarrier(c); err != nil {
					return err
				}
			}
			for i, q := range reqs {
				if _, err := q.Wait(); err != nil {
					return err
				}
				select {
				case <-started[r*batch+i]:
				default:
					return fmt.Errorf("round %d: Ibarrier %d through before rank 1 started its Barrier", r, i)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBarrierBesideSmallCall: rank 0 calls Barrier where the others call a small Iallreduce (an erroneous program),
// rank 0 first (about to park before the others arrive, told by its first look's set-up: their arrivals wake it)
// and last (it finds their arrivals before it parks). Rank 0 has made no nonblocking call on the communicator.
// Nobody hangs: the job ends with ErrArg naming the barrier and the allreduce. Such a pair hung before: the blocking
// barrier's declaration of its call at its park met no declaration from the small call's waiter.
func TestBarrierBesideSmallCall(t *testing.T) {
	for _, np := range []int{2, 3} {
		for _, barrierFirst := range []bool{true, false} {
			name := fmt.Sprintf("np=%d barrier first=%v", np, barrierFirst)
			started := make(chan struct{}, np)
			look := collectives.BarrierLook
			collectives.BarrierLook = func(c *ranks.Comm) { // rank 0's Barrier is about to park: the others start
				look(c)
				if barrierFirst {
					for i := 1; i < np; i++ {
						started <- struct{}{}
					}
				}
			}
			err := hang.Within(t, name, time.Minute, func() error {
				return node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
					if c.Rank() == 0 {
						if !barrierFirst {
							awaitOthers(started, np)
						}
						return collectives.Barrier(c)
					}
					return allreduceBeside(c, 1, barrierFirst, started)
				})
			})
			collectives.BarrierLook = look
			wantSkipped(t, name, err)
		}
	}
}

// allreduceBeside is the others' part in the skipped-barrier tests: an Iallreduce of n elements, started once rank 0
// has started its barrier (barrierFirst) or before rank 0 starts it (told on started), and waited for.
func allreduceBeside(c *ranks.Comm, n int, barrierFirst bool, started chan struct{}) error {
	return startBeside(barrierFirst, started, func() (*ranks.Request, error) {
		return Iallreduce(c, make([]float64, n), make([]float64, n), collectives.Sum)
	})
}

// awaitOthers is rank 0's wait, in the tests of a call made in another's place, until the other np-1 ranks have
// started theirs.
func awaitOthers(started chan struct{}, np int) {
	for i := 1; i < np; i++ {
		<-started
	}
}

// startBeside is the others' part in the tests of a call made in the place of another: the nonblocking call that
// start starts, once rank 0 has started its own (rankFirst) or before rank 0 starts it (told on started), then
// waited for.
func startBeside(rankFirst bool, started chan struct{}, start func() (*ranks.Request, error)) error {
	if rankFirst {
		<-started
	}
	r, err := start()
	if err != nil {
		return err
	}
	if !rankFirst {
		started <- struct{}{}
	}
	_, err = r.Wait()
	return err
}

// wantSkipped fails t unless err is the ErrArg naming rank 0's barrier and the others' allreduce.
func wantSkipped(t *testing.T, name string, err error) {
	t.Helper()
	if !errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "started barrier where rank") ||
		!strings.Contains(err.Error(), "allreduce") {
		t.Errorf("%s: %v; want ErrArg naming the barrier and the allreduce", name, err)
	}
}

// TestIbarrierFreedActive: a member that frees its Ibarrier while it is under way (MPI_Request_free) and starts
// another has not seen the first through, so its second arrival waits for the first's phase (a deferral): counted
// at once, it would complete the first phase without rank 1. Rank 2 arrives at the first barrier after rank 0's
// two calls and tests it many times before rank 1 is let in: it must not be through. The first barrier is an
// Ibarrier, or a persistent barrier's Start (its run waits on the count too: hiergate.go, gateStarter).
func TestIbarrierFreedActive(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		t.Run(fmt.Sprint("persistent=", persistent), func(t *testing.T) { ibarrierFreedActive(t, persistent) })
	}
}

func ibarrierFreedActive(t *testing.T, persistent bool) {
	zero, checked := make(chan struct{}), make(chan struct{})
	err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
		var p *ranks.Request
		first := func() (*ranks.Request, error) { return Ibarrier(c) }
		if persistent {
			var err error
			if p, err = BarrierInit(c); err != nil {
				return err
			}
			first = func() (*ranks.Request, error) { return p, p.Start() }
		}
		var late *ranks.Request // rank 1's first, waited for at the end
		switch c.Rank() {
		case 0:
			r1, err := first()
			if err != nil {
				return err
			}
			if err := r1.Free(); err != nil {
				return err
			}
			r2, err := Ibarrier(c)
			if err != nil {
				return err
			}
			close(zero)
			_, err = r2.Wait()
			return err
		case 2:
			<-zero
			q, err := first()
			if err != nil {
				return err
			}
			for i := 0; i < 200; i++ {
				if _, done, err := q.Test(); err != nil || done {
					close(checked)
					return fmt.Errorf("the first barrier through before rank 1 arrived (test %d: %v)", i, err)
				}
			}
			close(checked)
			if _, err := q.Wait(); err != nil {
				return err
			}
		default:
			<-checked
			var err error
			if late, err = first(); err != nil {
				return err
			}
		}
		q, err := Ibarrier(c) // rank 1's second, rank 2's second
		if err != nil {
			return err
		}
		if _, err = q.Wait(); err != nil {
			return err
		}
		if late != nil {
			if _, err := late.Wait(); err != nil {
				return err
			}
		}
		if p != nil {
			return p.Free()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBlockingBesideNonblocking: rank 0 makes a blocking call where the others make a nonblocking one (an erroneous
// program: the two never meet, MPI's rule): an Allreduce beside a tiny Iallreduce and beside a large one (a
// shared-memory schedule on the ring), an Alltoall beside an Ibcast. Rank 0 parks first (the others' arrivals wake
// it to look again) or last (it finds their arrivals before it parks). Nobody hangs: the job ends with ErrArg naming
// both calls (callLook).
func TestBlockingBesideNonblocking(t *testing.T) {
	for _, tc := range []struct {
		name, theirs string
		n            int
	}{{"Allreduce", "allreduce", 1}, {"Allreduce", "allreduce", 1 << 14}, {"Alltoall", "bcast", 3}} {
		for _, np := range []int{2, 3} {
			for _, blockingFirst := range []bool{true, false} {
				name := fmt.Sprintf("%s n=%d np=%d blocking first=%v", tc.name, tc.n, np, blockingFirst)
				started := make(chan struct{}, np)
				look := collectives.CallLook
				var once sync.Once // every park looks: the others start at the first
				collectives.CallLook = func(c *ranks.Comm, call uint64, k ranks.CallKind) {
					look(c, call, k) // rank 0's call is about to park: the others start
					if blockingFirst {
						once.Do(func() {
							for i := 1; i < np; i++ {
								started <- struct{}{}
							}
						})
					}
				}
				err := hang.Within(t, name, time.Minute, func() error {
					return node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
						x, y := make([]float64, tc.n*np), make([]float64, tc.n*np)
						if c.Rank() == 0 {
							if !blockingFirst {
								awaitOthers(started, np)
							}
							if tc.name == "Alltoall" {
								return collectives.Alltoall(c, x, y)
							}
							return collectives.Allreduce(c, x[:tc.n], y[:tc.n], collectives.Sum)
						}
						return startBeside(blockingFirst, started, func() (*ranks.Request, error) {
							if tc.theirs == "bcast" {
								return Ibcast(c, x[:tc.n], 1)
							}
							return Iallreduce(c, x[:tc.n], y[:tc.n], collectives.Sum)
						})
					})
				})
				collectives.CallLook = look
				if !errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "started "+tc.name+" where rank") ||
					!strings.Contains(err.Error(), "nonblocking "+tc.theirs) {
					t.Errorf("%s: %v; want ErrArg naming the %s and the nonblocking %s", name, err, tc.name, tc.theirs)
				}
			}
		}
	}
}
