package nbc

import (
	"slices"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// Reusing operations. Programs make the same nonblocking call again and again: the same collective on the same
// buffers at every time step, or in a benchmark's loop. Building the operation (its schedule, machine, closures)
// costs more than a small collective itself, so a rank keeps, per communicator, the last few operations it built
// for small calls, and when one has finished and the same call comes again (collectives.Call.Same, and the same
// algorithm from the table), it runs it again under the new call's operation id instead of building another: its
// message tags are recomputed from the id (Step.Base), a shared-memory schedule moves to the slot and use a new
// build would have taken. The request is always new: a finished operation's old request keeps what it reported.
// A node-aware operation takes, again, the ids and slots of its phases on the node's and the leaders'
// communicators, in the order its build took them. Large calls are not kept: a cache should not keep their buffers
// alive, and their cost is their data.

const (
	cacheLen   = 8        // operations kept per rank and communicator
	cacheBytes = 64 << 10 // calls moving more are not kept
)

// commCache is a rank's nbc state on one communicator (collectives.NbcState): its reusable operations, and the
// communicator's shared-memory ring once found.
type commCache struct {
	ops  [cacheLen]*op
	next int
	ring *ring
	memo [numKinds]memo // the last call of each kind (memo.go)
}

func cacheOf(c *ranks.Comm) *commCache {
	return collectives.NbcState(c, func() any { return new(commCache) }).(*commCache)
}

// cacheable reports whether operations of call a may be kept.
func cacheable(a *collectives.Call, algo string) bool {
	return !a.Object && len(a.Send)+len(a.Recv) <= cacheBytes
}

// reuse runs again a kept operation of the same call a, with algorithm algo, and returns it; nil if there is none
// free. It takes the operation's id (and slot) at the point where building one would have.
func reuse(c *ranks.Comm, a *collectives.Call, algo string) *op {
	if !cacheable(a, algo) {
		return nil
	}
	cc := cacheOf(c)
	for _, o := range cc.ops {
		if o == nil || o.algo != algo || !o.done.Load() || !o.key.Same(a) {
			continue
		}
		if o.again(c, cc) {
			return o
		}
	}
	return nil
}

// again runs the finished kept op o again, as the next operation on c, and reports whether it could: a worker's
// run of it may still be under way.
func (o *op) again(c *ranks.Comm, cc *commCache) bool {
	// Hold the op as a run would: a worker's stale task may still look at it (and then finds it finished).
	if !o.state.CompareAndSwap(opIdle, opRunning) {
		return false
	}
	o.retarget(c, cc)
	o.m.Reset()
	o.err = nil
	o.done.Store(false)
	o.setReq(c.OpRequest(o))
	ranks.Launch(o.req)
	o.held()
	o.started()
	return true
}

// keep remembers op o, built for call a with algorithm algo, for reuse.
func keep(c *ranks.Comm, o *op, a *collectives.Call, algo string) {
	if !cacheable(a, algo) {
		return
	}
	k := *a // its own copy of the counts: the caller may change its slices' values before the next call
	k.Counts, k.Displs = slices.Clone(a.Counts), slices.Clone(a.Displs)
	k.RCounts, k.RDispls = slices.Clone(a.RCounts), slices.Clone(a.RDispls)
	o.key, o.algo = &k, algo
	cc := cacheOf(c)
	cc.ops[cc.next] = o
	cc.next = (cc.next + 1) % cacheLen
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
		relist(o.m.s, old, sl)
		return
	}
	retag(o.m.s, id)
	for i := range o.phases {
		p := &o.phases[i]
		pid := collectives.NextOp(p.c)
		if p.shm == nil {
			retag(p.s, pid)
			continue
		}
		old := p.shm.sl
		sl, u := slotFor(p.c, cacheOf(p.c))
		p.shm.moveTo(sl, u, o)
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
