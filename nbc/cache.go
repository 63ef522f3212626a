package nbc

import (
	"slices"
	"weak"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// Reusing operations. Programs make the same nonblocking call again and again: the same collective on the same
// buffers at every time step, or in a benchmark's loop. Building the operation (its schedule, machine, closures)
// costs more than a small collective itself, so a rank keeps, per communicator, the last few operations it built,
// and when one has finished and the same call comes again (collectives.Call.Same, and the same algorithm from the
// table), it runs it again under the new call's operation id instead of building another: its message tags are
// recomputed from the id (Step.Base), a shared-memory schedule moves to the slot and use a new build would have
// taken. The request is always new: a finished operation's old request keeps what it reported. A node-aware
// operation takes, again, the ids and slots of its phases on the node's and the leaders' communicators, in the order
// its build took them.
//
// Small calls are kept outright. Large ones are kept weakly: a kept operation holds the caller's buffers, and a
// cache must not keep a program's freed gigabyte alive. A large operation's request holds it only while its run is
// active (ranks.Comm.OpRequestLoose: a reported request, which has let go of its operation, or one allocated alone,
// never a new one of the rank's block), and the memo keeps it weakly too (memo.go), so that once its run is reported
// nothing but the weak pointers holds the operation, and the next collection frees it with the buffers. Until then
// the same call finds it.
// Rebuilding is not only the schedule's instructions: the kilobytes a build allocates come, after a collection, from
// fresh pages, and a first touch cost 12.5 us a page on the VM of the measurements. Ialltoall of 1 MiB blocks, 2
// ranks: 68 -> 50 us with the operation reused (4 alternated pairs; Alltoall 45-50 us).

const (
	cacheLen   = 8        // operations kept per rank and communicator, outright and weakly each
	cacheBytes = 64 << 10 // calls moving more are kept weakly
)

// commCache is a rank's nbc state on one communicator (collectives.NbcState): its reusable operations, and the
// communicator's shared-memory ring once found.
type commCache struct {
	ops     [cacheLen]*op
	next    int
	big     [cacheLen]weak.Pointer[op] // large calls' operations (kept weakly)
	nextBig int
	ring    *ring
	memo    [numKinds]memo // the last call of each kind (memo.go)
	bar     *barGate       // its Ibarriers' gate, on a communicator inside the node (gate.go)
	hgate   *hierGate      // its node-aware Ibarriers' node (hiergate.go), made on first use
	hgateNo bool           // they do not take the node's count (hierGateOf)
}

func cacheOf(c *ranks.Comm) *commCache {
	return collectives.NbcState(c, func() any { return new(commCache) }).(*commCache)
}

// small reports whether call a is kept outright (else weakly).
func small(a *collectives.Call) bool { return len(a.Send)+len(a.Recv) <= cacheBytes }

// reuse runs again a kept operation of the same call a, with algorithm algo, and returns it; nil if there is none
// free. It takes the operation's id (and slot) at the point where building one would have.
func reuse(c *ranks.Comm, a *collectives.Call, algo string) *op {
	if a.Object {
		return nil
	}
	cc := cacheOf(c)
	if small(a) {
		for _, o := range cc.ops {
			if o.sameCall(a, algo) && o.again(c, cc) {
				return o
			}
		}
		return nil
	}
	for _, w := range cc.big {
		if o := w.Value(); o.sameCall(a, algo) && o.again(c, cc) {
			return o
		}
	}
	return nil
}

// sameCall reports whether o is a finished operation built for call a with algorithm algo.
func (o *op) sameCall(a *collectives.Call, algo string) bool {
	return o != nil && o.algo == algo && o.done.Load() && o.key.Same(a)
}

// again runs the finished kept op o again, as the next operation on c, and reports whether it could: a worker's
// run of it may still be under way.
func (o *op) again(c *ranks.Comm, cc *commCache) bool {
	if !o.hold() {
		return false
	}
	o.againHeld(c, cc)
	return true
}

// hold holds the finished op as a run would, and reports whether it could: a worker's stale task may still look at
// it (and then finds it finished).
func (o *op) hold() bool { return o.state.CompareAndSwap(opIdle, opRunning) }

// againHeld is again once the caller holds the op (hold).
func (o *op) againHeld(c *ranks.Comm, cc *commCache) {
	o.retarget(c, cc)
	o.rerun(c)
}

// rerun runs again the op, which the caller holds and has retargeted.
func (o *op) rerun(c *ranks.Comm) {
	o.m.Reset()
	o.err = nil
	o.done.Store(false)
	o.setReq(o.request(c))
	ranks.Launch(o.req)
	o.launch(true)
}

// chainAgain is again for an op that runs as a chain of its tiny phases (o.chain): it arrives at each phase's use
// in turn, done with all but the last at its arrival, and returns the last one's request, which its runner (most
// often the leader, coming through its own phases) completes. The op itself does not run, and stays finished. If a
// phase's slot is still in use, the op runs instead (its request is returned), as again runs it.
func (o *op) chainAgain(c *ranks.Comm, cc *commCache) *ranks.Request {
	if !o.state.CompareAndSwap(opIdle, opRunning) {
		return nil
	}
	o.retarget(c, cc)
	for _, p := range o.phases {
		if !slotFree(p.tiny.sl, p.tiny.u) {
			o.rerun(c)
			return o.req
		}
	}
	o.state.Store(opIdle) // finished: a stale worker's run finds nothing to do
	var req *ranks.Request
	for i, p := range o.phases {
		t := p.tiny
		var to ranks.Target
		if i == len(o.phases)-1 {
			req = t.c.CollRequest()
			to = ranks.TargetOf(req)
		}
		tinyArrive(t.c, t.sl, t.u, t.c.Rank(), t.c.Size(), t.a, to, byColl)
	}
	return req
}

// keep remembers op o, built for call a with algorithm algo, for reuse (a large call's weakly).
func keep(c *ranks.Comm, o *op, a *collectives.Call, algo string) {
	if a.Object {
		return
	}
	k := *a // its own copy of the counts: the caller may change its slices' values before the next call
	k.Counts, k.Displs = slices.Clone(a.Counts), slices.Clone(a.Displs)
	k.RCounts, k.RDispls = slices.Clone(a.RCounts), slices.Clone(a.RDispls)
	o.key, o.algo = &k, algo
	cc := cacheOf(c)
	if small(a) {
		cc.ops[cc.next] = o
		cc.next = (cc.next + 1) % cacheLen
		return
	}
	o.weak = true
	cc.big[cc.nextBig] = weak.Make(o)
	cc.nextBig = (cc.nextBig + 1) % cacheLen
}

// request returns a new request for o on c: one of its own for an op kept weakly (see above).
func (o *op) request(c *ranks.Comm) *ranks.Request {
	if o.weak {
		return c.OpRequestLoose(o)
	}
	return c.OpRequest(o)
}

// retarget gives a kept operation the next operation id of c: new tags for its messages, or the next slot and
// use of c's ring for a shared-memory schedule; then the same, in build order, for a node-aware operation's phases
// on their communicators (hier.go), so that every member takes the same ids and slots whether it builds or reuses.
func (o *op) retarget(c *ranks.Comm, cc *commCache) {
	id := collectives.NextOp(c)
	if o.shm != nil {
		old := o.shm.sl
		sl, u := slotFor(c, cc)
		o.shm.moveTo(sl, u, o)
		o.shm.onRing(c)
		relist(o.m.s, old, sl)
		return
	}
	retag(o.m.s, id)
	for i := range o.phases {
		p := &o.phases[i]
		if p.gate {
			continue // a node phase on the node's count (hiergate.go) takes no id
		}
		pid := collectives.NextOp(p.c)
		if p.tiny != nil {
			p.tiny.sl, p.tiny.u = slotFor(p.c, cacheOf(p.c))
			continue
		}
		if p.shm == nil {
			retag(p.s, pid)
			continue
		}
		old := p.shm.sl
		sl, u := slotFor(p.c, cacheOf(p.c))
		p.shm.moveTo(sl, u, o)
		p.shm.onRing(p.c)
		relist(p.s, old, sl)
	}
}

// retag gives s's messages the tags of operation id.
func retag(s *Schedule, id collectives.OpID) {
	for i := range s.Steps {
		st := &s.Steps[i]
		switch st.Kind {
		case StepSend, StepRecv, StepSendObj, StepRecvObj:
			st.Tag = collectives.Tag(id, st.Base)
		}
	}
}

// relist points s's waits on slot old's wait lists at the same lists of slot sl.
func relist(s *Schedule, old, sl *slot) {
	for i := range s.Steps {
		st := &s.Steps[i]
		switch {
		case st.Kind != StepWait:
		case st.List == &old.list:
			st.List = &sl.list
		case st.List == &old.flist:
			st.List = &sl.flist
		}
	}
}
