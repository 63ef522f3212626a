package nbc

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"weak"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// An op is one rank's instance of a nonblocking or persistent collective: a schedule, the machine that runs it,
// and the transport that carries its steps out over the rank's requests (transport.go).
//
// Who runs it. Whoever calls run advances the machine as far as it can without blocking; runs are serialised (a
// run that finds another in progress marks it dirty, and that one goes round once more), so the owner's Test or
// Wait and a worker of the node's pool may meet on an op safely. Three things call run:
//
//   - the starting call (the I-call, or Start): the first round is posted before it returns;
//   - the completion calls of the op's rank (Progress, through the request; they run all the rank's ops);
//   - kick, which the op's hook calls when one of its child requests completes (on the completing goroutine: a
//     sender, the network's progress loop, a driving rank), and shared-memory protocols call when they change
//     something the op waits for. If a completion call of the rank is under way, kick signals it (ranks.SignalOp)
//     and it runs the op; otherwise kick hands the op to the node's worker pool, so that it moves on while its
//     rank computes and calls nothing (a worker then does the rank's share of a shared-memory collective);
//   - runInline, which the op's inline hook calls when one of its tiny phases completes (tiny.go: tinySub): the
//     member whose arrival completed the phase runs the op at once, on its own goroutine, as a worker would. A
//     node-aware op's leader is then on its way over the network before it runs again: between node processes whose
//     ranks share a processor, the leader ran its next round (the send to the other leaders) only after its member
//     had returned, waited and yielded to it. A tiny phase's request completes only inside a tiny call's arrival or
//     run (a rank's starting call, or an op's run), where the completing goroutine holds no lock that a run takes;
//     a child request of the network may complete under the device's, so its hook only kicks.
//
// The run that sees the machine finish completes the request (ranks.CompleteOp).
type op struct {
	m  Machine
	tr transport

	state  atomic.Int32 // opIdle, opRunning, opDirty
	queued atomic.Bool  // handed to the pool and not yet run
	done   atomic.Bool  // the machine has finished; err is set
	spun   atomic.Int32 // waiters spinning on the op (Spin): its kicks are theirs, not the rank's or the pool's
	err    error

	hook    *queues.Waker  // armed on child requests: runs kick
	inline  *queues.Waker  // armed on a tiny phase's request: runs the op on the completing goroutine (runInline)
	exec    ranks.Executor // the node's worker pool, or nil
	task    func()         // o.work, made once: handing the op to the pool allocates nothing
	first   func()         // o.startWork, made once: a start handed to the pool (launch) allocates nothing
	req     *ranks.Request // the request the op completes through
	watch   []*watchlist   // the shared-memory wait lists the op is on
	offList bool           // a waiter spins on the op, which is off the lists in watch (leaveLists); held ops only
	c       *ranks.Comm
	onStart []func() // a persistent op's shared-memory schedules move to their slots' next use at each Start
	finish  func()   // runs once the machine has finished, before the request completes (unpacking Views)
	onNode  bool     // every message of the op stays on this node (ranks.OpOnNode)
	small   bool     // a call of at most soonBytes: its start resumes the network after a grace (started)
	release []func() // what Release lets go of
	lend    bool     // a one-off op: its schedules' scratch buffers go back to the pools when it finishes (scratch.go)
	byRound bool     // a tiny call's late arrival (tiny.go): the use's last member completes the request, not the op

	// reuse (cache.go)
	key    *collectives.Call // the call the op was built for, kept for reuse; nil if it is not kept
	weak   bool              // kept weakly (a large call): its requests are its own (cache.go)
	algo   string
	shm    *shmb   // a shared-memory schedule's builder, which reuse moves to another slot
	phases []phase // a node-aware op's phases, in the order they took their ids and slots
	chain  bool    // it runs again as a chain of its tiny phases' arrivals (hier.go: chainable)
	// holdsNode: a node-aware Ibarrier's leader op, whose node's members wait for its release (hiergate.go)
	holdsNode bool
}

// phase is one phase of a node-aware op (hier.go): a schedule on a sub-communicator, with its shared-memory
// builder if it runs in shared memory, or its tiny call if it is one.
type phase struct {
	c    *ranks.Comm
	s    *Schedule
	shm  *shmb
	tiny *tinySub // a tiny phase (tiny.go), which reuse moves to another slot
	gate bool     // a node phase on the node's barrier count (hiergate.go), which takes no id or slot
}

const (
	opIdle int32 = iota
	opRunning
	opDirty // running, and something happened since it started: go round again
)

func newOp(c *ranks.Comm) *op {
	o := &op{exec: c.World().Executor(), c: c}
	// The hook stays on its child requests' completions after they fire, and a finished request lives on in its
	// rank's block of requests: through a plain reference, they held the op, and a large op kept for reuse only
	// weakly (cache.go) with it the caller's buffers, for as long as the block lived.
	w := weak.Make(o)
	o.hook = queues.NewHook(func() {
		if o := w.Value(); o != nil {
			o.kick()
		}
	})
	o.inline = queues.NewHook(func() {
		if o := w.Value(); o != nil {
			o.runInline()
		}
	})
	o.task = o.work
	o.first = o.startWork
	return o
}

// setReq makes r the op's request.
func (o *op) setReq(r *ranks.Request) {
	if o.onNode {
		ranks.OpOnNode(r)
	}
	o.req = r
}

// messagesOnNode reports whether every message step of the op, its phases' included, goes to or comes from a
// rank of this node.
func (o *op) messagesOnNode() bool {
	if !stepsOnNode(o.c, o.m.s) {
		return false
	}
	for _, p := range o.phases {
		if !stepsOnNode(p.c, p.s) {
			return false
		}
	}
	return true
}

func stepsOnNode(c *ranks.Comm, s *Schedule) bool {
	for i := range s.Steps {
		switch st := &s.Steps[i]; st.Kind {
		case StepSend, StepRecv, StepSendObj, StepRecvObj, StepSendMem, StepRecvMem:
			if !c.PeerOnNode(st.Peer) {
				return false
			}
		}
	}
	return true
}

// kick says that something the op waits for may have happened. It must not block. It may come late: a child
// request's completion runs the hook after setting its flag, so a run may have seen the child done, finished the
// op, and a new call reused it (cache.go, Start) before the hook runs. So kick reads only what no run writes (c,
// exec, task) and atomics; at worst a late kick costs the op a look.
func (o *op) kick() {
	if o.done.Load() || o.spun.Load() != 0 || ranks.SignalOp(o.c) {
		return
	}
	if o.exec != nil && o.queued.CompareAndSwap(false, true) {
		o.exec.Submit(o.task)
	}
}

// work is the pool's task. Meanwhile the rank's completion calls park rather than spin (ranks.EnterWorker).
func (o *op) work() {
	o.queued.Store(false)
	ranks.EnterWorker(o.c)
	defer ranks.LeaveWorker(o.c)
	o.runAside("on a worker")
}

// launch posts the op's first round, as a starting call does (the I-call, Start), then resumes the network
// (started): on the caller's goroutine, or, where the job favours overlap (ranks.World.Overlap, GOMPJ_OVERLAP) and
// the op crosses node processes and is not small, on the node's worker pool, the starting call returning at once.
// held says whether the caller holds the op (a reused op's rerun) or not (a fresh or persistent one).
//
// Why: posting the first round over TCP is a system call that does the receiving end's work too on a host's
// loopback, and that wakes the peer's progress loop, which the kernel may place on the starting rank's core and
// run first. A start took 15-18 us at the median and 60-130 us at the 90th percentile, time that no computation
// overlaps; handed over, it takes 1-3 us. The rank's completion calls still run the op, so a wait that comes
// before the worker posts the round itself (the worker then finds nothing to do).
//
// The network is resumed here, by the starting call, not by the worker once it has posted: the loop is then up
// for the peer's first messages while the rank computes. Resumed by the worker, a start followed at once by its
// wait took far less (1 MiB Iallreduce over TCP between two node processes bound to a core each: 197 against
// 298 us), since the rank was waiting by then and the loop stood down at once, but the background run was
// slower and idle computation hid 79-86 % of it instead of 95 % (4 alternated runs each). Overlap mode is for
// programs that compute between start and wait.
func (o *op) launch(held bool) {
	w := o.c.World()
	switch {
	case o.exec == nil || o.small || o.onNode || !w.Overlap() || w.Device() == nil:
		if held {
			o.held()
		} else {
			o.run()
		}
	default:
		if held {
			o.state.Store(opIdle)
		}
		if h := asideHook.Load(); h != nil {
			(*h)()
		}
		if o.queued.CompareAndSwap(false, true) {
			o.exec.Submit(o.first)
		} // else a kick's task is queued already, and runs the op
	}
	o.started()
}

// asideHook, set only by tests, is called by every start that launch hands to the pool.
var asideHook atomic.Pointer[func()]

// startWork is the pool's task for a start handed over (launch). Unlike work, it leaves the rank's completion calls
// to wait as they would: parked until the worker was through (ranks.EnterWorker), a wait that came at once lost a
// wake-up. Between two node processes bound to a core each, idle computation hid 94 / 94 / 89 % of a 1 MiB
// Iallreduce / Ialltoall / Ibcast with the parking and 95 / 96 / 91 % without; pure and busy times level within
// their noise (4 alternated runs).
func (o *op) startWork() {
	o.queued.Store(false)
	o.runAside("on a worker")
}

// runInline is the inline hook's run (see op), on the goroutine of another rank or of a worker.
func (o *op) runInline() {
	if !o.done.Load() {
		o.runAside("on another rank's goroutine")
	}
}

// runAside runs the op somewhere other than its own rank's calls: on a worker, where a panic in a step (a user's op
// function that panics, say) would end the whole node process, or on another rank's goroutine (runInline), where it
// would fail that rank. It ends the op instead, with an error that carries the panic and says where it ran. (On its
// rank's goroutine, in the calls that start, test and wait, a panic fails the rank, as it does in the blocking
// collective.)
func (o *op) runAside(where string) {
	defer func() {
		if p := recover(); p != nil && !o.done.Load() {
			o.end(fmt.Errorf("%w: a step of a nonblocking collective panicked %s (a user op's function, or a bug): "+
				"%v\n%s", ranks.ErrInternal, where, p, debug.Stack()))
			o.state.Store(opIdle) // the panicking run held the op
		}
	}()
	o.run()
}

// run advances the op as far as it can; concurrent runs are serialised (see op).
func (o *op) run() {
	for {
		switch s := o.state.Load(); s {
		case opIdle:
			if o.state.CompareAndSwap(opIdle, opRunning) {
				goto owner
			}
		case opRunning:
			if o.state.CompareAndSwap(opRunning, opDirty) {
				return
			}
		default:
			return
		}
	}
owner:
	o.held()
}

// held runs the op while the caller holds it (opRunning), then lets it go.
func (o *op) held() {
	for {
		o.step()
		if o.state.CompareAndSwap(opRunning, opIdle) {
			return
		}
		o.state.Store(opRunning) // it was dirty: look again
	}
}

func (o *op) step() {
	if o.done.Load() {
		return
	}
	if done, err := o.m.Progress(&o.tr); done {
		o.end(err)
	}
}

// end completes the op whose machine has finished (or failed) with err; the caller holds the op.
func (o *op) end(err error) {
	if ow, ok := err.(*OwedError); ok { // a sub-operation's comes up as it is (Machine.Progress)
		err = collectives.Broken(o.c, ow.Err) // peers wait on steps this rank will never run
	} else if err != nil && o.holdsNode {
		err = collectives.Broken(o.c, err) // its node's members wait for a release that will never come
	}
	o.err = err
	o.unwatch()
	o.forget()
	if o.finish != nil {
		o.finish()
	}
	if o.lend {
		if err == nil {
			o.giveBack()
		}
		o.drop()
	}
	o.done.Store(true)
	if !o.byRound || err != nil {
		ranks.CompleteOp(o.req, err)
	}
}

// drop lets go of what a finished one-off op ran with: its schedule, which holds the caller's buffers, its child
// requests and phases (the children let go of their own buffers when the transport collects them: ranks, finish).
// The op lives on behind its request, and the request in its rank's block of requests (ranks.opChunk) until the
// block's last is handed out and dropped: holding on, a one-off op kept a program's buffers alive until 8 more
// nonblocking collectives started on the rank, if ever. Nothing reads these once the op is done (every look at the
// machine checks done first), and a one-off op never runs again.
func (o *op) drop() {
	o.m = Machine{}
	o.tr.reqs = nil
	o.phases = nil
	o.shm = nil
	o.watch = nil
	o.finish = nil
}

// forget drops the references between a finished op and the ops around it on its shared-memory slots: its
// schedules' operation of their slot's previous use (shmb.prev, which acquire helps along), and the slot's note of
// this op as its latest (member.last, from which the slot's next use takes its prev). Each op held its
// predecessor, which held its own, so an op not kept for reuse (cache.go) kept every op before it alive: repeated
// Iallreduce calls of 128 KiB on 4 ranks grew the live heap by about 15 KB a call, without bound, and made every
// collection longer. (Releasing prev when acquire is through would not do: the readers of a rooted operation never
// acquire.) And a slot, shared by the communicator's members and dropped only when the communicator is freed, kept
// the op and through it its communicator: the node communicator of a node-aware op is freed only once its parent
// is garbage, which the parent could never become.
func (o *op) forget() {
	if b := o.shm; b != nil {
		b.prev = nil
		b.me.last.CompareAndSwap(o, nil)
	}
	for _, p := range o.phases {
		if p.shm != nil {
			p.shm.prev = nil
			p.shm.me.last.CompareAndSwap(o, nil)
		}
	}
}

// giveBack returns the scratch buffers of the op's schedule and phases to the pools (scratch.go).
func (o *op) giveBack() {
	o.m.s.giveBack()
	for _, p := range o.phases {
		p.s.giveBack()
	}
}

// Spin implements ranks.Spinner: the owner's Wait on an op that is its rank's only active one, in one node, runs it
// itself and spins on the condition it waits for (the peers' publications or finishes, a child request's flag),
// as a blocking collective spins on its peers' slots: a peer that moves the condition reaches the spinner through
// the cache line it writes, with no kick, signal or worker in between. While it spins, the op's kicks are dropped
// (kick sees spun): the spinner sees for itself whatever they would tell. On its way out it runs the op once more,
// after the kicks go to the rank or the pool again, so that none dropped is lost.
func (o *op) Spin(p *queues.Policy, stop ranks.SpinStop) bool {
	o.spun.Add(1)
	if o.ready() {
		o.run()
	}
	if !o.done.Load() {
		// It spins: off its lists, so that the peers that move what it waits for have nobody to kick (a lock and a
		// look at this op's lines each, on their way). Most often the waiter is early, and this costs it nothing
		// that the others wait for.
		if o.state.CompareAndSwap(opIdle, opRunning) {
			o.leaveLists()
			o.letGo()
		}
		for !o.over() && p.SpinFor(func() bool { return o.ready() || stop.Stopped() }) && !stop.Stopped() {
			o.run()
		}
		for !o.done.Load() { // back on the lists, before kicks go to the rank or the pool again
			if o.state.CompareAndSwap(opIdle, opRunning) {
				o.rejoin()
				o.letGo()
				break
			}
			runtime.Gosched() // a run is under way (a worker's), which never blocks
		}
	}
	o.spun.Add(-1)
	if !o.done.Load() {
		o.run()
	}
	return o.over()
}

// over reports whether the op's request is done: its machine has finished, and for an op whose request its tiny
// use completes (byRound: tiny.go), that has happened too.
func (o *op) over() bool {
	return o.done.Load() && (!o.byRound || ranks.CompletionOf(o.req).Done())
}

// letGo lets go of the op after a look that did not run it; if a run was asked for meanwhile (dirty), it runs.
func (o *op) letGo() {
	if !o.state.CompareAndSwap(opRunning, opIdle) {
		o.state.Store(opRunning)
		o.held()
	}
}

// ready reports whether a run would move the op on: it has finished, or what it waits for has happened, or a run
// under way (a worker's) must be waited for. It holds the op while it looks, as a run does: the schedule's state
// is the runs' alone, and a finished op may be reused by a new call meanwhile (another goroutine of the rank:
// cache.go).
func (o *op) ready() bool {
	if !o.state.CompareAndSwap(opIdle, opRunning) {
		return false // a run is under way: it goes round again if need be
	}
	if o.done.Load() {
		o.idle()
		return o.over() // a byRound op waits for its use, which a run would not move on
	}
	if o.tr.ready(&o.m) {
		o.idle()
		return true
	}
	return !o.idle()
}

// idle lets the op go after a look (ready) that did not run it, and reports whether nothing came meanwhile: if a
// run was asked for (dirty) it must still happen, and the op stays held by nobody, for the caller to run.
func (o *op) idle() bool {
	if o.state.CompareAndSwap(opRunning, opIdle) {
		return true
	}
	o.state.Store(opIdle)
	return false
}

// soonBytes is the size of the largest call (its send and receive buffers together) whose start resumes the network
// only after a grace (started). The trade: a rank that computes after starting such a call has its progress in the
// background up to the grace (200 us) later; one that waits at once, as most do, saves a wake-up of the loop that
// cost more than the call. Larger calls, whose transfers are worth overlapping from their start, resume it at once.
const soonBytes = 4 << 10

// started follows the starting call's first run: an op still under way over the network needs the device's
// progress loop running while its rank goes on computing (ranks.World.ResumeNetwork). A small one (soonBytes) has
// it a grace later (ResumeNetworkSoon), for its rank most often waits for it at once and drives the device itself;
// resumed at once, the loop cost such an op more than the op itself over shared memory between node processes
// (see ResumeNetworkSoon). Larger ones resume it at once, so that their transfers overlap a computation from its
// start. An op whose messages all stay on this node (a node-aware op's member that does not lead its node) leaves
// the loop alone: the network has nothing of its to move.
func (o *op) started() {
	switch w := o.c.World(); {
	case o.done.Load() || o.onNode || w.Device() == nil:
		// nothing for the network to do: every message of the op stays on this node
	case o.small:
		w.ResumeNetworkSoon()
	default:
		w.ResumeNetwork()
	}
}

// Progress implements ranks.Operation: the rank's completion calls run the op. It never reports the op finished:
// the run that finishes it completes its request itself (step), which the caller then sees. (Reading the outcome
// here, outside the run, would race with a reuse of the finished op for a new call: cache.go.)
func (o *op) Progress() (bool, error) {
	o.run()
	return false, nil
}

// Blocker implements ranks.Operation. The op's request belongs to a rank (Comm.OpRequest), whose completion calls
// park on the request itself and on the rank's event, which kick signals: there is nothing else to park on.
func (o *op) Blocker() *queues.Completion { return nil }

// Start implements ranks.PersistentOp: one run of a persistent collective. Its schedule, buffers, child requests
// and slots were made by its Init call; a run allocates nothing.
func (o *op) Start() error {
	if err := o.c.Check(); err != nil {
		return err
	}
	gen := ranks.EnterOps(o.c) // as a starting call (api.go)
	defer ranks.LeaveOps(o.c, gen)
	for _, f := range o.onStart {
		f()
	}
	o.m.Reset()
	o.err = nil
	o.done.Store(false)
	o.launch(false)
	return nil
}

// Release implements ranks.Releaser: the persistent request was freed (after its last run).
func (o *op) Release() {
	for _, f := range o.release {
		f()
	}
	o.release = nil
}
