//go:build unix

package rdma_test

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
)

// TestLentMemoryRegisters: memory a Lender noted (NoteLent: here a mapping of the test's own, as the shm
// provider's segment is one) is neither Go heap nor a stack, yet every device registers it: a rendezvous moves
// from it and into it, over any provider. Once forgotten it is refused like any memory outside the Go heap.
func TestLentMemoryRegisters(t *testing.T) {
	const size = 300 << 10
	mem, err := unix.Mmap(-1, 0, 2*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	src, dst := mem[:size], mem[size:]
	for i := range src {
		src[i] = byte(i * 13)
	}
	rdma.NoteLent(src, nil, 0)
	rdma.NoteLent(dst, nil, 0)
	devs, sinks := twoNodes(t)
	sent, recv := make(doneCh, 1), make(doneCh, 1)
	h := &device.Header{Kind: device.KindRTS, Type: 1, Source: 0, Dest: 1, Length: size}
	if err := devs[0].SendRendezvous(h, src, sent); err != nil {
		t.Fatal(err)
	}
	rts := <-sinks[1].rts
	if err := devs[1].ClearToSend(rts, dst, recv); err != nil {
		t.Fatalf("ClearToSend into lent memory: %v", err)
	}
	waitDone(t, recv, sent)
	if !bytes.Equal(src, dst) {
		t.Fatal("the lent receive buffer does not hold what was sent")
	}

	rdma.ForgetLent(dst, nil)
	if err := devs[0].SendRendezvous(h, src, nil); err != nil {
		t.Fatal(err)
	}
	rts = <-sinks[1].rts
	if err := devs[1].ClearToSend(rts, dst, recv); !errors.Is(err, rdma.ErrNotHeap) {
		t.Fatalf("ClearToSend into forgotten lent memory: %v, want ErrNotHeap", err)
	}
	rdma.ForgetLent(src, nil)
}
