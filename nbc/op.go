package nbc

import (
	"sync/atomic"

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
//   - the owner's completion calls (Progress, through the request);
//   - kick, which the op's hook calls when one of its child requests completes (on the completing goroutine: a
//     sender, the network's progress loop, a driving rank), and shared-memory protocols call when they change
//     something the op waits for. kick wakes the owner if it waits, and hands the op to the node's worker pool so
//     that it moves on even while its rank computes and calls nothing.
type op struct {
	m  Machine
	tr transport

	state  atomic.Int32 // opIdle, opRunning, opDirty
	queued atomic.Bool  // handed to the pool and not yet run
	done   atomic.Bool  // the machine has finished; err is set
	err    error

	hook   *queues.Waker     // armed on child requests: runs kick
	signal queues.Completion // completed by kick: what the owner parks on (Blocker)
	exec   ranks.Executor    // the node's worker pool, or nil
	task   func()            // o.work, made once: handing the op to the pool allocates nothing
	finish []func()          // run once the machine has finished (releasing shared-memory registrations)
	req    *ranks.Request    // the request the op completes through
	watch  []*watchlist      // the shared-memory wait lists the op is on
	name   string            // the collective and its algorithm, for errors and tests
	w      *ranks.World
	// onStart moves a persistent op's shared-memory schedules to their slots' next use, at each Start
	onStart []func()
}

const (
	opIdle int32 = iota
	opRunning
	opDirty // running, and something happened since it started: go round again
)

func newOp(w *ranks.World, name string) *op {
	o := &op{exec: w.Executor(), name: name, w: w}
	o.hook = queues.NewHook(o.kick)
	o.task = o.work
	return o
}

// kick says that something the op waits for may have happened. It must not block.
func (o *op) kick() {
	o.signal.Complete()
	if o.exec != nil && !o.done.Load() && o.queued.CompareAndSwap(false, true) {
		o.exec.Submit(o.task)
	}
}

// work is the pool's task.
func (o *op) work() {
	o.queued.Store(false)
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
	done, err := o.m.Progress(&o.tr)
	if !done {
		return
	}
	o.err = err
	for _, f := range o.finish {
		f()
	}
	o.unwatch()
	o.done.Store(true)
	o.signal.Complete()
}

// Progress implements ranks.Operation for the owner's completion calls.
func (o *op) Progress() (bool, error) {
	o.signal.Reset() // only the owner parks on signal; a kick from now on completes it again
	o.run()
	if o.done.Load() {
		return true, o.err
	}
	return false, nil
}

// Blocker implements ranks.Operation: the owner parks on the op's signal, which every kick completes.
func (o *op) Blocker() *queues.Completion { return &o.signal }

// restart readies a finished op to run its schedule again (persistent collectives).
func (o *op) restart() {
	o.m.Reset()
	o.err = nil
	o.done.Store(false)
}
