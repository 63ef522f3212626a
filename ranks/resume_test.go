package ranks

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/queues"
)

// resumeDevice counts the times its progress loop is told to resume: the last driver leaving to park
// (device.Poller), which ResumeNetwork does.
type resumeDevice struct {
	ackDevice
	drivers atomic.Int32
	resumes atomic.Int32
}

func (d *resumeDevice) Enter() { d.drivers.Add(1) }
func (d *resumeDevice) Leave(parking bool) {
	if d.drivers.Add(-1) == 0 && parking {
		d.resumes.Add(1)
	}
}
func (d *resumeDevice) Poll() bool { return false }

// idleOp is an operation that stays under way until the test completes its request.
type idleOp struct{}

func (idleOp) Progress() (bool, error)     { return false, nil }
func (idleOp) Blocker() *queues.Completion { return nil }

// TestResumeNetworkSoon: a small operation's start resumes the network's progress loop a grace later, and only if
// some rank of the node still has an operation under way and no rank drives the device; starts within one grace
// arm the timer once.
func TestResumeNetworkSoon(t *testing.T) {
	dev := &resumeDevice{}
	w := nodeZero(t, dev, 1)
	resumes := func(want int32, why string) {
		t.Helper()
		if got := dev.resumes.Load(); got != want {
			t.Fatalf("%s: the loop was resumed %d times, want %d", why, got, want)
		}
	}

	// What the timer decides, called directly.
	w.resumeDue()
	resumes(0, "no operation under way")
	r := w.Comm(1).OpRequest(idleOp{})
	Launch(r)
	dev.Enter() // a rank drives the device: it polls, the loop stands down
	w.resumeDue()
	dev.Leave(false)
	resumes(0, "an operation under way, and a rank driving the device")
	w.resumeDue()
	resumes(1, "an operation under way")

	// The timer: armed once for any number of starts within the grace, it fires and resumes the loop once.
	for range 100 {
		w.ResumeNetworkSoon()
	}
	if !w.soonArmed.Load() {
		t.Fatal("ResumeNetworkSoon did not arm the timer")
	}
	deadline := time.Now().Add(10 * time.Second)
	for dev.resumes.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the grace timer never resumed the loop")
		}
		runtime.Gosched()
	}
	resumes(2, "100 starts within one grace")

	CompleteOp(r, nil)
	w.Comm(1).r.ops.sweep()
	w.resumeDue()
	resumes(2, "the operation done")
}

// TestWorkerRunParksWaiters: while a worker of the pool runs one of a rank's operations, the rank's completion
// calls park instead of spinning and driving the device (it could not move that operation on, and its core is the
// worker's to use); the end of the run wakes them, and they drive the device again.
func TestWorkerRunParksWaiters(t *testing.T) {
	w, dev := driveWorld(t)
	c := w.Comm(0)
	if w.waitPolicyOf(c.r, true) != &w.netPolicy {
		t.Fatal("no worker run under way: a completion call should wait as any remote wait does")
	}
	r := c.OpRequest(idleOp{})
	Launch(r)
	EnterWorker(c)
	if w.waitPolicyOf(c.r, true) != &parkPolicy {
		t.Fatal("a worker run under way: a completion call should park")
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Wait()
		done <- err
	}()
	ev := &c.r.ops.ev
	for !ev.Waiting() {
		runtime.Gosched()
	}
	polls := dev.polls.Load()
	for range 1000 {
		runtime.Gosched()
	}
	if got := dev.polls.Load(); got != polls {
		t.Fatalf("the waiter polled the device %d times while a worker ran its rank's operation", got-polls)
	}
	gen := ev.Gen()
	LeaveWorker(c)
	if ev.Gen() == gen {
		t.Fatal("the end of the worker's run did not signal the waiting rank")
	}
	deadline := time.Now().Add(10 * time.Second)
	for dev.polls.Load() == polls {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never drove the device after the worker's run ended")
		}
		runtime.Gosched()
	}
	CompleteOp(r, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
