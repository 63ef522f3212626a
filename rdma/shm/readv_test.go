//go:build linux

package shm

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"
)

// TestCMAReadv: a vectored read of this process's own memory fills the locals in order, and a vectored write
// copies them back in order, whatever their number (more than one call's worth of iovecs), sizes (empty ones
// included) and the offsets at which the kernel's partial transfers could leave it.
func TestCMAReadv(t *testing.T) {
	if ok, why := CMA(false); !ok {
		t.Skip("no CMA here: " + why)
	}
	rng := rand.New(rand.NewPCG(3, 14))
	for round := range 20 {
		var locals [][]byte
		n := 0
		for range 1 + rng.IntN(3*cmaIov) {
			l := rng.IntN(3000)
			if rng.IntN(8) == 0 {
				l = 0
			}
			locals = append(locals, make([]byte, l))
			n += l
		}
		src := make([]byte, n+1)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		if err := cmaCopyv(false, os.Getpid(), locals, uint64(uintptr(unsafe.Pointer(&src[0])))); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(locals, nil); !bytes.Equal(got, src[:n]) {
			t.Fatalf("round %d: %d locals of %d bytes: the bytes differ", round, len(locals), n)
		}
		// And back: a vectored write of the locals, changed in place, into a fresh buffer.
		for _, b := range locals {
			for i := range b {
				b[i] ^= 0x5a
			}
		}
		dst := make([]byte, n+1)
		if err := cmaCopyv(true, os.Getpid(), locals, uint64(uintptr(unsafe.Pointer(&dst[0])))); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(locals, nil); !bytes.Equal(dst[:n], got) || dst[n] != 0 {
			t.Fatalf("round %d: write of %d locals of %d bytes: the bytes differ", round, len(locals), n)
		}
	}
}
