package ranks

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gompj/gompj/queues"
)

// The completion calls. Each one inspects requests only through poll and blocker, and hands a done request's
// outcome over only through report: those three are the one place that knows what a request is made of (a flag,
// or an operation to progress), so that operation requests can gain hooks and worker-driven progress there alone.

// poll reports whether r is done, advancing it first if it is an operation.
func (r *request) poll() bool {
	if r.kind == kindOp {
		return r.pollOp()
	}
	if g, at := r.gateOf(); g != nil {
		return r.pollGate(g, at)
	}
	return r.done.Done()
}

// blocker returns the completion a waiter parks on while r is not done, or nil when r can only be polled (an
// operation waiting on nothing in particular). An operation of a rank (OpRequest) completes its request itself,
// and signals its rank's event whenever it can move on (ops.go): its waiter parks on both.
func (r *request) blocker() *queues.Completion {
	if r.kind == kindOp && !r.done.Done() && r.owner == nil {
		return r.ext.op.Blocker()
	}
	if g, at := r.gateOf(); g != nil {
		r.watchGate(g, at) // nobody completes the flag: the gate signals the rank's event
	}
	return &r.done
}

// collRun reports whether r is a small collective's run of its communicator (CollRequest): its state is reported
// with one CAS and taken again by the communicator's next run (collReqs).
func (r *request) collRun() bool { return r.kind == kindColl && r.ext == nil && r.owner != nil }

// report hands the outcome of a done request to the calling completion call and makes the request inactive. The
// transition is a CAS, so that when several goroutines complete one request exactly one of them gets its outcome
// (and decodes its object): the others see it inactive (ok false).
func (h *Request) report() (st Status, ok bool, err error) {
	r := h.s
	if r.collRun() {
		// A small collective's run (CollRequest), which has nothing to finish: one CAS reports it and moves its state
		// on to its next generation, active, for its communicator's next run to take once nothing looks at it
		// (collReqs.takeRun). The error is this call's to read until it leaves (see spare).
		if !r.life.CompareAndSwap(lifeOf(h.gen, lifeActive), lifeOf(nextGen(h.gen), lifeActive)) {
			return Status{}, false, nil
		}
		return Status{}, true, r.err // nothing was received: no status (see waitColl)
	}
	if !h.cas(lifeActive, lifeBusy) {
		return Status{}, false, nil
	}
	reuse := r.reusable() // before finish, which lets go of an object receive's target
	r.finish()
	st, err = r.status(), r.err
	h.set(lifeInactive)
	if reuse {
		h.reuse()
	}
	return st, true, err
}

// pollFor polls the network device once (pollNet) if any of reqs is active and may complete through it: the test
// calls' share of MPI's progress rule.
func pollFor(reqs ...*Request) {
	for _, h := range reqs {
		// The life word first: a state that went on to another run is another run's (see enter).
		if h != nil && h.is(lifeActive) && h.s.remote && !h.s.done.Done() {
			h.s.w.pollNet()
			return
		}
	}
}

// pollNet makes what progress the network device can without blocking, once. A loop of Test (or Iprobe) is how an
// MPI program looks for a message while it computes; without this, what such a rank waits for from another node
// moved only when the device's own goroutine woke for it: 170-190 us per message in a 0-byte ping-pong of Irecv
// and Test between two node processes (shared memory or TCP), against 0.55 us with Recv. It drives the device as
// a waiting rank does, Enter, Poll, Leave(false): the device's goroutine stands down meanwhile and looks again
// within device.StandDownFor once no rank drives, as after a wait that ended. Polling without Enter left that
// goroutine up and woken by every arrival, to find the message taken: 42 us per message over TCP.
func (w *World) pollNet() {
	if w.net != nil {
		w.net.Enter()
		w.net.Poll()
		w.net.Leave(false)
	}
}

// missed is what a test call that found nothing done does on its way out: every testYield-th such call of the
// rank yields the processor (runtime.Gosched). A loop of test calls never blocks, and the work it waits for may be
// another goroutine's to do: a worker of the node's pool running a nonblocking collective's next round, the
// device's progress goroutine. With as many ranks testing as the node process has processors, those goroutines
// ran only when sysmon preempted a rank, every 10 ms or more: an Iallreduce of 8 bytes among 4 ranks in 2 node
// processes, completed by a loop of Test, took 29-44 ms per call, against 36-170 us with Wait.
func (rk *Rank) missed() {
	if rk != nil && rk.misses.Add(1)%testYield == 0 {
		runtime.Gosched()
	}
}

// testYield: see missed. Yielding costs a few hundred nanoseconds when nothing else is runnable; every 8th miss
// keeps that a small share of a loop of tests.
const testYield = 8

// errStopped is what awaitAny returns when its stop channel closes.
var errStopped = errors.New("stopped")

// await blocks until h's run is done (or stop closes: errStopped). Its caller has found h active, in a completion
// call counted on h's rank (enter) or on a persistent request (WaitMem), so h's state cannot go on to another run
// meanwhile.
func (h *Request) await(stop <-chan struct{}) error {
	r := h.s
	w := r.w
	if g, _ := r.gateOf(); g == nil && r.kind != kindOp && stop == nil && w.orphans.n.Load() == 0 &&
		(r.owner == nil || r.owner.ops.n.Load() == 0) {
		// (A barrier's run, GateRequest, whose flag only its completion calls set, parks in awaitAny.)
		if !r.done.WaitHelp(w.waitPolicy(r.remote), w.abortCh, r.owner.helper(r.remote)) {
			return w.abortError()
		}
		return nil
	}
	if r.kind == kindOp && stop == nil && r.spinLone() {
		return nil
	}
	one := [1]*Request{h}
	_, err := awaitAny(one[:], stop)
	return err
}

// awaitAny blocks until one active request of reqs is done and returns its index, or -1 when none is active (nil
// and inactive requests are skipped). It fails with ErrRequest on a freed request, with the abort error when the
// job aborts, and with errStopped when stop closes.
func awaitAny(reqs []*Request, stop <-chan struct{}) (int, error) {
	var small [8]*queues.Completion
	cs := small[:]
	if len(reqs) > len(small) {
		cs = make([]*queues.Completion, len(reqs))
	}
	cs = cs[:len(reqs)]
	// The rank's event: whenever one of its operations can move on, the loop runs them all (ops.go). Until this
	// call leaves, signallers count on it to; it looks once more on its way out if one came after its last sweep.
	var rk *Rank
	for _, h := range reqs {
		if h != nil && h.s.owner != nil {
			rk = h.s.owner
			break
		}
	}
	var ev *queues.Event
	var gen uint64
	if rk != nil {
		ev = &rk.ops.ev
		ev.Enter()
		defer func() {
			ev.Leave()
			if ev.Gen() != gen {
				rk.ops.sweep()
			}
			if rk.ops.n.Load() > 0 {
				rk.w.ResumeNetwork() // the rank goes back to computing: its operations still need the network
			}
		}()
	}
	fired := 0
	for {
		var w *World
		polling, remote, swept := false, false, false
		if ev != nil {
			gen = ev.Gen()
		}
		for i, h := range reqs {
			cs[i] = nil
			if h == nil {
				continue
			}
			if ok, err := h.pending(); !ok {
				if err != nil {
					return -1, err
				}
				continue
			}
			r := h.s
			w = r.w
			if !swept {
				r.sweep()
				swept = true
			}
			if r.poll() {
				return i, nil
			}
			if cs[i] = r.blocker(); cs[i] == nil {
				polling = true
			}
			remote = remote || r.remote
		}
		if w == nil {
			return -1, nil
		}
		if w.orphans.n.Load() != 0 {
			// Orphaned operations progress only inside completion calls: poll rather than park while there are any.
			polling = true
		}
		if w.aborted.Load() {
			return -1, w.abortError()
		}
		select {
		case <-stop:
			return -1, errStopped
		default:
		}
		if polling {
			runtime.Gosched() // an operation with nothing to park on: poll everything again
			continue
		}
		if queues.WaitAnyEvent(cs, ev, gen, w.waitPolicyOf(rk, remote), w.abortCh, stop) == queues.EventFired {
			// Then look again; but a rank's own sweep can signal its event (an operation's step notifies a slot's
			// wait list, which kicks the rank's other operations there), and then the event has fired again by the
			// time it looks: the loop would never yield, and the other ranks of a node process with fewer
			// processors than ranks, which those operations wait for, ran only once the scheduler preempted it, 10
			// to 20 ms later (6 ranks on 2 node processes of 1 processor each, 4 node-aware calls of 808 bytes
			// outstanding on a ring of 2 slots: 37-52 ms a round, against 54-62 us on 16 slots). So every few
			// fired looks it yields.
			if fired++; fired%firedYield == 0 {
				runtime.Gosched()
			}
		}
	}
}

// firedYield: see awaitAny. A wait yields once every firedYield times its rank's event wakes it.
const firedYield = 4

// WaitContext is Wait that gives up when ctx ends, returning ctx.Err(). The request is then still active and valid:
// wait for it again, test it or cancel it.
func (r *Request) WaitContext(ctx context.Context) (Status, error) {
	if r == nil {
		return Status{}, errNilRequest()
	}
	defer leave(r.enter())
	if ok, err := r.pending(); !ok {
		return Status{}, err
	}
	if err := r.await(ctx.Done()); err != nil {
		if err == errStopped {
			return Status{}, ctx.Err()
		}
		return Status{}, err
	}
	return r.reportOnce()
}

// Waitall waits for every active request (nil and inactive ones are skipped) and returns the first error, if any.
func Waitall(reqs ...*Request) error {
	var first error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Testall reports whether every active request (nil and inactive ones are skipped) has completed. Only then are
// they reported complete, all at once (and made inactive); otherwise none is. The error is the first of theirs.
func Testall(reqs ...*Request) (bool, error) {
	in := enterAll(reqs)
	defer in.leave()
	if err := freedIn(reqs); err != nil {
		return false, err
	}
	pollFor(reqs...)
	var w *World
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if ok, err := r.pending(); !ok {
			if err != nil {
				return false, err
			}
			continue
		}
		if w == nil {
			w = r.s.w
			r.s.sweep()
		}
		if !r.s.poll() {
			if w.aborted.Load() {
				return false, w.abortError()
			}
			r.s.owner.missed()
			return false, nil
		}
	}
	var first error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, ok, err := r.report(); ok && err != nil && first == nil {
			first = err
		}
	}
	return true, first
}

// Waitany waits until one of the active requests completes and returns its index and status. Nil and inactive
// requests are skipped; with none active it returns index -1 (MPI_UNDEFINED) at once.
func Waitany(reqs ...*Request) (int, Status, error) {
	in := enterAll(reqs)
	defer in.leave()
	if err := freedIn(reqs); err != nil {
		return -1, Status{}, err
	}
	for {
		i, err := awaitAny(reqs, nil)
		if err != nil || i < 0 {
			return -1, Status{}, err
		}
		if st, ok, err := reqs[i].report(); ok {
			return i, st, err
		}
		// Another goroutine reported it first: it is inactive now, look again.
	}
}

// Waitsome waits until at least one active request has completed, then reports every one that has: their indices
// and statuses, in index order. With no active request it returns nil at once. A failed request's error is
// returned (the first one, naming its index) beside the indices and statuses of all.
func Waitsome(reqs ...*Request) ([]int, []Status, error) {
	in := enterAll(reqs)
	defer in.leave()
	if err := freedIn(reqs); err != nil {
		return nil, nil, err
	}
	for {
		i, err := awaitAny(reqs, nil)
		if err != nil || i < 0 {
			return nil, nil, err
		}
		if idx, sts, err := reportDone(reqs); len(idx) > 0 || err != nil {
			return idx, sts, err
		}
	}
}

// Testsome reports every active request that has completed, as Waitsome does, without blocking: an empty (non-nil)
// list when some are active but none is done, nil when none is active.
func Testsome(reqs ...*Request) ([]int, []Status, error) {
	in := enterAll(reqs)
	defer in.leave()
	if err := freedIn(reqs); err != nil {
		return nil, nil, err
	}
	pollFor(reqs...)
	active := false
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if ok, err := r.pending(); err != nil {
			return nil, nil, err
		} else if ok {
			active = true
			r.s.sweep()
			break
		}
	}
	if !active {
		return nil, nil, nil
	}
	idx, sts, err := reportDone(reqs)
	if len(idx) == 0 && err == nil {
		var rk *Rank
		for _, r := range reqs {
			if r != nil && r.s.w.aborted.Load() {
				return nil, nil, r.s.w.abortError()
			}
			if r != nil && rk == nil {
				rk = r.s.owner
			}
		}
		rk.missed()
		return []int{}, []Status{}, nil
	}
	return idx, sts, err
}

// freedIn returns ErrRequest, naming its index, for the first freed request of reqs. The completion calls on lists
// check this before anything else: they used to meet a freed request only on their way through the list, so that
// whether one was an error depended on timing (Waitany and Testany returned a request before it that happened to
// be done, Testall returned false at the first one not done).
func freedIn(reqs []*Request) error {
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.pending(); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}

// reportDone reports every active request of reqs that is done.
func reportDone(reqs []*Request) ([]int, []Status, error) {
	var idx []int
	var sts []Status
	var first error
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if ok, err := r.pending(); !ok {
			if err != nil && first == nil {
				first = fmt.Errorf("request %d: %w", i, err)
			}
			continue
		}
		if !r.s.poll() {
			continue
		}
		if st, ok, err := r.report(); ok {
			idx, sts = append(idx, i), append(sts, st)
			if err != nil && first == nil {
				first = fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	return idx, sts, first
}

// Testany reports whether one of the active requests has completed, without blocking: its index and status, and
// true. With no active request (nil and inactive ones are skipped) it returns -1 and true; with none done, -1 and
// false.
func Testany(reqs ...*Request) (int, Status, bool, error) {
	in := enterAll(reqs)
	defer in.leave()
	if err := freedIn(reqs); err != nil {
		return -1, Status{}, false, err
	}
	pollFor(reqs...)
	var w *World
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if ok, err := r.pending(); !ok {
			if err != nil {
				return -1, Status{}, false, err
			}
			continue
		}
		if w == nil {
			w = r.s.w
			r.s.sweep()
		}
		if !r.s.poll() {
			continue
		}
		if st, ok, err := r.report(); ok {
			return i, st, true, err
		}
	}
	if w != nil && w.aborted.Load() {
		return -1, Status{}, false, w.abortError()
	}
	for _, r := range reqs {
		if r != nil && r.is(lifeActive) {
			r.s.owner.missed()
			return -1, Status{}, false, nil
		}
	}
	return -1, Status{}, true, nil // none active (any that were have been reported by other goroutines)
}

// orphans are operation requests freed while active: nobody will wait for them, but their operation must still
// run to its end (the other ranks of a collective depend on it), and only then be released. Until operations
// progress on their own, the completion calls of the node's ranks progress them.
type orphans struct {
	n    atomic.Int32 // len(reqs), read without the lock: the common case is none
	mu   sync.Mutex
	reqs []*request
}

// adopt takes an operation request that was freed while active.
func (w *World) adopt(r *request) {
	w.orphans.mu.Lock()
	w.orphans.reqs = append(w.orphans.reqs, r)
	w.orphans.n.Store(int32(len(w.orphans.reqs)))
	w.orphans.mu.Unlock()
}

// sweepOrphans progresses the orphaned operations, releasing those that are done. One goroutine sweeps at a time;
// the others go on.
func (w *World) sweepOrphans() {
	if w.orphans.n.Load() == 0 || !w.orphans.mu.TryLock() {
		return
	}
	keep := w.orphans.reqs[:0]
	for _, r := range w.orphans.reqs {
		r.pollOp()
		if !r.settle() {
			keep = append(keep, r)
		}
	}
	clear(w.orphans.reqs[len(keep):])
	w.orphans.reqs = keep
	w.orphans.n.Store(int32(len(keep)))
	w.orphans.mu.Unlock()
}
