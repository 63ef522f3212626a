package ranks

import (
	"errors"
	"fmt"
	"testing"
)

// TestStartMem: persistent sends and receives of memory run again on other memory and tags (StartMem), as a
// neighbourhood collective's edge requests do, completed by WaitMem: every run moves its own block under its own
// tag, eager and rendezvous, into slices and View windows, with other traffic between; the error cases leave the
// request as it was.
func TestStartMem(t *testing.T) {
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		peer := 1 - c.Rank()
		sizes := []int{1, 300, 20000} // 8 B, 2.4 KB, 160 KB (rendezvous)
		big := sizes[len(sizes)-1]
		sbuf, rbuf := make([]float64, 2*big+16), make([]float64, 2*big+16)
		first := sliceMem(TypeFloat64, sbuf[:1])
		send, err := c.SendInitMem(first, peer, 5)
		if err != nil {
			return err
		}
		rfirst := sliceMem(TypeFloat64, rbuf[:1]) // a receive's buffer never overlaps a send's in flight
		recv, err := c.RecvInitMem(rfirst, peer, 5)
		if err != nil {
			return err
		}
		strided, err := Vector(rbuf, big+8, 1, 2) // every other element: receives into a View window
		if err != nil {
			return err
		}
		for run := range 30 {
			n := sizes[run%len(sizes)]
			off := run % 7
			for i := range n {
				sbuf[off+i] = float64(c.Rank()*1e6 + run*1e3 + i)
			}
			clear(rbuf)
			rm := sliceMem(TypeFloat64, rbuf[off:off+n])
			if run%2 == 1 {
				vm, _ := MemOf(strided)
				rm = vm.Window(off, n)
			}
			tag := 100 + run
			// A message of another tag first: the run's receive must not take it.
			if run%3 == 0 {
				if err := c.Send([]float64{-1}, peer, tag+1); err != nil {
					return err
				}
			}
			if err := StartMem(recv, rm, tag); err != nil {
				return err
			}
			if err := StartMem(send, sliceMem(TypeFloat64, sbuf[off:off+n]), tag); err != nil {
				return err
			}
			if err := WaitMem([]*Request{recv, send}); err != nil {
				return fmt.Errorf("run %d: %w", run, err)
			}
			for i := range n {
				at := off + i
				if run%2 == 1 {
					at = 2 * (off + i)
				}
				if want := float64(peer*1e6 + run*1e3 + i); rbuf[at] != want {
					return fmt.Errorf("run %d: element %d is %v, want %v", run, i, rbuf[at], want)
				}
			}
			if run%3 == 0 {
				other := make([]float64, 1)
				if _, err := c.Recv(other, peer, tag+1); err != nil || other[0] != -1 {
					return fmt.Errorf("run %d: the other message: %v %v", run, other, err)
				}
			}
			if err := checkInactive(recv); err != nil {
				return err
			}
		}
		// Errors: an active request, a request that is not a persistent one of memory, bad memory, a bad tag, a
		// type mismatch reported by WaitMem; the requests still work afterwards.
		if err := StartMem(recv, rfirst, 1); err != nil {
			return err
		}
		if err := StartMem(recv, rfirst, 1); !errors.Is(err, ErrRequest) {
			return fmt.Errorf("StartMem of an active request: %v", err)
		}
		if err := c.Send([]float64{7}, peer, 1); err != nil {
			return err
		}
		if err := WaitMem([]*Request{recv}); err != nil {
			return err
		}
		plain, err := c.SendInit([]float64{1}, peer, 1)
		if err != nil {
			return err
		}
		if err := StartMem(plain, first, 1); !errors.Is(err, ErrRequest) {
			return fmt.Errorf("StartMem of SendInit's request: %v", err)
		}
		if err := StartMem(send, first, -3); !errors.Is(err, ErrTag) {
			return fmt.Errorf("StartMem with tag -3: %v", err)
		}
		if err := StartMem(send, Mem{Type: TypeObject}, 1); !errors.Is(err, ErrBuffer) {
			return fmt.Errorf("StartMem of object memory: %v", err)
		}
		if err := checkInactive(send); err != nil {
			return fmt.Errorf("after the failed starts: %v", err)
		}
		ints := make([]int32, 1)
		if err := StartMem(recv, sliceMem(TypeInt32, ints), 2); err != nil {
			return err
		}
		if err := StartMem(send, first, 2); err != nil {
			return err
		}
		if err := WaitMem([]*Request{recv, send}); !errors.Is(err, ErrType) {
			return fmt.Errorf("float64 into int32: %v", err)
		}
		if err := StartMem(recv, rfirst, 3); err != nil {
			return err
		}
		if err := StartMem(send, first, 3); err != nil {
			return err
		}
		return WaitMem([]*Request{recv, send})
	})
	if err != nil {
		t.Fatal(err)
	}
}
