package nbc

import (
	"fmt"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// Ibarrier on a communicator inside the node arrives at the barrier in shared memory that Barrier passes
// (collectives.ArriveBarrier), and its request waits on that barrier's count (ranks.GateRequest): a loop of
// Ibarrier and Wait on 2 ranks moves the count's line back and forth and nothing else, as Barrier does, where the
// tiny protocol (tiny.go) moved a slot's arrival word, both members' entries and the waiter's request (0.19 us a
// call, against Barrier's 0.12). It takes no operation id and no position on the ring (slotFor), as Barrier takes
// none: a member may mix the two in one call.
//
// A member whose barrier another member skipped (an erroneous program: that member called another collective where
// this one called Ibarrier) would wait for ever, and so would the other, in the slot of the ring where this member
// never arrives. The tiny protocol caught that: both arrived in the same slot. Here a member's entry in a slot
// carries its barrier phase at its call (member.bphase), and a member about to park on an Ibarrier, at barrier phase
// m and position p of the ring (the request's tag), looks at the slot of position p (barGate.look): a member that
// arrived there with a phase short of m called something else where this one called Ibarrier (its own Ibarrier of
// phase m would have come first, and a blocking barrier of phase m would still be waiting). A program's Barrier
// about to park looks the same way, at its next position (collectives.BarrierLook), so that a small call in the
// place of a Barrier does not hang either. A member that arrives in a slot of a communicator where some member has
// called Ibarrier or parked in Barrier (ring.gated), and does not complete the arrivals, wakes the parked ones
// (collectives.NotifyBarrier), which look again: the parked member has marked the ring and watched before it
// looked, and the arriving one publishes before it reads the mark, so one of them sees the other. The finder ends
// the job with ErrArg naming both calls, as a disagreement in the blocking calls' shared memory does. A member that
// skips a barrier and calls Ibarrier later has its later barrier meet the others' (the phases pair up shifted, and
// nothing hangs); its call in the others' Ibarrier's place meets their next call in its slot, as two different
// calls do.

// barGate is a member's state for its Ibarriers: its barrier's gate (collectives), which its requests wait on, and
// what the look for a skipped barrier before each park needs (look, which the gate runs at each watch). It does not
// hold the communicator: the gate is its requests' (the rank's block of requests holds their states, and would keep
// a freed communicator alive).
type barGate struct {
	gate      ranks.Gate
	w         *ranks.World
	worldRank int
	rg        *ring
	rank      int
	n         uint64
}

func init() { collectives.BarrierLook = func(c *ranks.Comm) { barGateOf(c, cacheOf(c)) } }

// barGateOf returns member c's barGate, made on first use, which gives the member's barrier its look
// (collectives.WatchBarrier).
func barGateOf(c *ranks.Comm, cc *commCache) *barGate {
	if cc.bar == nil {
		bg := &barGate{gate: collectives.BarrierGate(c), w: c.World(), worldRank: c.WorldRank(c.Rank()),
			rg: ringOf(c, cc), rank: c.Rank(), n: uint64(c.Size())}
		collectives.WatchBarrier(c, bg.look)
		cc.bar = bg
	}
	return cc.bar
}

// gateBarrier starts an Ibarrier on c, whose members are all on this node, through its barrier in shared memory.
func gateBarrier(c *ranks.Comm, cc *commCache) *ranks.Request {
	bg := barGateOf(c, cc)
	at, done, tag := bg.arrive(c)
	var r *ranks.Request
	if done {
		r = c.CollRequestDone()
	} else {
		r = c.GateRequest(bg.gate, at, tag)
	}
	collectives.BarrierRequest(c, r)
	return r
}

// arrive arrives at member c's next barrier in shared memory for an Ibarrier, or a persistent barrier's Start
// (hiergate.go: gateStarter). It returns the count the request waits for, whether it has been reached, and the
// request's tag for its gate: the position of the member's next call on the ring, which it does not take, plus one
// (see look).
func (bg *barGate) arrive(c *ranks.Comm) (at uint64, done bool, tag uint64) {
	bg.rg.gate()
	pos := bg.rg.ops[bg.rank].n
	at, done = collectives.ArriveBarrier(c)
	return at, done, pos + 1
}

// look is what the member's completion call does before it parks on an Ibarrier whose count is at (the gate's
// watch), and its Barrier before it parks (tag 0): it looks for members that skipped it (see above). tag is the
// Ibarrier's position on the ring, plus one; a Barrier's is the member's next position, and the Barrier makes its
// members' arrivals wake it, as an Ibarrier does (ring.gated, before it looks: see above).
func (bg *barGate) look(at, tag uint64) {
	pos := tag - 1
	if tag == 0 {
		pos = bg.rg.ops[bg.rank].n // on the member's goroutine: its Barrier
		bg.rg.gate()
	}
	if !bg.gate.Reached(at) {
		if err := bg.skipped(at/bg.n, pos); err != nil {
			endJobAs(bg.w, bg.worldRank, err)
		}
	}
}

// skipped returns the error naming a member that arrived at position pos of the ring, for another call, at a
// barrier phase short of phase, this member's Ibarrier's there; nil if none did.
func (bg *barGate) skipped(phase, pos uint64) error {
	sl, u := bg.rg.at(pos)
	if sl.mem[bg.rank].gen.Load() >= u {
		// This member has made a later call at pos since its Ibarrier (a Waitany over both, say), which met the
		// others' calls there as the slot protocol checks them; and the use may be over, its entries rewritten for
		// a later use (the race detector saw an entry's bphase read as its member wrote it again).
		return nil
	}
	for j := range sl.mem {
		m := &sl.mem[j]
		if j != bg.rank && m.gen.Load() == u && m.bphase < phase {
			return fmt.Errorf("%w: collective mismatch: rank %d started barrier where rank %d started %s (a member "+
				"skipped a collective call that the other made)", ranks.ErrArg, bg.rank, j, m.coll)
		}
	}
	return nil
}

// gate marks the ring: a member has called Ibarrier, or parks in Barrier (see above). A store only the first time:
// every arrival reads the flag.
func (rg *ring) gate() {
	if !rg.gated.Load() {
		rg.gated.Store(true)
	}
}

// arrived is what a member that arrived in a slot of c's ring (rg), without completing its arrivals, does where some
// member has called Ibarrier: it wakes the members parked on one, which look whether it is in their place.
func arrived(c *ranks.Comm, rg *ring) {
	if rg.gated.Load() {
		collectives.NotifyBarrier(c)
	}
}

// endJobAs ends the job with err, found by the rank of world rank wr.
func endJobAs(w *ranks.World, wr int, err error) {
	if !w.Aborted() {
		w.Abort(&ranks.RankError{Rank: wr, Err: err})
	}
}

func init() { collectives.CallLook = callLook }

// callLook is what a wait in shared memory of member c's blocking call (the call-th of its calls of the API on c, of
// kind k) does before it parks (collectives.CallLook): it looks at the slot of its next position on c's ring, where
// the nonblocking calls go. A member that arrived there with the same call number made a nonblocking call where
// this one made the blocking call, and the two never meet: it ends the job with ErrArg naming both. As the
// Barrier's look does, it marks the ring first (ring.gate), so that a member that arrives there later wakes it
// (arrived), and it looks again. A member that arrived at that position for a later call has a later number.
func callLook(c *ranks.Comm, call uint64, k ranks.CallKind) {
	cc := cacheOf(c)
	rg := ringOf(c, cc)
	rg.gate()
	me := c.Rank()
	sl, u := rg.at(rg.ops[me].n)
	for j := range sl.mem {
		m := &sl.mem[j]
		if j != me && m.gen.Load() == u && m.callno == call {
			endJobAs(c.World(), c.WorldRank(me), fmt.Errorf("%w: collective mismatch: rank %d started %s where "+
				"rank %d started a nonblocking %s (its call %d on the communicator: a blocking call and a nonblocking "+
				"one do not meet)", ranks.ErrArg, me, k, j, m.coll, call))
			return
		}
	}
}
