package node

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Every task runs, tasks submitted by tasks too, never more than the pool's size at once, and Submit never
// blocks, even when every worker is busy submitting.
func TestWorkersRunEverything(t *testing.T) {
	const size, tasks = 3, 5000
	w, err := newWorkers(size, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	var running, most, done atomic.Int32
	var wg sync.WaitGroup
	wg.Add(tasks)
	var task func(depth int) func()
	task = func(depth int) func() {
		return func() {
			defer wg.Done()
			r := running.Add(1)
			for {
				m := most.Load()
				if r <= m || most.CompareAndSwap(m, r) {
					break
				}
			}
			if depth > 0 {
				w.Submit(task(depth - 1)) // from inside a task: must not wait for a worker
			}
			done.Add(1)
			running.Add(-1)
		}
	}
	for i := 0; i < tasks/5; i++ {
		w.Submit(task(4))
	}
	wg.Wait()
	if done.Load() != tasks {
		t.Fatalf("%d tasks ran, want %d", done.Load(), tasks)
	}
	if m := most.Load(); m > size {
		t.Fatalf("%d tasks ran at once on a pool of %d", m, size)
	}
}

// A task that panics ends the job through abort, and the pool goes on.
func TestWorkersPanic(t *testing.T) {
	got := make(chan error, 1)
	w, err := newWorkers(1, func(err error) { got <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.Submit(func() { panic(errors.New("boom")) })
	if err := <-got; err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("abort cause %v, want the panic", err)
	}
	ran := make(chan struct{})
	w.Submit(func() { close(ran) })
	<-ran
}
