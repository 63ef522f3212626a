package nbc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// transport carries out a schedule's communication steps for one rank: sends and receives as requests on the
// communicator's collective context, each armed with the op's hook so that its completion kicks the op; waits on
// shared-memory conditions, through the wait list whose notifier kicks the op; sub-operations, run inside the op
// (node-aware algorithms' phases on other communicators).
//
// A persistent op's sends and receives are persistent requests, made once by its Init call (persist) and
// started again at each run, so that a run allocates nothing. A nonblocking op's are made as it posts them.
type transport struct {
	o       *op
	c       *ranks.Comm      // on the collective context
	reqs    []posted         // per step, while posted
	persist []*ranks.Request // per step: a persistent op's requests
}

// posted is a step's request and its flag. The flag is what a spinning waiter looks at (ready), again and again: it
// is found once, at the post, so that the look reads the request's state alone, not its handle, whose line its
// rank goes on writing as it makes its next handles (on another core, for a worker's run).
type posted struct {
	r    *ranks.Request // an object's send or receive, or a persistent op's request
	k    ranks.Child    // else: a send's or receive's (ranks.Child)
	done *queues.Completion
}

// doneAtStart is the flag of a step whose send completed as it was posted (the zero ranks.Child).
var doneAtStart = func() *queues.Completion {
	var c queues.Completion
	c.Complete()
	return &c
}()

func newTransport(o *op, c *ranks.Comm, steps int) transport {
	return transport{o: o, c: c.Coll(), reqs: make([]posted, steps)}
}

// makePersistent makes the persistent requests of s's sends and receives (a persistent op's Init).
func (t *transport) makePersistent(s *Schedule) error {
	t.persist = make([]*ranks.Request, len(s.Steps))
	for i := range s.Steps {
		st := &s.Steps[i]
		var r *ranks.Request
		var err error
		switch st.Kind {
		case StepSend:
			r, err = t.c.SendInit(st.Buf, st.Peer, st.Tag)
		case StepRecv:
			r, err = t.c.RecvInit(st.Buf, st.Peer, st.Tag)
		case StepSendMem:
			r, err = t.c.SendInitMem(st.Mem, st.Peer, st.Tag)
		case StepRecvMem:
			r, err = t.c.RecvInitMem(st.Mem, st.Peer, st.Tag)
		default:
			continue
		}
		if err != nil {
			t.free()
			return err
		}
		t.persist[i] = r
	}
	t.o.release = append(t.o.release, t.free)
	return nil
}

// free frees the persistent requests.
func (t *transport) free() {
	for i, r := range t.persist {
		if r != nil {
			r.Free()
			t.persist[i] = nil
		}
	}
}

// Post implements Transport.
func (t *transport) Post(i int, st *Step) error {
	var r *ranks.Request
	var err error
	switch {
	case t.persist != nil && t.persist[i] != nil:
		r = t.persist[i]
		err = r.Start()
	case st.Kind == StepSend:
		k, err := t.c.SendChild(ranks.BytesMem(st.Buf), st.Peer, st.Tag)
		return t.child(i, k, err)
	case st.Kind == StepRecv:
		k, err := t.c.RecvChild(ranks.BytesMem(st.Buf), st.Peer, st.Tag)
		return t.child(i, k, err)
	case st.Kind == StepSendMem:
		k, err := t.c.SendChild(st.Mem, st.Peer, st.Tag)
		return t.child(i, k, err)
	case st.Kind == StepRecvMem:
		k, err := t.c.RecvChild(st.Mem, st.Peer, st.Tag)
		return t.child(i, k, err)
	case st.Kind == StepSendObj:
		r, err = t.c.Isend(st.Obj, st.Peer, st.Tag)
	case st.Kind == StepRecvObj:
		r, err = t.c.Irecv(st.Obj, st.Peer, st.Tag)
	case st.Kind == StepWait:
		// True already: nothing to be told (Test sees it); else join the list, then Test looks.
		if !st.Cond() && !(st.Soon != nil && st.Soon.SpinFor(st.Cond)) {
			t.o.watchOn(st.List)
		}
		return nil
	case st.Kind == StepSub:
		return st.Sub.Begin()
	default:
		return fmt.Errorf("%w: nbc: cannot post a %v step", ranks.ErrInternal, st.Kind)
	}
	if err != nil {
		return err
	}
	done := ranks.CompletionOf(r)
	t.reqs[i] = posted{r: r, done: done}
	done.OnComplete(t.o.hook) // already done: the machine sees it when it tests
	return nil
}

// child notes step i's send or receive k, just posted (or its error), and arms the op's hook on its flag.
func (t *transport) child(i int, k ranks.Child, err error) error {
	if err != nil {
		return err
	}
	done := k.Flag()
	if done == nil {
		t.reqs[i] = posted{done: doneAtStart}
		return nil
	}
	t.reqs[i] = posted{k: k, done: done}
	done.OnComplete(t.o.hook) // already done: the machine sees it when it tests
	return nil
}

// Test implements Transport.
func (t *transport) Test(i int, st *Step) (bool, error) {
	switch st.Kind {
	case StepWait:
		return st.Cond(), nil
	case StepSub:
		return st.Sub.Poll()
	}
	p := t.reqs[i]
	if !p.done.Done() {
		return false, nil
	}
	t.reqs[i] = posted{}
	if p.r == nil {
		return true, p.k.Collect()
	}
	_, err := p.r.Wait() // done: reports it at once, with its error (an object receive decodes here)
	return true, err
}

// ready reports whether the step m waits for first (Machine.Pending) has completed, or m has a round to start: then
// a run moves it on. It looks as Test does, without collecting anything: a waiter spinning on an op (op.Spin) runs it
// only when it can move.
func (t *transport) ready(m *Machine) bool {
	i, st := m.Pending()
	if st == nil {
		return !m.done
	}
	switch st.Kind {
	case StepWait:
		return st.Cond()
	case StepSub:
		switch s := st.Sub.(type) {
		case *sub:
			return s.tr.ready(&s.m)
		case *tinySub:
			return s.ready()
		case *gateSub:
			return s.ready()
		}
		return true // an unknown kind of sub-operation: let a run poll it
	}
	return t.reqs[i].done.Done()
}

// watchlist is the set of ops waiting on some shared-memory state: whoever changes it calls notify, which kicks
// them all. An op joins the list when it posts a wait on it and leaves when it finishes.
type watchlist struct {
	n   atomic.Int32 // len(ops), read without the lock
	mu  sync.Mutex
	ops []*op
}

func (l *watchlist) add(o *op) {
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.n.Store(int32(len(l.ops)))
	l.mu.Unlock()
}

func (l *watchlist) remove(o *op) {
	l.mu.Lock()
	for i, x := range l.ops {
		if x == o {
			l.ops[i] = l.ops[len(l.ops)-1]
			l.ops[len(l.ops)-1] = nil
			l.ops = l.ops[:len(l.ops)-1]
			break
		}
	}
	l.n.Store(int32(len(l.ops)))
	l.mu.Unlock()
}

// notify kicks every op on the list. It kicks a copy, after the lock: the members of a slot notify and join its
// list all the time, and a kick (which signals a rank or hands the op to the pool) is too long to hold them off for.
// An op that leaves the list meanwhile gets a kick it does not need, which costs it a look.
//
// An empty list is seen without the lock. No kick is lost: an op joins the list (n, sequentially consistent) before
// it tests its condition (Transport.Post, then the machine's Test), and the notifier changes the state before it
// reads n, so either the op's test sees the change or the notifier sees the op.
func (l *watchlist) notify() {
	if l.n.Load() == 0 {
		return
	}
	var buf [32]*op
	l.mu.Lock()
	ops := append(buf[:0], l.ops...)
	l.mu.Unlock()
	for _, o := range ops {
		o.kick()
	}
}

// watchOn puts the op on list (once). An op whose waiter spins on it (offList) only notes the list, and joins it
// when the waiter stops (rejoin).
func (o *op) watchOn(l *watchlist) {
	for _, x := range o.watch {
		if x == l {
			return
		}
	}
	o.watch = append(o.watch, l)
	if !o.offList {
		l.add(o)
	}
}

// unwatch takes the op off every list it is on (its schedule has finished).
func (o *op) unwatch() {
	for i, l := range o.watch {
		if !o.offList {
			l.remove(o)
		}
		o.watch[i] = nil
	}
	o.watch = o.watch[:0]
	o.offList = false
}

// leaveLists takes the op off its lists while a waiter spins on it (op.Spin), keeping them noted: whoever changes
// what the op waits for then finds nobody to kick, and the spinner sees the change for itself. The caller holds
// the op.
func (o *op) leaveLists() {
	if o.offList || o.done.Load() {
		return
	}
	o.offList = true
	for _, l := range o.watch {
		l.remove(o)
	}
}

// rejoin puts the op back on its lists when its spinning waiter leaves (the caller holds the op, and then runs it,
// so that a change made while it was off them is seen: the same order as Transport.Post's, join then test).
func (o *op) rejoin() {
	if !o.offList {
		return
	}
	o.offList = false
	for _, l := range o.watch {
		l.add(o)
	}
}

// sub is a sub-operation: a whole schedule on another communicator, run inside its op (Step.Sub).
type sub struct {
	m  Machine
	tr transport
}

func (s *sub) Begin() error { s.m.Reset(); return nil }

func (s *sub) Poll() (bool, error) { return s.m.Progress(&s.tr) }

// soonSpin bounds a run's spin on a wait step that the other members are about to end (Schedule.WaitSoon): they
// have all arrived and do their shares beside this one, which most often end within a microsecond of each other.
// Waiting as for anything else, the run returned, and the op moved on only once its rank's Wait (or a worker) had
// come back to it: 32 KiB Iallreduce on 2 ranks, 0.3 us from the members' last finish to the op's end, and 0.2 more
// to its Wait's return (timestamps), against under 0.1 for Allreduce's barrier after the same combining; in all
// 1.32-1.40 -> 1.14-1.22x Allreduce's time (one process interleaving the two forms, 3 alternated runs). The spin
// holds the op (a kick meanwhile marks it to go round again) and no lock: runs never take place under one.
const soonSpin = 5 * time.Microsecond

// arriveSpin bounds a run's spin on the others' arrivals (shmb.waitArrived), once this member has arrived: in a loop
// that starts a collective and waits for it, they arrive within a microsecond of each other, and a member that
// waited as for anything else went through its list, the peer's notice and its Wait's look before it could go on
// (32 KiB Iallreduce on 2 ranks, one process interleaving the two forms, 3 alternated runs: 1.23-1.35 -> 1.13-1.25x
// Allreduce). Shorter than soonSpin: the others may be computing still, and a start call that spins keeps its rank
// from its own computation for that long.
const arriveSpin = 2 * time.Microsecond

// finishPolicy and arrivePolicy spin for soonSpin and arriveSpin, without yields: the step then waits on its list as
// any other.
var (
	finishPolicy = queues.Policy{Spin: soonSpin}
	arrivePolicy = queues.Policy{Spin: arriveSpin}
)

// soonMax bounds the work of a call whose run spins on the others' finishes (soonOK): above it a member's share
// takes long enough that the op's machinery around it no longer counts, and a start call that spins holds its rank
// from computing for longer (the overlap of a large call).
const soonMax = 256 << 10

// soonOK reports whether call a on n members is small enough for its runs to spin on the others' finishes: its
// bytes (a vector, or n blocks for the calls that move a block between every pair).
func soonOK(a *collectives.Call, n int) bool {
	w := a.Bytes()
	if a.Coll == "allgather" || a.Coll == "alltoall" {
		w *= n
	}
	return w <= soonMax
}
