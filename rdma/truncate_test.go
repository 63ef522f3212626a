package rdma_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
	"github.com/gompj/gompj/rdma/memprov"
)

// TestForgedCTSLosesPeer: a CTS that asks for more than the message, for a Write of none of it, or for a Write
// from past what it takes, makes the sender report the receiver's node lost (a bad message), fails the send, and
// moves no byte: a receiver can shorten a message (truncation), never stretch it.
func TestForgedCTSLosesPeer(t *testing.T) {
	const size = 100 << 10
	for _, c := range []struct {
		name   string
		length uint64
		rma    bool
		offset uint64
	}{
		{"longer than the message", size + 1, false, 0},
		{"a write of nothing", 0, true, 0},
		{"a write from its end", size / 2, true, size / 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			devs, sinks, eps := twoNodesEPs(t)
			h := &device.Header{Kind: device.KindRTS, Type: 1, Context: 3, Source: 0, Dest: 1, Tag: 7, Length: size}
			done := make(doneCh, 1)
			if err := devs[0].SendRendezvous(h, make([]byte, size), done); err != nil {
				t.Fatal(err)
			}
			var rts *device.Header
			select {
			case rts = <-sinks[1].rts:
			case <-time.After(5 * time.Second):
				t.Fatal("no RTS")
			}
			if err := eps[1].Inject(0, rdma.ForgeCTS(*rts, c.length, c.rma, c.offset), nil); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-sinks[0].lost:
				if !errors.Is(err, rdma.ErrMessage) || !strings.Contains(err.Error(), "node 1") {
					t.Fatalf("PeerLost: %v, want a bad message from node 1", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the forged CTS went unnoticed")
			}
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("the send completed without error")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the send never completed")
			}
		})
	}
}

// onePiece is a device.Pieces of one slice.
type onePiece []byte

func (o onePiece) Pieces(off, max int, dst [][]byte) int {
	if off >= len(o) || max <= 0 || len(dst) == 0 {
		return 0
	}
	dst[0] = o[off:min(len(o), off+max)]
	return 1
}

// TestForgedCTSPieces: the receiver of a message the sender Writes in pieces must give it a buffer; a CTS that
// asks for the bytes streamed instead, or for a Write from the middle, fails the peer.
func TestForgedCTSPieces(t *testing.T) {
	const size = 100 << 10
	for _, c := range []struct {
		name   string
		rma    bool
		offset uint64
	}{{"no buffer", false, 0}, {"from the middle", true, size / 2}} {
		t.Run(c.name, func(t *testing.T) {
			devs, sinks, eps := twoNodesOpts(t, memprov.Options{Ordered: true, RMA: true, Readv: true})
			h := &device.Header{Kind: device.KindRTS, Type: 1, Context: 3, Source: 0, Dest: 1, Tag: 7, Length: size}
			done := make(doneCh, 1)
			p := device.Payload{Segs: onePiece(make([]byte, size)), Len: size}
			if err := devs[0].SendRendezvousv(h, p, done); err != nil {
				t.Fatal(err)
			}
			var rts *device.Header
			select {
			case rts = <-sinks[1].rts:
			case <-time.After(5 * time.Second):
				t.Fatal("no RTS")
			}
			if err := eps[1].Inject(0, rdma.ForgeCTS(*rts, size, c.rma, c.offset), nil); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-sinks[0].lost:
				if !errors.Is(err, rdma.ErrMessage) || !strings.Contains(err.Error(), "node 1") {
					t.Fatalf("PeerLost: %v, want a bad message from node 1", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the forged CTS went unnoticed")
			}
			if err := <-done; err == nil {
				t.Fatal("the send completed without error")
			}
		})
	}
}
