package queues

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitParked returns once a waiter has armed c (it is about to park, or parked): from then on only a wake-up can
// end its wait, so the tests below exercise the parked path, not a waiter that finds the flag already set.
func waitParked(t *testing.T, c *Completion) {
	t.Helper()
	start := time.Now()
	for c.state.Load() != stateParked {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the waiter never parked")
		}
		runtime.Gosched()
	}
}

func TestCompletionWakesParkedWaiter(t *testing.T) {
	p := Policy{Spin: 0, Yields: 0} // park at once
	var c Completion
	abort := make(chan struct{})
	done := make(chan bool)
	go func() { done <- c.Wait(&p, abort) }()
	waitParked(t, &c)
	c.Complete()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait reported abort")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("parked waiter was never woken")
	}
}

func TestCompletionAbort(t *testing.T) {
	p := Policy{}
	var c Completion
	abort := make(chan struct{})
	done := make(chan bool)
	go func() { done <- c.Wait(&p, abort) }()
	waitParked(t, &c)
	close(abort)
	if <-done {
		t.Fatal("Wait on a never-completed flag returned true after abort")
	}
}

func TestCompletionManyRacers(t *testing.T) {
	pols := []Policy{{}, {Spin: time.Microsecond, Yields: 2}, {Yields: 1}}
	abort := make(chan struct{})
	for _, p := range pols {
		var wg sync.WaitGroup
		for i := 0; i < 200; i++ {
			var c Completion
			wg.Add(2)
			go func() { defer wg.Done(); c.Complete() }()
			go func() {
				defer wg.Done()
				if !c.Wait(&p, abort) {
					t.Error("lost wake-up")
				}
			}()
		}
		wg.Wait()
	}
}

func TestWaitAny(t *testing.T) {
	p := Policy{}
	cs := []*Completion{new(Completion), nil, new(Completion)}
	abort := make(chan struct{})
	got := make(chan int)
	go func() { got <- WaitAny(cs, &p, abort) }()
	waitParked(t, cs[0]) // armed in order: both are armed once the last one is
	waitParked(t, cs[2])
	cs[2].Complete()
	select {
	case i := <-got:
		if i != 2 {
			t.Fatalf("WaitAny = %d, want 2", i)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a parked WaitAny was never woken")
	}
	// A completion armed by WaitAny must still be waitable on its own afterwards.
	go func() { cs[0].Complete() }()
	if !cs[0].Wait(&p, abort) {
		t.Fatal("Wait after WaitAny failed")
	}
}

// Two goroutines park on the same completions (two Waitany over one set of requests): the second must not
// displace the first, which would then sleep through the completion. Both wake when it fires.
func TestTwoWaitersOneCompletion(t *testing.T) {
	p := Policy{} // park at once
	cs := []*Completion{new(Completion), new(Completion)}
	abort := make(chan struct{})
	got := make(chan int, 2)
	go func() { got <- WaitAny(cs, &p, abort) }()
	waitParked(t, cs[1]) // armed in order: the first waiter is parked on both
	first := cs[1].waker.Load()
	go func() { got <- WaitAny(cs, &p, abort) }()
	waitRearmed(t, cs[1], first) // the second waiter has armed both
	cs[0].Complete()
	for k := 0; k < 2; k++ {
		if i := recvWithin(t, got, "WaitAny"); i != 0 {
			t.Fatalf("WaitAny = %d, want 0", i)
		}
	}
	// A lone Wait beside a WaitAny, both parked: both see the completion; Reset drops the fan.
	var c Completion
	go func() { got <- WaitAny([]*Completion{&c}, &p, abort) }()
	waitParked(t, &c)
	waited := make(chan bool, 1)
	first = c.waker.Load()
	go func() { waited <- c.Wait(&p, abort) }()
	waitRearmed(t, &c, first)
	c.Complete()
	if recvWithin(t, got, "WaitAny") != 0 || !recvWithin(t, waited, "Wait") {
		t.Fatal("a waiter missed the completion")
	}
	c.Reset()
	if c.waker.Load() != nil {
		t.Fatal("Reset kept the fan")
	}
	// A waiter that parks on a completion with a hook armed joins the hook: both run.
	runs := 0
	c.OnComplete(NewHook(func() { runs++ }))
	first = c.waker.Load() // the hook's: the waiter has armed once it changes
	go func() { waited <- c.Wait(&p, abort) }()
	waitRearmed(t, &c, first)
	c.Complete()
	if !recvWithin(t, waited, "Wait") || runs != 1 {
		t.Fatalf("hook ran %d times beside a parked waiter", runs)
	}
}

// waitRearmed returns once another waiter has armed c, whose waker was w. The caller reads w before it starts that
// waiter: read after, it was at times the new waiter's own already, and the wait for a change never ended.
func waitRearmed(t *testing.T, c *Completion, w *Waker) {
	t.Helper()
	start := time.Now()
	for c.waker.Load() == w {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the waiter never armed")
		}
		runtime.Gosched()
	}
}

// recvWithin receives from ch, failing the test if nothing comes within 10 s (a waiter never woken).
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("a %s was never woken", what)
	}
	panic("unreachable")
}

// A hook armed on a completion runs once, on the completing goroutine; arming a done completion reports it and
// runs nothing; Reset disarms.
func TestCompletionHook(t *testing.T) {
	var c Completion
	runs := 0
	h := NewHook(func() { runs++ })
	if !c.OnComplete(h) {
		t.Fatal("OnComplete on a pending completion reported it done")
	}
	c.Complete()
	if runs != 1 {
		t.Fatalf("hook ran %d times, want 1", runs)
	}
	if c.OnComplete(h) {
		t.Fatal("OnComplete on a done completion armed the hook")
	}
	c.Complete()
	if runs != 1 {
		t.Fatalf("a hook armed too late ran (%d)", runs)
	}
	c.Reset()
	c.Complete()
	if runs != 1 {
		t.Fatal("Reset left the hook armed")
	}
}

// Hooks armed while other goroutines complete: every completion that was armed before it completed runs its hook
// exactly once, and the others are reported done by OnComplete.
func TestCompletionHookRace(t *testing.T) {
	const n = 2000
	cs := make([]Completion, n)
	var ran [n]int32
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range cs {
			cs[i].Complete()
		}
	}()
	armed := make([]bool, n)
	for i := range cs {
		i := i
		armed[i] = cs[i].OnComplete(NewHook(func() { mu.Lock(); ran[i]++; mu.Unlock() }))
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := range cs {
		want := int32(0)
		if armed[i] {
			want = 1
		}
		if ran[i] != want {
			t.Fatalf("completion %d: armed %v, hook ran %d times", i, armed[i], ran[i])
		}
	}
}
