package nbc

import (
	"fmt"
	"testing"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/hang"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// A wait that the other members are about to end (Schedule.WaitSoon) is spun on where it is posted, so the run goes
// on without joining the wait's list; a plain wait joins it at once; and the spin is bounded (soonSpin): a
// condition that never holds leaves the op on the list, waiting as for any other.
func TestWaitSoonSpins(t *testing.T) {
	for _, c := range []struct {
		name   string
		soon   bool
		trueAt int // the look at which the condition first holds (0: never)
		listed bool
	}{
		{"soon", true, 3, false},
		{"plain", false, 3, true},
		{"soon, never", true, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := hang.Within(t, c.name, time.Minute, func() error {
				return node.Run(node.Config{Ranks: 1}, func(cm *ranks.Comm) error {
					looks := 0
					cond := func() bool { looks++; return c.trueAt > 0 && looks >= c.trueAt }
					var l watchlist
					o := newOp(cm)
					s := &Schedule{}
					if c.soon {
						s.WaitSoon(cond, &l, &finishPolicy)
					} else {
						s.Wait(cond, &l)
					}
					o.tr = newTransport(o, cm, len(s.Steps))
					if err := o.tr.Post(0, &s.Steps[0]); err != nil {
						return err
					}
					if listed := l.n.Load() == 1; listed != c.listed {
						return fmt.Errorf("after %d looks, on the list: %v, want %v", looks, listed, c.listed)
					}
					o.unwatch()
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The shared-memory schedules spin, when the builder may (spinSoon), on the others' arrivals (waitArrived; a rooted
// call's root on its readers and a reader on its root, waitSoonIf) and on their finishes once every member has
// arrived (waitFinished): not on a scan's, whose members wait for the ones before them alone, while the ones after
// them may not have arrived.
func TestSoonWaitsInSchedules(t *testing.T) {
	for _, c := range []struct {
		coll           string
		spinSoon       bool
		arrive, finish bool
	}{
		{"allreduce", true, true, true},
		{"allreduce", false, false, false},
		{"scan", true, false, false},
		{"bcast", true, true, false}, // rank 0, the root: its wait for its readers (waitSoonIf)
	} {
		a := &collectives.Call{Coll: c.coll, Send: make([]byte, 32<<10), Recv: make([]byte, 32<<10), Sz: 8,
			Kernel: func(inout, in []byte) {}}
		s := &Schedule{}
		if err := buildShmSlot(s, &spec{algo: "shm", rank: 0, n: 2, a: a}, newSlot(2), 1, nil, false,
			c.spinSoon); err != nil {
			t.Fatal(err)
		}
		arrive, finish := false, false
		for _, st := range s.Steps {
			arrive = arrive || st.Soon == &arrivePolicy
			finish = finish || st.Soon == &finishPolicy
		}
		if arrive != c.arrive || finish != c.finish {
			t.Errorf("%s, spinSoon %v: spins on arrivals %v, on finishes %v; want %v, %v", c.coll, c.spinSoon,
				arrive, finish, c.arrive, c.finish)
		}
	}
	if !soonOK(&collectives.Call{Coll: "alltoall", Blk: soonMax / 2}, 2) ||
		soonOK(&collectives.Call{Coll: "alltoall", Blk: soonMax / 2}, 3) ||
		soonOK(&collectives.Call{Coll: "allreduce", Send: make([]byte, soonMax+8)}, 2) {
		t.Error("soonOK: not the call's work against soonMax")
	}
}
