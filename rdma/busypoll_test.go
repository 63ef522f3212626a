package rdma_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/device/devicetest"
	"github.com/gompj/gompj/rdma"
	"github.com/gompj/gompj/rdma/memprov"
)

// waitCounter counts an endpoint's Waits.
type waitCounter struct {
	rdma.Endpoint
	waits atomic.Int64
}

func (w *waitCounter) Wait(timeout time.Duration) {
	w.waits.Add(1)
	w.Endpoint.Wait(timeout)
}

// countSink records how many Waits node 1's endpoint had begun when its message was delivered.
type countSink struct {
	w   *waitCounter
	at  atomic.Int64
	got chan struct{}
}

func (s *countSink) DeliverEager(in *device.Inbound) {
	s.at.Store(s.w.waits.Load())
	in.Done()
	close(s.got)
}
func (s *countSink) DeliverRTS(*device.Header)  {}
func (s *countSink) PeerLost(node int, _ error) {}

// TestSetBusyPoll: a device configured to busy-poll for an hour after an event sleeps in Wait again once
// SetBusyPoll turns busy polling off (as node does where the host's ranks outnumber its cores). Without the
// setter the loop would poll on for the hour and the test would time out.
func TestSetBusyPoll(t *testing.T) {
	f := memprov.New(memprov.Options{})
	var devs [2]*rdma.Device
	var wc [2]*waitCounter
	for i := range 2 {
		ep, err := f.Open(rdma.EndpointConfig{Node: i, Nodes: 2})
		if err != nil {
			t.Fatal(err)
		}
		wc[i] = &waitCounter{Endpoint: ep}
		d, err := rdma.New(wc[i], rdma.Config{Node: i, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r },
			BusyPoll: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = d
	}
	sinks := [2]*countSink{{w: wc[0], got: make(chan struct{})}, {w: wc[1], got: make(chan struct{})}}
	devicetest.Connect(t, []device.Transport{devs[0], devs[1]}, []device.Sink{sinks[0], sinks[1]}, 10*time.Second)
	if err := devs[0].SendEager(&device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1}, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	<-sinks[1].got // node 1's loop is now busy-polling for an hour
	devs[1].SetBusyPoll(-1)
	deadline := time.Now().Add(30 * time.Second)
	for wc[1].waits.Load() <= sinks[1].at.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the progress loop did not sleep within 30 s of SetBusyPoll(-1)")
		}
		runtime.Gosched()
	}
}

// helpSink closes got once its message is delivered.
type helpSink struct{ got chan struct{} }

func (s *helpSink) DeliverEager(in *device.Inbound) { in.Done(); close(s.got) }
func (s *helpSink) DeliverRTS(*device.Header)       {}
func (s *helpSink) PeerLost(node int, _ error)      {}

// helpPair opens two devices of one rank each over memprov, not yet connected, and their sinks, which close got when
// a message is delivered.
func helpPair(t *testing.T) ([2]*rdma.Device, [2]*helpSink) {
	f := memprov.New(memprov.Options{})
	var devs [2]*rdma.Device
	for i := range 2 {
		ep, err := f.Open(rdma.EndpointConfig{Node: i, Nodes: 2})
		if err != nil {
			t.Fatal(err)
		}
		if devs[i], err = rdma.New(ep, rdma.Config{Node: i, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r },
			BusyPoll: -1}); err != nil {
			t.Fatal(err)
		}
	}
	return devs, [2]*helpSink{{got: make(chan struct{})}, {got: make(chan struct{})}}
}

// pairHelper is a device.Helper that checks that Round and Help alternate, and closes after at the first Help past
// got.
type pairHelper struct {
	inRound atomic.Bool
	got     chan struct{}
	once    atomic.Bool
	after   chan string
}

func (h *pairHelper) Round() {
	if h.inRound.Swap(true) {
		h.report("Round twice without Help")
	}
}

func (h *pairHelper) Help() bool {
	if !h.inRound.Swap(false) {
		h.report("Help without Round")
	}
	select {
	case <-h.got:
		h.report("")
	default:
	}
	return false
}

func (h *pairHelper) report(s string) {
	if h.once.CompareAndSwap(false, true) {
		h.after <- s
	}
}

// TestSetHelper: the progress goroutine calls its helper's Round before each round and Help after it, also after
// the round that delivered a message, with no rank polling the device.
func TestSetHelper(t *testing.T) {
	devs, sinks := helpPair(t)
	h := &pairHelper{got: sinks[1].got, after: make(chan string, 1)}
	devs[1].SetHelper(h)
	devicetest.Connect(t, []device.Transport{devs[0], devs[1]}, []device.Sink{sinks[0], sinks[1]}, 10*time.Second)
	if err := devs[0].SendEager(&device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1}, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-h.after:
		if s != "" {
			t.Fatal(s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the progress goroutine did not call Help within 30 s of delivering a message")
	}
}

// TestPollYields: a driving rank whose Polls find nothing gives its core away once every IdleYieldEvery of them in
// a row, and a Poll that finds something starts the count again.
func TestPollYields(t *testing.T) {
	var yields atomic.Int32
	defer rdma.CountYields(&yields)()
	devs, sinks := helpPair(t)
	devicetest.Connect(t, []device.Transport{devs[0], devs[1]}, []device.Sink{sinks[0], sinks[1]}, 10*time.Second)
	d := devs[1]
	d.Enter()
	defer d.Leave(true)
	pollUntil := func(want int32) int {
		for n := 1; n <= 100*rdma.IdleYieldEvery; n++ {
			if d.Poll() {
				t.Fatal("a Poll of an idle device found something")
			}
			if yields.Load() == want {
				return n
			}
		}
		t.Fatalf("%d empty Polls in a row yielded %d times, want %d", 100*rdma.IdleYieldEvery, yields.Load(), want)
		return 0
	}
	if n := pollUntil(2); n < 2*rdma.IdleYieldEvery {
		t.Fatalf("%d empty Polls in a row yielded twice; want one yield per %d", n, rdma.IdleYieldEvery)
	}
	for range rdma.IdleYieldEvery - 1 {
		d.Poll()
	}
	if err := devs[0].SendEager(&device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1}, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !d.Poll() {
		if time.Now().After(deadline) {
			t.Fatal("the message did not arrive")
		}
	}
	<-sinks[1].got
	yields.Store(0)
	if n := pollUntil(1); n < rdma.IdleYieldEvery {
		t.Fatalf("the first %d empty Polls after one that found a message yielded; want %d first", n, rdma.IdleYieldEvery)
	}
}
