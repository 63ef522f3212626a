package collectives

import (
	"sync/atomic"

	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// Nonblocking barriers inside a node.
//
// A communicator whose members are all on this node passes its barriers in shared memory on one count (shmComm.
// arrivals): a member's k-th barrier phase is through once the count reaches k*n. A nonblocking barrier (package
// nbc's Ibarrier) arrives on the same count, and its request waits on it (ranks.GateRequest, with the member's
// shmRank as its gate): nobody writes anything of a waiter's, so a barrier of 2 ranks moves one line back and forth,
// as the blocking one does.
//
// The count tells phases apart only while no member counts an arrival of a phase before the phase before it is
// through: blocking barriers cannot, since they wait, but a member may start nonblocking barriers one after the
// other. Such an arrival is put off (a deferral): it is counted as soon as the phase before it is through, by
// whichever arrival completes that phase (its notify runs the deferral's hook), or by the member itself if the
// phase went through as it put it off. A member's later arrivals, nonblocking or blocking, wait behind its deferred
// ones (shmRank.deferred; shmOp.barrier), so that they are counted in the member's order. No member waits for a
// deferral: its count comes from whoever completes the phase before.
//
// Knowing whether the phase before is through costs a look at the count before the arrival's add: where the other
// members have gone on to the next phase, one more transfer of the count's line. The member skips it when its
// latest nonblocking barrier has been reported complete (settled), as in a loop of Ibarrier and Wait; so does its
// next blocking barrier.

// settled reports whether the member's latest nonblocking barrier, if any, has been reported complete: then every
// phase it has arrived at is through, and none of its arrivals is put off.
func (me *shmRank) settled() bool { return !me.unnamed && (me.last == nil || ranks.Reported(me.last)) }

// Reached implements ranks.Gate: the count has reached at.
func (me *shmRank) Reached(at uint64) bool { return me.s.arrivals.Load() >= at }

// Watch implements ranks.Gate: the arrival that completes the count notifies the event (shmOp.barrier, arriveNB),
// which wakes w. Then it runs the look that package nbc gave (WatchBarrier), if any: after the watch, so that a
// member that arrives in the look's slot after the look (and notifies: package nbc, arrived) wakes w to look again.
// Looking first lost that wake-up: TestIbarrierSkipped hung about once in a hundred runs under the race detector.
func (me *shmRank) Watch(at, tag uint64, w *queues.Waker) {
	me.s.ev.watch(w)
	if me.look != nil {
		me.look(at, tag)
	}
	if me.Reached(at) {
		w.Wake()
	}
}

// WatchBarrier has member c's gate (BarrierGate) run look at each watch, before the completion call parks, and its
// Barrier before it parks in shared memory (tag 0): package nbc's look for a member that skipped the barrier. The
// member sets it once, on its goroutine that calls the collectives.
func WatchBarrier(c *ranks.Comm, look func(at, tag uint64)) { stateOf(c).me.look = look }

// lookAt runs the member's look for its Barrier, whose count is at, before it parks; it has package nbc set the
// look first (BarrierLook).
func (o shmOp) lookAt(at uint64) {
	if o.me.look == nil {
		BarrierLook(o.c)
	}
	if o.me.look != nil {
		o.me.look(at, 0)
	}
}

// BarrierLook, which package nbc sets as it loads, has member c of a communicator inside the node set its look
// (WatchBarrier): its Barrier calls it before it first parks. Nil where package nbc is not linked in.
var BarrierLook func(c *ranks.Comm)

// arriveNB counts the member's arrival at its next barrier phase for a nonblocking barrier, or puts it off (see
// above), and returns the count that completes the phase, with done true when the count has reached it.
func (o shmOp) arriveNB() (at uint64, done bool) {
	me, s := o.me, o.s
	me.phase++
	at = me.phase * uint64(s.n)
	prev := at - uint64(s.n)
	ahead := !me.settled() && (me.deferred.Load() != 0 || s.arrivals.Load() < prev)
	me.nbOut, me.unnamed = true, true // until BarrierRequest names its request
	if ahead {
		me.deferred.Add(1)
		d := &deferral{s: s, me: me, prev: prev, at: at}
		d.hook = queues.NewHook(d.try)
		d.try()
		return at, me.Reached(at)
	}
	if s.arrivals.Add(1) == at {
		s.ev.notify()
		return at, true
	}
	return at, me.Reached(at)
}

// A deferral is a member's nonblocking arrival put off until the phase before its own is through (see above).
type deferral struct {
	s        *shmComm
	me       *shmRank
	prev, at uint64 // the counts that complete the phase before, and its own
	hook     *queues.Waker
	done     atomic.Bool // counted, once: by the hook or by the member
}

// try counts the arrival if the phase before is through; otherwise it has the next notify run it again. It runs on
// the member's goroutine when it is put off, then on those of the arrivals that complete phases (notify).
func (d *deferral) try() {
	for !d.done.Load() {
		if d.s.arrivals.Load() < d.prev {
			d.s.ev.watch(d.hook)
			if d.s.arrivals.Load() < d.prev {
				return // the arrival that completes the phase before sees the watch (its notify)
			}
			continue
		}
		if !d.done.CompareAndSwap(false, true) {
			return
		}
		c := d.s.arrivals.Add(1)
		d.me.deferred.Add(-1) // after the add: the member's later arrivals wait for both
		if c == d.at {
			d.s.ev.notify()
		}
		return
	}
}

// ArriveBarrier counts member c's arrival at c's next barrier in shared memory, the one that Barrier, and the phases
// of the shared-memory algorithms, pass (shmOp.barrier), for a nonblocking barrier (package nbc; BarrierGate must
// hold); the caller then names its request (BarrierRequest). It returns the count that the member's request waits
// for on its gate (BarrierGate), with done true when the count has reached it. A member's barriers of either kind,
// and its algorithms' phases, take the count's phases in the order of its calls, which MPI makes every member's
// order: so a nonblocking barrier may meet a blocking one, as gompj lets the members of one call mix them.
func ArriveBarrier(c *ranks.Comm) (at uint64, done bool) {
	st := stateOf(c)
	return st.shmOp(c).arriveNB()
}

// BarrierRequest names r as the request of member c's latest nonblocking barrier (ArriveBarrier): once r is
// reported complete, the member's next barrier need not look whether the phases before it are through.
func BarrierRequest(c *ranks.Comm, r *ranks.Request) {
	me := stateOf(c).me
	me.last, me.unnamed = r, false
}

// NotifyBarrier wakes what waits on c's barrier in shared memory: the completion calls parked on its nonblocking
// barriers look again (package nbc, when a member arrives in a slot where another may have called Ibarrier).
func NotifyBarrier(c *ranks.Comm) {
	if st := stateOf(c); st.shm != nil {
		st.shm.ev.notify()
	}
}

// BarrierPhase returns the number of c's barrier phases in shared memory that member c has arrived at, blocking or
// not (ArriveBarrier); only on the member's goroutine that calls its collectives.
func BarrierPhase(c *ranks.Comm) uint64 {
	if me := stateOf(c).me; me != nil {
		return me.phase
	}
	return 0
}

// Node-aware nonblocking barriers. A nonblocking barrier of a communicator spread over several nodes (package nbc,
// its node-aware schedule) passes each node's phases on its node communicator's count too: every member arrives
// there (ArriveBarrier on the node's communicator), the node's leader waits for the phase to be through
// (NodeCount), passes the barrier among the leaders over the network, then releases its node (NodeRelease.Release),
// and the other members wait for that release. Where the blocking node-aware barrier takes a second phase on the
// node to hold its members back until the leader comes back, the release does it, so the count sees one arrival
// per member and per barrier, at its call, whatever the member's part: the count stays in step with the blocking
// collectives' phases. The release holds counts: the node's leader releases the count that completed the node's
// phase of its barrier, and a member waits for the count its own arrival completes.

// nodeWord is a word of a node communicator's shared state that only grows, as a gate that any goroutine may wait
// on (ranks.Gate): whoever raises it notifies its event, which wakes the watchers.
type nodeWord struct {
	w  *atomic.Uint64
	ev *event
}

// Reached implements ranks.Gate.
func (g nodeWord) Reached(at uint64) bool { return g.w.Load() >= at }

// Watch implements ranks.Gate.
func (g nodeWord) Watch(at, _ uint64, w *queues.Waker) {
	g.ev.watch(w)
	if g.Reached(at) {
		w.Wake()
	}
}

// NodeCount is a node communicator's barrier count as a gate: a node-aware nonblocking barrier's leader has its
// operation wait on it for the node's phase (package nbc, on whichever goroutine runs the operation; a member's
// own gate, BarrierGate, runs the member's look when watched, on the member's goroutine).
type NodeCount struct{ nodeWord }

// NodeCountOf returns c's count as a NodeCount; nil unless c's members are all on this node.
func NodeCountOf(c *ranks.Comm) *NodeCount {
	if st := stateOf(c); st.shm != nil {
		return &NodeCount{nodeWord{&st.shm.arrivals, &st.shm.ev}}
	}
	return nil
}

// NodeRelease is what a node's members other than its leader wait on in a node-aware nonblocking barrier: the
// count of the latest node phase that the leader has released, once the barrier among the leaders is through.
type NodeRelease struct{ nodeWord }

// NodeReleaseOf returns c's release; nil unless c's members are all on this node.
func NodeReleaseOf(c *ranks.Comm) *NodeRelease {
	if st := stateOf(c); st.shm != nil {
		return &NodeRelease{nodeWord{&st.shm.release, &st.shm.relEv}}
	}
	return nil
}

// Release releases count at, on any goroutine: the node's members whose arrivals counted up to at go on. The
// leader's barriers may come back from the network out of order (a later one is through only once every member
// has started the earlier ones too), so the release only grows.
func (g *NodeRelease) Release(at uint64) {
	for {
		old := g.w.Load()
		if old >= at || g.w.CompareAndSwap(old, at) {
			break
		}
	}
	g.ev.notify()
}
