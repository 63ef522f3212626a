package node

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

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
	start := w.active < w.max
	if start {
		w.active++
	}
	w.mu.Unlock()
	if start {
		if err := w.pool.Submit(w.drainF); err != nil {
			go w.drain()
		}
	}
}

// drain runs queued tasks until there are none.
func (w *workers) drain() {
	for {
		w.mu.Lock()
		if w.head == len(w.queue) || w.closed {
			w.active--
			w.queue, w.head = w.queue[:0], 0
			w.mu.Unlock()
			return
		}
		task := w.queue[w.head]
		w.queue[w.head] = nil
		w.head++
		if w.head > 1024 && w.head*2 > len(w.queue) { // keep the queue's memory bounded by what is pending
			n := copy(w.queue, w.queue[w.head:])
			w.queue, w.head = w.queue[:n], 0
		}
		w.mu.Unlock()
		w.run(task)
	}
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
