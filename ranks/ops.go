package ranks

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// Operation requests (nonblocking and persistent collectives) and the rank that owns them.
//
// An operation moves on three ways: a worker of the node's pool runs it when one of its children completes
// (package nbc hands it over), the calls that start it run its first step, and the completion calls of its rank
// run it. The last is MPI's progress rule: a rank waiting for anything, or testing anything, moves all its
// operations on, not only those it names. Without it, and without workers (GOMPJ_ASYNC_PROGRESS=0), two ranks
// could each wait for a request whose progress needs an operation of the other's that nobody runs. So a rank keeps
// the set of its active operation requests, and an event that an operation signals whenever it can move on;
// every completion call runs the set (sweep) and parks on the event as well as on what it waits for.
//
// Whoever finishes an operation (a worker, a completion call, the starting call) completes its request with
// CompleteOp, once: the request's error and flag are set there, and only there.

// rankOps is a rank's active operation requests and their event.
type rankOps struct {
	ev queues.Event
	// gateHook signals ev: what a completion call about to park on a barrier's run has its gate wake (gate.go)
	gateHook *queues.Waker
	n        atomic.Int32 // len(reqs), read without the lock: the common case is none
	// workers counts runs of the rank's operations under way on the node's worker pool (EnterWorker): a completion
	// call of the rank then parks rather than spins (awaitAny)
	workers atomic.Int32
	mu      sync.Mutex
	reqs    []*request
	chunk   atomic.Pointer[opChunk] // where the rank's nonblocking collectives get their requests (newOp)
	// free: reported operation requests of the rank, for its next ones (reuseOp)
	free [opFreeLen]atomic.Pointer[opRequest]
}

// opFreeLen is how many reported operation requests a rank keeps for reuse, as collFreeLen is for small
// collectives'.
const opFreeLen = 8

// opChunkLen is how many operation requests a rank allocates at once.
const opChunkLen = 8

// opChunk is a block of operation requests that a rank hands out one at a time, as reqChunk is for point-to-point
// ones; a chunk lives as long as any of its requests is referenced. A reported request goes back to its rank
// (reuseOp) and serves a later one under a new generation, as a small collective's state does (see Request): the
// first run's handle is the one made with the state, later runs get one of their own (OpRequest).
type opChunk struct {
	reqs [opChunkLen]opRequest
	used atomic.Int32
}

// spare returns a reported operation request of the rank (reuseOp), reset under its next generation for a new run;
// nil if there is none.
func (o *rankOps) spare() *opRequest {
	for i := range o.free {
		if o.free[i].Load() == nil { // a load first: a swap is a locked instruction even on an empty slot
			continue
		}
		if q := o.free[i].Swap(nil); q != nil {
			q.x.opDone.Store(false) // before the life word makes the run active
			q.r.nextRun()
			return q
		}
	}
	return nil
}

// newOp returns an operation request of the rank for a new run: a reported one (spare), or a new one from the
// rank's block. reused says which.
func (o *rankOps) newOp() (q *opRequest, reused bool) {
	if q := o.spare(); q != nil {
		return q, true
	}
	for {
		ch := o.chunk.Load()
		if ch != nil {
			if i := ch.used.Add(1) - 1; i < opChunkLen {
				return &ch.reqs[i], false
			}
		}
		o.chunk.CompareAndSwap(ch, new(opChunk))
	}
}

// add records an operation request that has started. A persistent request may still be listed from its last run
// (one that finished before any sweep, often in its own Start): it stays listed once. Listed twice, it kept the
// rank's count of operations at 2, so Wait never took the lone operation's spin (spinLone) and went the rank-wide
// way of the event, sweeps and signals until a sweep saw the run finished: a third of the Waits of a loop of
// AllreduceInit's Start and Wait at 8 B, 2 ranks in one process.
func (o *rankOps) add(r *request) {
	o.mu.Lock()
	if !r.ext.listed.Load() {
		r.ext.listed.Store(true)
		o.reqs = append(o.reqs, r)
		o.n.Store(int32(len(o.reqs)))
	}
	o.mu.Unlock()
}

// drop takes a finished request off the list: a persistent one that is freed, which no sweep may come to see
// finished (its rank may never make another completion call on an operation), and which the list must not keep
// alive, with its operation and the operation's buffers and slots; a reported one-shot request that goes back to
// its rank (reuseOp).
func (o *rankOps) drop(r *request) {
	o.mu.Lock()
	if r.ext.listed.Load() {
		r.ext.listed.Store(false)
		if i := slices.Index(o.reqs, r); i >= 0 {
			o.reqs = slices.Delete(o.reqs, i, i+1)
			o.n.Store(int32(len(o.reqs)))
		}
	}
	o.mu.Unlock()
}

// sweep runs every active operation of the rank and forgets the finished ones. One goroutine sweeps at a time;
// the others go on (the sweeper sees what they would).
func (o *rankOps) sweep() {
	if o.n.Load() == 0 || !o.mu.TryLock() {
		return
	}
	keep := o.reqs[:0]
	for _, r := range o.reqs {
		if !r.pollOp() {
			keep = append(keep, r)
		} else {
			r.ext.listed.Store(false) // the sweep reads nothing of r after this (see reuseOp)
		}
	}
	clear(o.reqs[len(keep):])
	o.reqs = keep
	o.n.Store(int32(len(keep)))
	o.mu.Unlock()
}

// sweep runs the operations that a completion call on r should move on: the orphans of r's node, and the active
// operations of r's rank.
func (r *request) sweep() {
	r.w.sweepOrphans()
	if rk := r.owner; rk != nil {
		rk.ops.sweep()
	}
}

// CompleteOp completes operation request r with err: its operation has finished. Only the first call counts, so
// that a worker and a completion call that both see the operation finish complete the request once. For gompj's
// own packages (nbc), like CompletionOf.
func CompleteOp(h *Request, err error) { h.s.completeOp(err) }

// completeOp is CompleteOp on the state.
func (r *request) completeOp(err error) {
	if !r.ext.opDone.CompareAndSwap(false, true) {
		return
	}
	// The owner is read before the completion: once it is done, the owner's Wait may return and reuse the request
	// for its next operation (reuseOp, opRequestIn), which writes the field.
	rk := r.owner
	r.err = err
	r.done.Complete()
	if rk != nil {
		rk.ops.ev.Signal() // a completion call waiting for another of the rank's requests looks again
	}
}

// EnterOps and LeaveOps bracket a call of c's rank that runs its operations itself: a call that starts a
// collective. Meanwhile the rank's operations' signals are its own to act on (SignalOp reports them taken, so they do
// not go to the worker pool, whose goroutine would need a processor the rank holds), and LeaveOps runs the rank's
// operations once more if one came after gen (EnterOps' result).
func EnterOps(c *Comm) (gen uint64) {
	ev := &c.r.ops.ev
	ev.Enter()
	return ev.Gen()
}

// LeaveOps ends what EnterOps began.
func LeaveOps(c *Comm, gen uint64) {
	ev := &c.r.ops.ev
	ev.Leave()
	if ev.Gen() != gen {
		c.r.ops.sweep()
	}
}

// EnterWorker and LeaveWorker bracket a run of an operation of c's rank on the node's worker pool. While one is
// under way, a completion call of the rank parks instead of spinning (parkPolicy): the operation is the worker's
// until its run ends, so the waiter could not move it on, and on a box whose cores the ranks, the device's loop and
// the pool share, a spinning waiter takes the core the worker needs. Traced over TCP between two node processes
// (1 MiB Iallreduce, idle computation, 2 vCPUs), both ranks came back from their computation while one's worker
// was combining: each spun for its 1 ms network window, and the worker, runnable all the while, waited 1.5 ms for a
// core. LeaveWorker signals the rank's event, so that a parked completion call looks again (and spins again, if its
// rank has no other run under way).
func EnterWorker(c *Comm) {
	if c.r != nil {
		c.r.ops.workers.Add(1)
	}
}

// LeaveWorker ends what EnterWorker began.
func LeaveWorker(c *Comm) {
	if rk := c.r; rk != nil && rk.ops.workers.Add(-1) == 0 && rk.ops.ev.Waiting() {
		rk.ops.ev.Signal()
	}
}

// parkPolicy is how a completion call waits while a worker runs one of its rank's operations: no spinning, no
// yields, no driving the device (EnterWorker).
var parkPolicy queues.Policy

// waitPolicyOf is how a completion call of rk (nil: of no rank) waits for what may (remote) or may not come
// through the network device (awaitAny): parked while a worker runs one of rk's operations (EnterWorker), else
// as any wait does.
func (w *World) waitPolicyOf(rk *Rank, remote bool) *queues.Policy {
	if rk != nil && rk.ops.workers.Load() > 0 {
		return &parkPolicy
	}
	return w.waitPolicy(remote)
}

// SignalOp says that an operation of c's rank can move on. It reports whether a completion call of the rank is
// under way, which will run it; otherwise the caller runs it or hands it to the node's worker pool. It takes the
// communicator, not the operation's request: a signal may come late, from a child that completed in an earlier run
// of an operation now reused under a new request (package nbc), and must read nothing that a new run writes.
func SignalOp(c *Comm) bool {
	rk := c.r
	if rk == nil {
		return false
	}
	rk.ops.ev.Signal()
	return rk.ops.ev.Waiting()
}

// OpRequest returns an active request of c's rank that completes when op does (a nonblocking collective). Once
// op knows its request, Launch hands it to the rank's completion calls, which move it on (see above).
func (c *Comm) OpRequest(op Operation) *Request {
	if c.r == nil {
		return c.w.NewOpRequest(op)
	}
	q, reused := c.r.ops.newOp()
	h := c.opRequestIn(q, op)
	if reused {
		// A handle of its own, not one from the rank's block (newHandle): the first run's (q.h) may still be held,
		// and reads as reported. A block's handle would tie the block's other 63 states to whoever keeps this one
		// (a kept operation keeps its last request's), and through a state that was not reused (a waiter parked
		// on it), that state's old operation and its communicator: freed communicators then lived on, up to 19
		// MB of them against 2-3 in TestFreedCommunicatorsReleased across node processes.
		return &Request{s: &q.r, gen: q.r.life.Load() >> genShift}
	}
	return h
}

// opRequestIn makes o an active request of c's rank for op.
func (c *Comm) opRequestIn(o *opRequest, op Operation) *Request {
	r := &o.r
	r.w, r.kind, r.remote, r.ext, r.owner = c.w, kindOp, c.w.dev != nil, &o.x, c.r
	o.x.op = op
	o.h.s = r
	return &o.h
}

// reuseOp gives reported operation request s back to its rank (see Request.reuse), if it is a one-shot request of
// the rank (not persistent, not the world's) and off the rank's list of active operations: a sweep (under the
// list's lock) is the only look at an operation request that no completion call counts, and it looks only at
// listed ones. A finished request stays listed until a sweep forgets it, so reuseOp forgets it itself. It lets go
// of the operation, which a kept request would hold (a large one's buffers too) until its next use.
func reuseOp(s *request) {
	rk := s.owner
	if rk == nil || s.ext.persist != nil {
		return
	}
	o := rk.ops
	// Most often a sweep has forgotten it already; then the sweep is through with it (it reads nothing of a request
	// after marking it unlisted), and no lock is needed.
	if s.ext.listed.Load() {
		o.drop(s)
	}
	s.ext.op = nil
	q := (*opRequest)(unsafe.Pointer(s)) // the state is its opRequest's first field
	for i := range o.free {
		if o.free[i].CompareAndSwap(nil, q) {
			return
		}
	}
}

// OpRequestLoose is OpRequestAlone with a reported operation request of the rank when there is one (reuseOp), under
// a handle of its own as in OpRequest: package nbc's large operations, which it keeps weakly, take theirs this way.
// A reported request holds no operation (reuseOp lets go of it), and takes this one only while its run is active;
// a new request each time, allocated alone, cost a large call about 0.15 us and the collections it brought (64 KiB
// Iallreduce on 2 ranks, with the memo's run again: 1.22-1.34 -> 1.07-1.19x Allreduce's time, 3 alternated runs).
func (c *Comm) OpRequestLoose(op Operation) *Request {
	if c.r != nil {
		if q := c.r.ops.spare(); q != nil {
			c.opRequestIn(q, op)
			return &Request{s: &q.r, gen: q.r.life.Load() >> genShift} // see OpRequest
		}
	}
	return c.OpRequestAlone(op)
}

// OpRequestAlone is OpRequest with a request allocated on its own, not from the rank's block of requests: it holds
// op only as long as its caller holds it (a block lives as long as any of its requests is referenced, and with it
// every operation the block's requests ran). Package nbc keeps large operations weakly, for reuse, and gives them
// these.
func (c *Comm) OpRequestAlone(op Operation) *Request {
	if c.r == nil {
		return c.w.NewOpRequest(op)
	}
	return c.opRequestIn(new(opRequest), op)
}

// CollRequest returns a new active request of c's rank that completes when CompleteColl is called on it: a
// collective that another party runs to its end for this rank (package nbc's small calls on one node, which the
// last member to arrive runs for every member). Its waiters wait as for a point-to-point request of the node: there
// is no operation to move on, and nothing of it goes through the network device. Only the communicator's collective
// starts may call it (see collReqs).
func (c *Comm) CollRequest() *Request { return c.collRequest(false) }

// CollRequestDone is CollRequest for a run that is over at its start, without error (package nbc's small
// collectives' members whose part is done once their contribution is in, and the member that arrives last and runs
// the call). A reported state taken again keeps the flag its last run left done, so the run costs neither its reset
// nor its completion, two locked instructions.
func (c *Comm) CollRequestDone() *Request { return c.collRequest(true) }

// collRequest is CollRequest, its run over at its start if done.
func (c *Comm) collRequest(done bool) *Request {
	if c.r == nil {
		r := &Request{s: &request{w: c.w, kind: kindColl}}
		if done {
			r.s.done.Complete()
		}
		return r
	}
	if c.colls == nil {
		c.colls = new(collReqs)
	}
	h := c.colls.takeRun(c.r, done)
	if h.s.target != nil { // the state's last run was a barrier's (GateRequest, NetGateRequest)
		h.s.target, h.s.vn, h.s.voff, h.s.remote = nil, 0, 0, false
	}
	return h
}

// CompleteColl completes r, a request of CollRequest, with err; once. For package nbc. It reads nothing of r and
// writes only its flag (and its error, if any): the caller is another rank, and a look at r's last line, where the
// owner's report marks it inactive, cost the owner a transfer of that line back (8-byte Iallreduce on 2 ranks).
func CompleteColl(h *Request, err error) { completeColl(h.s, err) }

// completeColl is CompleteColl on the state.
func completeColl(r *request, err error) {
	if err != nil {
		r.err = err
	}
	r.done.Complete()
}

// PeerOnNode reports whether rank p of c (or ProcNull) is reached without the network device: it lives in this
// node process, or there is no device.
func (c *Comm) PeerOnNode(p int) bool {
	return c.w.dev == nil || p < 0 || c.w.local(c.peerWorld(p)) != nil
}

// OpOnNode says that operation request r moves nothing through the network device: every message of its operation
// goes between ranks of this node (a shared-memory collective; a node-aware one's member that does not lead its
// node). Its waiters then wait as for a local message, without driving the device: a member waiting for its
// node's phase polled the network all the while, taking a processor and the device's lock from its leader, which
// needed both. Call it before the request is launched or started.
func OpOnNode(r *Request) { r.s.remote = false }

// Launch makes the completion calls of r's rank move operation request r on, from now until it completes.
func Launch(h *Request) {
	if rk := h.s.owner; rk != nil {
		rk.ops.add(h.s)
	}
}

// ResumeNetwork makes the node's network device run its own progress loop at once, for operations that must move
// on while their ranks compute. A rank that stops waiting leaves the device to it lazily (device.Poller: the loop
// may stay down a little while, expecting the rank to poll again soon); an operation just started, or still active
// when its rank's completion call returns, needs the network now, the way a rank that parks does.
func (w *World) ResumeNetwork() {
	if p, ok := w.dev.(device.Poller); ok {
		p.Enter()
		p.Leave(true)
	}
}

// ResumeNetworkSoon is ResumeNetwork for a small operation, which its rank most often waits for at once (OSU's
// pure-time loop; a residual's Iallreduce and its Wait): the loop resumes resumeGrace later, if by then a rank of
// this node still has an operation under way, unless a rank drives the device then (ResumeNetwork does nothing
// while one does). Resuming at once cost a small operation more than the operation itself: the woken loop soon
// slept again, with its doorbell's flag up, so the peers' next messages each rang it (a system call on their side,
// a thread woken on this one), and the rank's Wait, entering as a driver, woke it once more to make it stand down.
// An 8-byte Iallreduce and its Wait between two node processes on one host (shared memory between them, 1 rank
// each, OSU's loop with a barrier between calls, 5 interleaved rounds) took 4.2-4.9 us, against 1.5-2.1 for
// Allreduce; with the grace, 2.4-3.1 (a grace of 50 us: 2.9-4.1). The timer is armed once per grace, not per
// operation: a start arms it only if it is not armed.
func (w *World) ResumeNetworkSoon() {
	if w.soon == nil || w.soonArmed.Load() || !w.soonArmed.CompareAndSwap(false, true) {
		return
	}
	w.soon.Reset(resumeGrace)
}

// resumeGrace: see ResumeNetworkSoon. Long beside a start and its Wait (microseconds), short beside a computation
// worth overlapping. Only calls of a few KiB take it (nbc's soonBytes).
const resumeGrace = 200 * time.Microsecond

// resumeDue is the grace timer's function (ResumeNetworkSoon).
func (w *World) resumeDue() {
	w.soonArmed.Store(false)
	if w.aborted.Load() {
		return
	}
	for _, rk := range w.ranks {
		if rk.ops.n.Load() > 0 {
			w.ResumeNetwork()
			return
		}
	}
}

// Spinner is an Operation that a waiting completion call of its rank may run to its end itself, spinning on what it
// waits for, instead of parking on the rank's event until a signal (ops.go's lone-operation path, spinLone).
type Spinner interface {
	// Spin runs the operation and spins, per p's window (no parking), on the condition it waits for, running it
	// again whenever that holds, until it has finished (true) or stop reports true or the window is over (false).
	// Meanwhile the operation's own signals are the caller's to act on: it neither signals the rank nor goes to the
	// worker pool. On its way out it runs the operation once more, so that no signal it dropped is lost.
	Spin(p *queues.Policy, stop SpinStop) bool
}

// SpinStop says when a Spinner must stop spinning: the request waited for is done (an operation kept for reuse
// may be running a later call by then), another of the rank's operations was signalled (the caller then runs them
// all), or the job aborted. A value, so that handing it through the interface allocates nothing.
type SpinStop struct {
	done    *queues.Completion
	ev      *queues.Event
	gen     uint64
	aborted *atomic.Bool
}

// Stopped reports whether the spin must stop.
func (s SpinStop) Stopped() bool { return s.done.Done() || s.ev.Gen() != s.gen || s.aborted.Load() }

// spinLone is Wait's path for an operation request that is its rank's only active one and moves nothing through the
// network device (the small collectives of one box): the waiter runs the operation itself and spins on what it waits
// for (Spinner), with none of the rank's event, sweeps and signals in between, the way a blocking collective spins
// on its peers' slots. It reports whether r is done; if not (the spin window ended, another of the rank's operations
// was signalled, the job aborted), the caller waits as for any request. MPI's progress rule holds: the rank has no
// other operation to move on, and one started meanwhile by another goroutine of the rank signals the rank's event,
// which ends the spin.
func (r *request) spinLone() bool {
	rk := r.owner
	if rk == nil || r.remote || rk.ops.n.Load() != 1 || r.w.orphans.n.Load() != 0 {
		return false
	}
	sp, ok := r.ext.op.(Spinner)
	if !ok {
		return false
	}
	ev := &rk.ops.ev
	ev.Enter() // the rank's other operations' signals are this call's to act on (SignalOp), as in awaitAny
	gen := ev.Gen()
	sp.Spin(r.w.waitPolicy(false), SpinStop{done: &r.done, ev: ev, gen: gen, aborted: &r.w.aborted})
	ev.Leave()
	if r.done.Done() || ev.Gen() != gen {
		rk.ops.sweep() // forget r; run any operation of the rank that was signalled meanwhile
	}
	return r.done.Done()
}

// PersistentOpRequest returns an inactive persistent request of c's rank that runs op at each Start (a persistent
// collective); while a run is active the rank's completion calls move it on.
func (c *Comm) PersistentOpRequest(op PersistentOp) *Request {
	r := c.w.NewPersistentRequest(op)
	r.s.owner = c.r
	return r
}
