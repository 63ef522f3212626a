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
