package node

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// Devices' progress goroutines (Round, then Help, over and over) and the pool's drainers together run every task
// exactly once, tasks submitted by tasks and from inside rounds too.
func TestWorkersHelp(t *testing.T) {
	const size, helpers, tasks = 2, 3, 6000
	w, err := newWorkers(size, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.Round()
	if w.Help() {
		t.Fatal("Help with nothing queued reports tasks run")
	}
	runs := make([]atomic.Int32, tasks)
	var helped atomic.Int32
	var wg sync.WaitGroup
	wg.Add(tasks)
	var task func(i int) func()
	task = func(i int) func() {
		return func() {
			runs[i].Add(1)
			if i%3 == 0 && i+1 < tasks { // a task submits the next one itself
				w.Submit(task(i + 1))
			}
			wg.Done()
		}
	}
	stop := make(chan struct{})
	var hw sync.WaitGroup
	var next atomic.Int32 // tasks 2, 5, 8, ... are submitted from inside the helpers' rounds
	for range helpers {
		hw.Add(1)
		go func() {
			defer hw.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.Round()
				if i := int(next.Add(1))*3 - 1; i < tasks {
					w.Submit(task(i))
				}
				if w.Help() {
					helped.Add(1)
				} else {
					runtime.Gosched()
				}
			}
		}()
	}
	for i := 0; i < tasks; i += 3 {
		w.Submit(task(i))
	}
	wg.Wait()
	close(stop)
	hw.Wait()
	for i := range runs {
		if n := runs[i].Load(); n != 1 {
			t.Fatalf("task %d ran %d times", i, n)
		}
	}
	if helped.Load() == 0 {
		t.Fatal("the helpers never ran a task")
	}
}

// A task submitted during a round wakes no drainer: the round's Help runs it. Help runs at most helpMax, and starts
// a drainer for the rest.
func TestWorkersRoundDefers(t *testing.T) {
	w, err := newWorkers(1, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	var ran atomic.Int32
	w.Round()
	w.Submit(func() { ran.Add(1) })
	w.mu.Lock()
	active := w.active
	w.mu.Unlock()
	if active != 0 || ran.Load() != 0 {
		t.Fatalf("a task submitted during a round: %d drainers started, %d tasks ran; want none before Help", active, ran.Load())
	}
	if !w.Help() || ran.Load() != 1 {
		t.Fatalf("Help ran %d tasks, want 1", ran.Load())
	}
	done := make(chan struct{})
	w.Round()
	for range helpMax + 3 {
		w.Submit(func() {
			if ran.Add(1) == helpMax+4 {
				close(done)
			}
		})
	}
	if !w.Help() {
		t.Fatal("Help ran nothing")
	}
	if n := ran.Load(); n < helpMax+1 {
		t.Fatalf("Help ran %d tasks, want at least %d", n-1, helpMax)
	}
	select {
	case <-done: // the drainer Help started ran the rest
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d tasks ran: the ones Help left have no drainer", ran.Load()-1, helpMax+3)
	}
}
