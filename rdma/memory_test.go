package rdma_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
	"github.com/gompj/gompj/rdma/memprov"
)

//go:nosplit
func hideStack(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return unsafe.Add(nil, x) // the uintptr round trip hides p from escape analysis: p stays on the stack
}

type recSink struct {
	rts  chan *device.Header
	lost chan error
}

func (s *recSink) DeliverEager(in *device.Inbound) { in.Done() }
func (s *recSink) DeliverRTS(h *device.Header)     { c := *h; s.rts <- &c } // valid during the call only
func (s *recSink) PeerLost(node int, err error)    { s.lost <- err }

type doneCh chan error

func (c doneCh) Complete(err error) { c <- err }

// waitDone waits for each completion in turn and fails t if one fails or does not come within 10 s.
func waitDone(t *testing.T, cs ...doneCh) {
	t.Helper()
	for _, c := range cs {
		select {
		case err := <-c:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the rendezvous did not complete")
		}
	}
}

// twoNodes starts two rma-capable devices over an in-memory fabric.
func twoNodes(t *testing.T) ([2]*rdma.Device, [2]*recSink) {
	devs, sinks, _ := twoNodesEPs(t)
	return devs, sinks
}

// twoNodesEPs is twoNodes, also returning the devices' endpoints.
func twoNodesEPs(t *testing.T) ([2]*rdma.Device, [2]*recSink, [2]rdma.Endpoint) {
	return twoNodesOpts(t, memprov.Options{Ordered: true, RMA: true})
}

// twoNodesOpts is twoNodesEPs over a fabric with options o.
func twoNodesOpts(t *testing.T, o memprov.Options) ([2]*rdma.Device, [2]*recSink, [2]rdma.Endpoint) {
	f := memprov.New(o)
	var devs [2]*rdma.Device
	var sinks [2]*recSink
	var eps [2]rdma.Endpoint
	addrs := make([][]byte, 2)
	for i := range 2 {
		ep, _ := f.Open(rdma.EndpointConfig{Node: i, Nodes: 2})
		eps[i] = ep
		d, err := rdma.New(ep, rdma.Config{Node: i, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r }, EagerLimit: 1024})
		if err != nil {
			t.Fatal(err)
		}
		devs[i], sinks[i], addrs[i] = d, &recSink{rts: make(chan *device.Header, 4), lost: make(chan error, 1)}, d.Address()
	}
	for i, d := range devs {
		a := [][]byte{addrs[0], addrs[1]}
		a[i] = nil
		if err := d.Start(sinks[i], a); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range devs {
		if err := d.WaitConnected(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
	}
	return devs, sinks, eps
}

// TestStackMemoryNeverLeaves: a rendezvous payload on a goroutine stack (which moves when the stack grows or shrinks)
// is copied to the heap before its address is handed to the fabric, so the receiver gets the bytes as they were when
// SendRendezvous was called; a receive buffer on a stack is refused with an error, never exposed.
func TestStackMemoryNeverLeaves(t *testing.T) {
	devs, sinks := twoNodes(t)
	sent := make(doneCh, 1)
	var a [4096]byte
	stack := unsafe.Slice((*byte)(hideStack(unsafe.Pointer(&a[0]))), len(a))
	for i := range stack {
		stack[i] = byte(i * 7)
	}
	want := bytes.Clone(stack)
	h := &device.Header{Kind: device.KindRTS, Type: 1, Source: 0, Dest: 1, Length: uint64(len(stack))}
	if err := devs[0].SendRendezvous(h, stack, sent); err != nil {
		t.Fatal(err)
	}
	clear(stack) // the device must have taken its copy already
	runtime.KeepAlive(&a)
	rts := <-sinks[1].rts
	into := make([]byte, rts.Length)
	recv := make(doneCh, 1)
	if err := devs[1].ClearToSend(rts, into, recv); err != nil {
		t.Fatal(err)
	}
	waitDone(t, recv, sent)
	if !bytes.Equal(into, want) {
		t.Fatal("the payload that arrived is not what the stack held at the send")
	}

	// A receive buffer on a stack is refused.
	big := make([]byte, 4096)
	h = &device.Header{Kind: device.KindRTS, Type: 1, Source: 0, Dest: 1, Length: uint64(len(big))}
	if err := devs[0].SendRendezvous(h, big, nil); err != nil {
		t.Fatal(err)
	}
	rts = <-sinks[1].rts
	var b [4096]byte
	dst := unsafe.Slice((*byte)(hideStack(unsafe.Pointer(&b[0]))), len(b))
	err := devs[1].ClearToSend(rts, dst, recv)
	runtime.KeepAlive(&b)
	if err == nil || !errors.Is(err, rdma.ErrNotHeap) {
		t.Fatalf("ClearToSend into a stack buffer: %v, want ErrNotHeap", err)
	}
}
