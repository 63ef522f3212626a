package ranks

import (
	"fmt"

	"github.com/gompj/gompj/queues"
)

// Gates: a barrier's request that waits on a count rather than on a flag.
//
// The members of a communicator inside the node pass a barrier by raising a count that they all share, each by one
// (package collectives: the barrier in shared memory, which Barrier passes too), and a member is through once the
// count reaches its phase's target. A nonblocking barrier on such a communicator is the same arrival, and its request
// a small collective's run (CollRequest) whose waiters look at the count: nobody has anything of theirs to write, so
// the member that arrives last writes only the count, one line that every member reads, where a flag in each waiter's
// request cost the last member a transfer of every waiter's line and each waiter one back (2 ranks: 0.19 us an
// Ibarrier and Wait against Barrier's 0.12; with the count, 0.125).
//
// The completion calls find the count through poll, which completes the request's flag once the count is reached,
// and through blocker: a waiter about to park asks the gate to signal its rank's event once the count is reached
// (Watch), and looks again when the event fires, as it does for a rank's operations.

// Gate is what a barrier's request waits on (GateRequest): a count that the members' arrivals raise.
type Gate interface {
	// Reached reports whether the count has reached at.
	Reached(at uint64) bool
	// Watch has the gate wake w once the count has reached at, or at once if it has: a waiter of the gate's request
	// is about to park. Every park watches again; a wake-up may come late, or for an earlier watch. tag is the
	// request's (GateRequest).
	Watch(at, tag uint64, w *queues.Waker)
}

// GateRequest returns a new active request of c's rank that completes once gate g has reached at: a barrier's
// member that has arrived and waits for the others (package nbc). tag is the gate's, for its watches (Gate.Watch).
// Like CollRequest, only the communicator's collective starts may call it. A request of a communicator handle that
// has no rank (a world's own) cannot park on its rank's event, so c must have one (HasRank).
func (c *Comm) GateRequest(g Gate, at, tag uint64) *Request { return c.gateRequest(g, at, tag, false) }

// NetGateRequest is GateRequest for a gate that the network raises: a node-aware barrier's release, which comes
// once the node's leader hears from the other nodes' (package nbc). Its waiters drive the network device as they
// wait, and a test of it polls the device (World.waitPolicy, pollFor): a node's ranks may all wait on the release
// while the message that raises it lies unread on the device.
func (c *Comm) NetGateRequest(g Gate, at, tag uint64) *Request {
	return c.gateRequest(g, at, tag, true)
}

// StartGate makes the run that a persistent collective's Start begins (CollStarter.StartColl's request) wait on
// gate g reaching at, as GateRequest's does (remote: as NetGateRequest's): a persistent barrier's member that has
// arrived (package nbc). Nobody completes the run's flag: its completion calls do, once the gate is reached. It
// fails, setting nothing, on a request that is not a persistent collective's (PersistentCollRequest).
func StartGate(h *Request, g Gate, at, tag uint64, remote bool) error {
	s := h.s
	var p *collRecipe
	if s.ext != nil {
		p, _ = s.ext.persist.(*collRecipe)
	}
	if p == nil {
		return fmt.Errorf("%w: a gate for a request that is not a persistent collective's", ErrInternal)
	}
	if p.gate == nil || p.gate.g != g {
		p.gate = &gateRef{g: g} // once: a run's report clears the target, and the request's next runs take it again
	}
	s.target, s.vn, s.voff, s.remote = p.gate, int(at), int(tag), remote
	return nil
}

func (c *Comm) gateRequest(g Gate, at, tag uint64, remote bool) *Request {
	h := c.collRequest(false)
	h.s.remote = remote // the state may have been another kind of run's
	// A small collective's run has no receive buffer, object target or view: the gate takes their fields (see
	// gateOf), which keeps the request within its 256 bytes (TestRequestLayout). The target holds the gate behind a
	// pointer of a type of this package's, which gateOf's look at every poll tells by its type word alone (a look for
	// an interface type would search for its method table).
	var ref *gateRef
	if c.colls != nil {
		ref = c.colls.gate
	}
	if ref == nil || ref.g != g {
		ref = &gateRef{g: g}
		if c.colls != nil {
			c.colls.gate = ref
		}
	}
	h.s.target, h.s.vn, h.s.voff = ref, int(at), int(tag)
	return h
}

// over reports whether a run is over: its flag is set, or its barrier's gate reached (GateRequest).
func (s *request) over() bool {
	if s.done.Done() {
		return true
	}
	g, at := s.gateOf()
	return g != nil && g.Reached(at)
}

// gateRef is a barrier's gate as its requests' states hold it (GateRequest).
type gateRef struct{ g Gate }

// Reported reports whether h's run has been reported complete by a completion call: a barrier's member that knows
// its latest barrier through need not look whether the phase before its next one is (package collectives,
// ArriveBarrier). A run freed while active (MPI_Request_free) goes on, and is not reported.
func Reported(h *Request) bool { return h.stale() || h.is(lifeInactive) }

// HasRank reports whether c is a handle of one of the node's ranks, whose requests park on its rank's event.
func (c *Comm) HasRank() bool { return c.r != nil }

// gateOf returns the gate r waits on and its target, if r is a barrier's run (GateRequest).
func (r *request) gateOf() (Gate, uint64) {
	if r.kind != kindColl || r.target == nil {
		return nil, 0
	}
	if ref, ok := r.target.(*gateRef); ok {
		return ref.g, uint64(r.vn)
	}
	return nil, 0
}

// pollGate is poll for a barrier's run: once the gate is reached, it completes the run's flag (more than one
// completion call may: the flag's swap makes the later ones nothing). Only counted completion calls (enter) may
// call it: a run's state is taken again only once none is counted, so the flag it sets is always this run's.
func (r *request) pollGate(g Gate, at uint64) bool {
	if r.done.Done() {
		return true
	}
	if !g.Reached(at) {
		return false
	}
	r.done.Complete()
	return true
}

// watchGate is blocker's part for a barrier's run: the gate signals the rank's event once it is reached.
func (r *request) watchGate(g Gate, at uint64) {
	if r.owner != nil {
		g.Watch(at, uint64(r.voff), r.owner.ops.gateHook)
	}
}

// newRankOps makes a rank's operations' state, with the hook that its gates wake.
func newRankOps() *rankOps {
	o := &rankOps{}
	o.gateHook = queues.NewHook(func() { o.ev.Signal() })
	return o
}
