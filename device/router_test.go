package device

import (
	"errors"
	"sync/atomic"
	"testing"
)

// fake records which calls reach it.
type fake struct {
	name                      string
	eager, rdv, cts, ack      atomic.Int32
	polls, enters, leaves     atomic.Int32
	regs, releases, closeCall atomic.Int32
	closeErr                  error
	limit                     int
}

func (f *fake) SendEager(*Header, []byte, Completer) error      { f.eager.Add(1); return nil }
func (f *fake) SendRendezvous(*Header, []byte, Completer) error { f.rdv.Add(1); return nil }
func (f *fake) ClearToSend(*Header, []byte, Completer) error    { f.cts.Add(1); return nil }
func (f *fake) Ack(*Header) error                               { f.ack.Add(1); return nil }
func (f *fake) EagerLimit(int) int                              { return f.limit }
func (f *fake) Close() error                                    { f.closeCall.Add(1); return f.closeErr }
func (f *fake) Enter()                                          { f.enters.Add(1) }
func (f *fake) Poll() bool                                      { f.polls.Add(1); return false }
func (f *fake) Leave(bool)                                      { f.leaves.Add(1) }

type fakeReg struct{ f *fake }

func (g fakeReg) Release() { g.f.releases.Add(1) }

func (f *fake) Register([]byte) (Registration, error) { f.regs.Add(1); return fakeReg{f}, nil }

// TestRouter: each call goes to the device of the peer it concerns (the destination of a send, the source of a
// CTS or an ACK); the first device is polled every time, the others every fourth; Close and Register reach all.
func TestRouter(t *testing.T) {
	shm := &fake{name: "shm", limit: 4096, closeErr: errors.New("shm close")}
	tcp := &fake{name: "tcp", limit: 1 << 17}
	nodeOf := func(r int) int { return r / 2 } // 4 nodes of 2 ranks; this is node 0
	r, err := NewRouter(nodeOf, []Device{nil, shm, tcp, tcp}, []Device{shm, tcp})
	if err != nil {
		t.Fatal(err)
	}
	r.SendEager(&Header{Source: 0, Dest: 2}, nil, nil)                         // node 1: shm
	r.SendEager(&Header{Source: 0, Dest: 7}, nil, nil)                         // node 3: tcp
	r.SendRendezvous(&Header{Source: 1, Dest: 4}, nil, nil)                    // node 2: tcp
	r.ClearToSend(&Header{Source: 3, Dest: 0}, nil, nil)                       // from node 1: shm
	r.Ack(&Header{Source: 5, Dest: 1})                                         // from node 2: tcp
	if err := r.SendEager(&Header{Source: 2, Dest: 0}, nil, nil); err == nil { // this node: no device
		t.Error("a send to this node's rank was routed")
	}
	if err := r.SendEager(&Header{Source: 0, Dest: 9}, nil, nil); err == nil {
		t.Error("a send outside the job was routed")
	}
	if shm.eager.Load() != 1 || tcp.eager.Load() != 1 || tcp.rdv.Load() != 1 || shm.cts.Load() != 1 || tcp.ack.Load() != 1 {
		t.Errorf("routing: shm %d/%d tcp %d/%d/%d", shm.eager.Load(), shm.cts.Load(), tcp.eager.Load(), tcp.rdv.Load(), tcp.ack.Load())
	}
	for rank, want := range map[int]Device{0: nil, 1: nil, 2: shm, 3: shm, 4: tcp, 7: tcp, 8: nil, -1: nil} {
		if got := r.DeviceFor(rank); got != want {
			t.Errorf("DeviceFor(%d) = %v, want %v", rank, got, want)
		}
	}
	if r.EagerLimit(3) != 4096 || r.EagerLimit(6) != 1<<17 || r.EagerLimit(0) != 0 || r.EagerLimit(-1) != 0 {
		t.Error("EagerLimit not routed")
	}
	r.Enter()
	for range 8 {
		r.Poll()
	}
	r.Leave(true)
	if shm.polls.Load() != 8 || tcp.polls.Load() != 2 || shm.enters.Load() != 1 || tcp.leaves.Load() != 1 {
		t.Errorf("polls: shm %d tcp %d", shm.polls.Load(), tcp.polls.Load())
	}
	g, err := r.Register(make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	g.Release()
	if shm.regs.Load() != 1 || tcp.regs.Load() != 1 || shm.releases.Load() != 1 || tcp.releases.Load() != 1 {
		t.Error("Register does not reach every device")
	}
	if err := r.Close(); err == nil || err.Error() != "shm close" || shm.closeCall.Load() != 1 || tcp.closeCall.Load() != 1 {
		t.Errorf("Close: %v", err)
	}
}

// segFake is a fake that also moves segmented payloads.
type segFake struct {
	fake
	eagerv, rdvv, ctsv atomic.Int32
}

func (f *segFake) Segments(int) bool                                 { return true }
func (f *segFake) SendEagerv(*Header, Payload, Completer) error      { f.eagerv.Add(1); return nil }
func (f *segFake) SendRendezvousv(*Header, Payload, Completer) error { f.rdvv.Add(1); return nil }
func (f *segFake) ClearToSendv(*Header, Payload, Completer) error    { f.ctsv.Add(1); return nil }

// TestRouterSegments: Segments follows the device serving the peer, and the segmented calls reach it; toward a
// device without them they fail without starting anything, so that the rank layer packs.
func TestRouterSegments(t *testing.T) {
	shm := &fake{name: "shm"}
	tcp := &segFake{fake: fake{name: "tcp"}}
	r, err := NewRouter(func(r int) int { return r / 2 }, []Device{nil, shm, tcp}, []Device{shm, tcp})
	if err != nil {
		t.Fatal(err)
	}
	if r.Segments(2) || !r.Segments(4) || r.Segments(0) || r.Segments(-1) {
		t.Errorf("Segments: shm peer %v, tcp peer %v, own rank %v", r.Segments(2), r.Segments(4), r.Segments(0))
	}
	if r.SendRendezvousv(&Header{Source: 0, Dest: 5}, Payload{}, nil) != nil ||
		r.SendEagerv(&Header{Source: 0, Dest: 4}, Payload{}, nil) != nil ||
		r.ClearToSendv(&Header{Source: 5, Dest: 0}, Payload{}, nil) != nil {
		t.Error("a segmented call toward the tcp device failed")
	}
	if err := r.SendRendezvousv(&Header{Source: 0, Dest: 3}, Payload{}, nil); err == nil {
		t.Error("a segmented call toward a device without them was accepted")
	}
	if err := r.SendEagerv(nil, Payload{}, nil); err == nil {
		t.Error("a nil header was accepted")
	}
	if tcp.eagerv.Load() != 1 || tcp.rdvv.Load() != 1 || tcp.ctsv.Load() != 1 || shm.eager.Load()+shm.rdv.Load() != 0 {
		t.Errorf("segmented routing: tcp %d/%d/%d, shm %d/%d", tcp.eagerv.Load(), tcp.rdvv.Load(), tcp.ctsv.Load(), shm.eager.Load(), shm.rdv.Load())
	}
}

// TestPayloadCopies: Gather and Scatter over pieces, from any offset, and over contiguous bytes.
func TestPayloadCopies(t *testing.T) {
	buf := make([]byte, 100)
	segs := piecesFunc(func(off, max int, dst [][]byte) int { // blocks of 3 bytes every 5, 15 blocks
		n := 0
		for max > 0 && n < len(dst) && off < 45 {
			b, in := off/3, off%3
			k := min(3-in, max)
			dst[n] = buf[b*5+in : b*5+in+k]
			n, off, max = n+1, off+k, max-k
		}
		return n
	})
	p := Payload{Segs: segs, Off: 4, Len: 40}
	src := make([]byte, 40)
	for i := range src {
		src[i] = byte(i + 1)
	}
	p.Scatter(0, src)
	got := make([]byte, 40)
	p.Gather(0, got)
	for i := range got {
		if got[i] != src[i] {
			t.Fatalf("byte %d: %d, want %d", i, got[i], src[i])
		}
	}
	part := make([]byte, 7)
	p.Gather(10, part)
	for i, x := range part {
		if x != src[10+i] {
			t.Fatalf("gather from 10: byte %d is %d", i, x)
		}
	}
	for i, x := range buf {
		if in := i%5 < 3 && i/5 < 15; !in && x != 0 {
			t.Fatalf("byte %d between the blocks was written", i)
		}
	}
	if p.Size() != 40 || !p.Segmented() || Contiguous(src).Size() != 40 || Contiguous(src).Segmented() {
		t.Error("Size or Segmented wrong")
	}
}

type piecesFunc func(off, max int, dst [][]byte) int

func (f piecesFunc) Pieces(off, max int, dst [][]byte) int { return f(off, max, dst) }
