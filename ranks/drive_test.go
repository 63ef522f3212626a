package ranks

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// driveDevice is a device whose transfers move only when a rank drives it (device.Poller): a cleared rendezvous
// is completed by the next Poll, as over a device whose progress loop stands down while a rank drives it.
type driveDevice struct {
	ackDevice
	mu      sync.Mutex
	cleared []func()
	polls   atomic.Int32
}

func (d *driveDevice) ClearToSend(h *device.Header, dst []byte, done device.Completer) error {
	d.mu.Lock()
	d.cleared = append(d.cleared, func() {
		for i := range dst {
			dst[i] = byte(i)
		}
		done.Complete(nil)
	})
	d.mu.Unlock()
	return nil
}

func (d *driveDevice) Enter()     {}
func (d *driveDevice) Leave(bool) {}
func (d *driveDevice) Poll() bool {
	d.polls.Add(1)
	d.mu.Lock()
	todo := d.cleared
	d.cleared = nil
	d.mu.Unlock()
	for _, f := range todo {
		f()
	}
	return len(todo) > 0
}

// driveWorld is node 0 of 2 (ranks 0 and 1 of 4) over a driveDevice.
func driveWorld(t *testing.T) (*World, *driveDevice) {
	t.Helper()
	dev := &driveDevice{}
	return nodeZero(t, dev, 1), dev
}

// nodeZero is node 0 of 2 (ranks 0 and 1 of 4) over dev, its ranks waiting as on a host of hostRanks ranks.
func nodeZero(t *testing.T, dev device.Device, hostRanks int) *World {
	t.Helper()
	w, err := NewWorld(Options{Size: 4, Lo: 0, Hi: 2, EagerLimit: 64 << 10, Policy: queues.DefaultPolicy(hostRanks),
		Device: dev, NodeOf: func(r int) int { return r / 2 }})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestUnexpectedRendezvousDrives: a receive that matches a rendezvous from another node already waiting in the
// unexpected queue (its RTS came before the receive was posted) drives the device while it waits, as a receive
// posted before its RTS does: its transfer moves only as someone polls the device. (Its wait used the local
// policy, and a progress loop that stood down for the rank took up to 10 ms to move it.)
func TestUnexpectedRendezvousDrives(t *testing.T) {
	w, dev := driveWorld(t)
	const n = 32 << 10 // int32s
	rts := remoteEager(7, n)
	rts.Kind = device.KindRTS
	w.DeliverRTS(rts) // no receive yet: the RTS waits in the unexpected queue
	buf := make([]int32, n)
	got := make(chan error, 1)
	go func() {
		_, err := w.Comm(0).Recv(buf, 2, 7)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the receive never completed: its wait did not drive the device (%d polls)", dev.polls.Load())
	}
	if b := sliceMem(TypeInt32, buf).Bytes(); b[1] != 1 || b[len(b)-1] != byte(len(b)-1) {
		t.Fatal("payload not in the buffer")
	}
}

// arrive queues, on dev, the delivery of an eager message from node 1 that only a Poll makes: it arrives as over a
// device whose progress goroutine stands down, or has not woken yet.
func (d *driveDevice) arrive(w *World, h *device.Header, payload []int32) {
	d.mu.Lock()
	d.cleared = append(d.cleared, func() { deliver(w, h, payload) })
	d.mu.Unlock()
}

// TestTestCallsDrive: the test calls poll the network device once each (MPI's progress rule for MPI_Test), so
// that a loop of them completes what comes from another node without the device's own goroutine. A Test loop
// between two node processes took 170-190 us per 0-byte message, waiting for that goroutine to wake, against
// 0.55 us with Recv. Each call here is the first and only one that could see the message.
func TestTestCallsDrive(t *testing.T) {
	w, dev := driveWorld(t)
	c := w.Comm(0)
	rendezvous := func(tag int32) *Request { // a receive whose transfer only a Poll completes
		t.Helper()
		r, err := c.Irecv(make([]int32, 8<<10), 2, int(tag))
		if err != nil {
			t.Fatal(err)
		}
		rts := remoteEager(tag, 8<<10)
		rts.Kind = device.KindRTS
		w.DeliverRTS(rts)
		if r.s.done.Done() {
			t.Fatal("the transfer completed before any poll")
		}
		return r
	}
	if _, done, err := rendezvous(1).Test(); err != nil || !done {
		t.Fatalf("Test: done %v, error %v", done, err)
	}
	if i, _, done, err := Testany(nil, rendezvous(2)); err != nil || !done || i != 1 {
		t.Fatalf("Testany: index %d, done %v, error %v", i, done, err)
	}
	if done, err := Testall(rendezvous(3)); err != nil || !done {
		t.Fatalf("Testall: done %v, error %v", done, err)
	}
	if idx, _, err := Testsome(rendezvous(4)); err != nil || len(idx) != 1 {
		t.Fatalf("Testsome: %v, error %v", idx, err)
	}
	for _, src := range []int{2, AnySource} {
		dev.arrive(w, remoteEager(5, 1), []int32{9})
		if st, ok, err := c.Iprobe(src, 5); err != nil || !ok || st.Source != 2 {
			t.Fatalf("Iprobe(%d): found %v, status %+v, error %v", src, ok, st, err)
		}
		if _, err := c.Recv(make([]int32, 1), 2, 5); err != nil {
			t.Fatal(err)
		}
	}
	dev.arrive(w, remoteEager(6, 1), []int32{9})
	if m, _, ok, err := c.Improbe(2, 6); err != nil || !ok {
		t.Fatalf("Improbe: found %v, error %v", ok, err)
	} else if _, err := m.Recv(make([]int32, 1)); err != nil {
		t.Fatal(err)
	}
	// A probe for a rank of this node polls nothing: its messages never come through the device.
	before := dev.polls.Load()
	if _, ok, err := c.Iprobe(1, 7); err != nil || ok {
		t.Fatalf("Iprobe of a local rank: found %v, error %v", ok, err)
	}
	if dev.polls.Load() != before {
		t.Fatal("a probe for a rank of this node polled the device")
	}
}

// TestTestCallsYield: a loop of test calls lets the goroutines it waits for run. With one processor, a sender
// started while the loop runs gets it only if the loop yields (sysmon would preempt the loop only after 10 ms, far
// more than the calls allowed here take).
func TestTestCallsYield(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const most = 20000 // test calls before giving up: every testYield-th miss yields
	w := world(t, 2)
	c0, c1 := w.Comm(0), w.Comm(1)
	send := func(tag int) {
		go func() {
			if err := c1.Send([]int32{int32(tag)}, 0, tag); err != nil {
				t.Error(err)
			}
		}()
	}
	buf := make([]int32, 1)
	r, err := c0.Irecv(buf, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	send(1)
	calls := map[string]func() bool{
		"Test":     func() bool { _, done, _ := r.Test(); return done },
		"Testany":  func() bool { _, _, done, _ := Testany(r); return done },
		"Testall":  func() bool { done, _ := Testall(r); return done },
		"Testsome": func() bool { idx, _, _ := Testsome(r); return len(idx) > 0 },
		"Iprobe":   func() bool { _, ok, _ := c0.Iprobe(1, 1); return ok },
		"Improbe": func() bool {
			m, _, ok, _ := c0.Improbe(1, 1)
			if ok {
				m.Recv(buf)
			}
			return ok
		},
	}
	for _, name := range []string{"Test", "Testany", "Testall", "Testsome", "Iprobe", "Improbe"} {
		if name == "Iprobe" || name == "Improbe" { // the message waits for a probe, not a receive
			send(1)
		} else if name != "Test" {
			if r, err = c0.Irecv(buf, 1, 1); err != nil {
				t.Fatal(err)
			}
			send(1)
		}
		i := 0
		for !calls[name]() {
			if i++; i > most {
				t.Fatalf("%s: the sender never ran in %d calls: the loop does not yield", name, most)
			}
		}
		if name == "Iprobe" {
			if _, err := c0.Recv(buf, 1, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// selfSignalling is an operation that signals its rank's event at every run (as a step that notifies a slot's wait
// list kicks the rank's other operations there), and finishes once done is set.
type selfSignalling struct {
	c    *Comm
	runs int
	done atomic.Bool
}

func (o *selfSignalling) Progress() (bool, error) {
	o.runs++
	if o.done.Load() {
		return true, nil
	}
	SignalOp(o.c)
	return false, nil
}

func (o *selfSignalling) Blocker() *queues.Completion { return nil }

// TestWaitYieldsToSelfSignals: a Wait whose own sweeps keep signalling its rank's event still yields the
// processor, so that what the operation waits for (here a goroutine that needs the one processor there is) happens
// within a few runs. It used to look again at once, every time: it ran until the scheduler preempted it, 10 to 20
// ms later, many thousands of runs.
func TestWaitYieldsToSelfSignals(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c := world(t, 1).Comm(0)
	o := &selfSignalling{c: c}
	h := c.OpRequest(o)
	Launch(h)
	go o.done.Store(true) // runnable, on the one processor, from now on
	if _, err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	if o.runs > 100 {
		t.Fatalf("the operation ran %d times before the goroutine it waited for could run", o.runs)
	}
}
