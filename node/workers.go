package node

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/ants/v2"

	"github.com/gompj/gompj/ranks"
)

// workers is the node's worker pool: the background on which nonblocking collectives move on while the ranks
// compute (ranks.Executor). It is built on ants: a bounded set of goroutines (GOMPJ_WORKERS, default GOMAXPROCS),
// reused from task to task, none per operation, none spinning; idle ones expire.
//
// Submit never blocks: a child request's completion hands its collective over from inside whatever completed it (a
// sender, the network's progress loop), which must not wait for a worker, and a worker's own task may hand over
// others. So tasks go through a queue of ours, drained by at most max workers at a time: Submit queues the task
// and starts a drainer only when fewer than max are running; a drainer runs tasks until the queue is empty. The
// count of drainers changes under the queue's lock, so a task is never left queued with no drainer coming.
//
// A device's progress goroutine also runs tasks, between its rounds (device.Helper): the completions it delivers (a
// receive's last byte, a send's) queue the collective's next round, and the goroutine that is already running takes
// it at once, where a drainer had first to be woken and then to find a processor. While a round is under way
// (Round to Help), Submit queues without starting a drainer, and Help, after the round, runs what was queued, up to
// helpMax tasks, and starts a drainer for the rest. A task queued meanwhile by another goroutine (a rank's, a
// worker's) waits for that round too, which is bounded (a device reads a bounded budget per connection and round).
//
// Why: traced over TCP on 2 cores (1 MiB Iallreduce, 2 node processes, idle computation), the round after a receive
// started 24-83 us after it was queued; the woken drainer waited for a core that the two loops and the ranks' timers
// held. With the loop running it but still waking a drainer for nothing, the overlap did not move; without the
// wake-up, it went from a median of 60 % to 80 % (30 alternated runs of `gompj bench iallreduce`).
type workers struct {
	pool   *ants.Pool
	max    int
	abort  func(error) // a task panicked: the job ends with this cause
	mu     sync.Mutex
	queue  []func()
	head   int
	active int // drainers running or about to
	closed bool
	drainF func() // w.drain, made once
	// queued counts the tasks in queue and rounds the devices' rounds under way (Round to Help), as atomics: a
	// device's loop calls Round and Help around every round, and one that finds nothing queued takes no lock. A
	// Submit adds to queued before it reads rounds, and a Help takes from rounds before it reads queued, so either
	// the Submit sees no round and starts a drainer, or the Help sees the task.
	queued atomic.Int64
	rounds atomic.Int32
}

// newWorkers starts a pool of n workers (0: GOMAXPROCS); abort is called if a task panics.
func newWorkers(n int, abort func(error)) (*workers, error) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	// Nonblocking: Submit fails rather than waits when every goroutine is busy. That happens only in the instant a
	// drainer has returned and ants has not yet taken its goroutine back; a goroutine of its own then drains.
	p, err := ants.NewPool(n, ants.WithNonblocking(true))
	if err != nil {
		return nil, fmt.Errorf("gompj: worker pool: %w", err)
	}
	w := &workers{pool: p, max: n, abort: abort}
	w.drainF = w.drain
	return w, nil
}

// Submit implements ranks.Executor.
func (w *workers) Submit(task func()) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return // the job is over: nobody waits for anything any more
	}
	w.queue = append(w.queue, task)
	w.queued.Add(1)
	start := w.rounds.Load() == 0 && w.active < w.max
	if start {
		w.active++
	}
	w.mu.Unlock()
	if start {
		w.startDrainer()
	}
}

func (w *workers) startDrainer() {
	if err := w.pool.Submit(w.drainF); err != nil {
		go w.drain()
	}
}

// drain runs queued tasks until there are none.
func (w *workers) drain() {
	for {
		w.mu.Lock()
		task := w.popLocked()
		if task == nil {
			w.active--
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.run(task)
	}
}

// helpMax bounds the tasks one Help runs, so that a device's progress goroutine goes back to its sockets.
const helpMax = 8

// Round implements device.Helper: a device's progress goroutine starts a round; what is submitted until its Help
// waits for it.
func (w *workers) Round() { w.rounds.Add(1) }

// Help implements device.Helper: after its round (outside its locks), a device's progress goroutine runs queued
// tasks, at most helpMax, and starts a drainer for any left (unless another device's round will see to them). It
// reports whether it ran any.
func (w *workers) Help() bool {
	w.rounds.Add(-1)
	ran := 0
	for ran < helpMax && w.queued.Load() > 0 {
		w.mu.Lock()
		task := w.popLocked()
		w.mu.Unlock()
		if task == nil {
			break
		}
		w.run(task)
		ran++
	}
	if w.queued.Load() > 0 {
		// Tasks are left: more than helpMax, or submitted while the last ones ran (from a task, or by another
		// goroutine). A Submit since the count went down started a drainer unless another round was under way.
		w.mu.Lock()
		start := !w.closed && w.rounds.Load() == 0 && w.head < len(w.queue) && w.active < w.max
		if start {
			w.active++
		}
		w.mu.Unlock()
		if start {
			w.startDrainer()
		}
	}
	return ran > 0
}

// popLocked takes the next task off the queue, or nil when there is none or the pool is closed (mu held).
func (w *workers) popLocked() func() {
	if w.head == len(w.queue) || w.closed {
		w.queue, w.head = w.queue[:0], 0 // closed: what is left is dropped, nobody waits for anything any more
		w.queued.Store(0)
		return nil
	}
	task := w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	w.queued.Add(-1)
	if w.head > 1024 && w.head*2 > len(w.queue) { // keep the queue's memory bounded by what is pending
		n := copy(w.queue, w.queue[w.head:])
		w.queue, w.head = w.queue[:n], 0
	}
	return task
}

func (w *workers) run(task func()) {
	defer func() {
		if p := recover(); p != nil {
			w.abort(fmt.Errorf("gompj: a task of the worker pool (a nonblocking collective's step) panicked: %v\n%s",
				p, debug.Stack()))
		}
	}()
	task()
}

// close stops taking tasks and lets the pool's goroutines go.
func (w *workers) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.pool.Release()
}

// executor returns the node's worker pool for the World, or nil when asynchronous progress is off; the caller
// closes it (a nil *workers closes to nothing).
func executor(cfg Config, abort func(error)) (*workers, ranks.Executor, error) {
	if cfg.NoAsyncProgress {
		return nil, nil, nil
	}
	w, err := newWorkers(cfg.Workers, abort)
	if err != nil {
		return nil, nil, err
	}
	return w, w, nil
}
