package collectives

import (
	"fmt"
	"math/rand"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// TestGateModel: random sequences of barriers (the same on every rank), nonblocking (ArriveBarrier, waited on
// through ranks.GateRequest in an order of each rank's own, or tested) and blocking (Barrier) mixed, many under way
// at once. A member's barrier may complete only once every member has started it: each member counts its start of
// barrier k before it arrives, and checks at the completion of every barrier that all members have started it and
// every earlier one. Rank 0 starts each batch's nonblocking barriers before the others start anything (a channel),
// so that its arrivals run ahead of their phases and are put off (deferral). The odd ranks name their requests
// (BarrierRequest), as package nbc does, the others not. With 2, 3 and 5 ranks.
func TestGateModel(t *testing.T) {
	for _, np := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(np), func(t *testing.T) {
			const batches, most = 40, 6
			started := make([]atomic.Int32, batches*(most+1))
			gates := make([]chan struct{}, batches)
			for i := range gates {
				gates[i] = make(chan struct{})
			}
			var deferred atomic.Int64
			err := node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
				seq := rand.New(rand.NewSource(11))                    // the calls: the same on every rank
				mix := rand.New(rand.NewSource(int64(100 + c.Rank()))) // the waits: each rank's own
				me := stateOf(c).me
				k := 0
				// through: barrier b is complete for this member; everyone must have started it and all before it
				through := func(b int) error {
					for j := 0; j <= b; j++ {
						if n := started[j].Load(); int(n) != np {
							return fmt.Errorf("rank %d: barrier %d complete (through %d) with %d of %d members started",
								c.Rank(), j, b, n, np)
						}
					}
					return nil
				}
				type pending struct {
					r *ranks.Request
					b int
				}
				for batch := 0; batch < batches; batch++ {
					if c.Rank() != 0 {
						<-gates[batch]
					}
					var out []pending
					for i, calls := 0, 1+seq.Intn(most); i < calls; i++ {
						b := k
						k++
						blocking := seq.Intn(4) == 0 && c.Rank() != 0 // rank 0 must not block before opening the gate
						if seq.Intn(4) == 0 && i > 0 {
							blocking = true
						}
						if blocking && c.Rank() == 0 {
							blocking = false // rank 0 gets a nonblocking one where the others block: they mix
						}
						started[b].Add(1)
						if blocking {
							if err := Barrier(c); err != nil {
								return err
							}
							if err := through(b); err != nil {
								return err
							}
							continue
						}
						before := me.deferred.Load()
						g := BarrierGate(c)
						at, done := ArriveBarrier(c)
						if me.deferred.Load() > before {
							deferred.Add(1)
						}
						var r *ranks.Request
						if done {
							r = c.CollRequestDone()
						} else {
							r = c.GateRequest(g, at, 0)
						}
						if c.Rank()%2 == 1 {
							BarrierRequest(c, r) // its next arrivals skip their look where r is reported (settled)
						}
						out = append(out, pending{r, b})
					}
					if c.Rank() == 0 {
						close(gates[batch])
					}
					for _, i := range mix.Perm(len(out)) {
						p := out[i]
						if mix.Intn(3) == 0 {
							for spins := 0; spins < 5; spins++ {
								if _, ok, err := p.r.Test(); err != nil || ok {
									break
								}
								runtime.Gosched()
							}
						}
						if _, err := p.r.Wait(); err != nil {
							return err
						}
						if err := through(p.b); err != nil {
							return err
						}
					}
				}
				return Barrier(c)
			})
			if err != nil {
				t.Fatal(err)
			}
			if deferred.Load() == 0 {
				t.Fatal("no arrival was put off: the test does not cover deferrals")
			}
		})
	}
}

// watchedGate is a member's gate that says on a channel when a completion call is about to park on it.
type watchedGate struct {
	ranks.Gate
	watched chan struct{}
}

func (g watchedGate) Watch(at, tag uint64, w *queues.Waker) {
	select {
	case g.watched <- struct{}{}:
	default:
	}
	g.Gate.Watch(at, tag, w)
}

// TestGateParkedWaiter: a member that waits for a nonblocking barrier parks (it watched the gate first: the last
// member arrives only once it has), and the last arrival, a blocking Barrier, wakes it; then the other way round,
// a blocking member parked and the last arrival a nonblocking one.
func TestGateParkedWaiter(t *testing.T) {
	watched := make(chan struct{}, 1)
	err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
		if c.Rank() == 0 {
			g := BarrierGate(c)
			at, done := ArriveBarrier(c)
			if done {
				return fmt.Errorf("the first arrival completed the barrier")
			}
			r := c.GateRequest(watchedGate{g, watched}, at, 0)
			if _, err := r.Wait(); err != nil {
				return err
			}
			return Barrier(c)
		}
		<-watched
		if err := Barrier(c); err != nil {
			return err
		}
		// Rank 0 is in its blocking Barrier, or on its way there: arrive without blocking and wait.
		g := BarrierGate(c)
		at, done := ArriveBarrier(c)
		if !done {
			_, err := c.GateRequest(g, at, 0).Wait()
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
