package ranks

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gompj/gompj/queues"
)

// countGate is a Gate for tests: a count, and the watches it was asked for, each told on a channel.
type countGate struct {
	n       atomic.Uint64
	mu      sync.Mutex
	waiters []*queues.Waker
	watched chan uint64 // each Watch's target, if not nil
}

func (g *countGate) Reached(at uint64) bool { return g.n.Load() >= at }

func (g *countGate) Watch(at, _ uint64, w *queues.Waker) {
	g.mu.Lock()
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	if g.watched != nil {
		select {
		case g.watched <- at:
		default:
		}
	}
	if g.Reached(at) {
		w.Wake()
	}
}

// raise adds k to the count and wakes every watcher, as the last member to arrive at a barrier does.
func (g *countGate) raise(k uint64) {
	g.n.Add(k)
	g.mu.Lock()
	ws := g.waiters
	g.waiters = nil
	g.mu.Unlock()
	for _, w := range ws {
		w.Wake()
	}
}

// TestGateRequestWait: a barrier's run (GateRequest) completes once its gate reaches the target, seen by every
// completion call: Test before and after, Wait parked before the gate moves (it watched first: the test raises the
// gate only once the waiter has asked to be told), Waitany beside a receive that never comes, and Testall. The
// run's state then serves a plain CollRequest, which must not wait on the gate.
func TestGateRequestWait(t *testing.T) {
	c := world(t, 1).Comm(0)
	g := &countGate{watched: make(chan uint64, 4)}

	r := c.GateRequest(g, 2, 0)
	if _, ok, err := r.Test(); ok || err != nil {
		t.Fatalf("Test before the gate: %v, %v", ok, err)
	}
	g.raise(1)
	if ok, err := Testall(r); ok || err != nil {
		t.Fatalf("Testall short of the gate: %v, %v", ok, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Wait()
		done <- err
	}()
	if at := <-g.watched; at != 2 {
		t.Fatalf("watched %d, want 2", at)
	}
	g.raise(1)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, ok, err := r.Test(); !ok || err != nil {
		t.Fatalf("Test of the reported run: %v, %v", ok, err)
	}

	// Waitany: the gate's run among a receive that never comes.
	never, err := c.Irecv(make([]byte, 1), 0, 99)
	if err != nil {
		t.Fatal(err)
	}
	r = c.GateRequest(g, 4, 0)
	go func() {
		i, _, err := Waitany(never, r)
		if err == nil && i != 1 {
			err = errWant(i)
		}
		done <- err
	}()
	<-g.watched
	g.raise(2)
	if err := <-done; err != nil {
		t.Fatalf("Waitany: %v", err)
	}
	if err := never.Cancel(); err != nil {
		t.Fatal(err)
	}
	if _, err := never.Wait(); err != nil {
		t.Fatal(err)
	}

	// Reached at the start: Wait reports it at once, and the state's next run is a plain one.
	r = c.GateRequest(g, 4, 0)
	if _, err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	plain := c.CollRequest()
	if gg, _ := plain.s.gateOf(); gg != nil {
		t.Fatal("a plain CollRequest kept the gate of its state's last run")
	}
	if _, ok, err := plain.Test(); ok || err != nil {
		t.Fatalf("a plain run is done before its completion: %v, %v", ok, err)
	}
	CompleteColl(plain, nil)
	if _, err := plain.Wait(); err != nil {
		t.Fatal(err)
	}
}

type errWant int

func (e errWant) Error() string { return "Waitany returned the wrong index" }

// TestGateRequestAllocs: a barrier's run that is through at its Wait allocates nothing, and neither does one that
// its Wait spins for (the gate reached by the time of the spin's first look).
func TestGateRequestAllocs(t *testing.T) {
	c := world(t, 1).Comm(0)
	g := &countGate{}
	var at uint64
	if n := testing.AllocsPerRun(200, func() {
		at++
		r := c.GateRequest(g, at, 0)
		g.n.Add(1)
		if _, err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per barrier's run, want 0", n)
	}
}

// TestGateRequestFreedActive: a barrier's run freed while active (MPI_Request_free) gives its state back for the
// communicator's next runs (spare) once its gate is reached, and not before; so does a small collective's run, once
// its flag is set. Before, each such run's state stayed behind for good. The freed handle's later uses fail.
func TestGateRequestFreedActive(t *testing.T) {
	c := world(t, 1).Comm(0)
	g := &countGate{}
	r := c.GateRequest(g, 1, 0)
	if err := r.Free(); err != nil {
		t.Fatal(err)
	}
	if s := r.spare(c.r, false); s != nil {
		t.Fatal("the state of a run freed before its gate was reached was given back")
	}
	g.n.Store(1)
	if s := r.spare(c.r, false); s != r.s {
		t.Fatal("the state of a freed run whose gate was reached was not given back")
	}
	if _, err := r.Wait(); !errors.Is(err, ErrRequest) {
		t.Fatalf("Wait on the freed handle: %v, want ErrRequest", err)
	}
	d := c.CollRequest()
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if s := d.spare(c.r, false); s != nil {
		t.Fatal("the state of a freed small collective's run was given back before its flag was set")
	}
	CompleteColl(d, nil)
	if s := d.spare(c.r, false); s != d.s {
		t.Fatal("the state of a freed small collective's run, its flag set, was not given back")
	}
}
