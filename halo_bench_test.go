package gompj_test

import (
	"fmt"
	"testing"

	"github.com/gompj/gompj"
)

// BenchmarkHalo is a halo exchange on a ring of ranks (one node): each op, every rank sends a block to each
// neighbour and receives one from each, with persistent requests (SendInit/RecvInit once, Startall and Waitall
// per exchange) or with nonblocking ones (Irecv, Irecv, Isend, Isend and Waitall per exchange). The figures to
// compare are persistent versus nonblocking at the same ranks and size:
//
//	go test -run '^$' -bench 'BenchmarkHalo' -benchtime 2s -count 6 .
func BenchmarkHalo(b *testing.B) {
	for _, np := range []int{2, 4} {
		for _, n := range []int{1, 1 << 10, 32 << 10} { // float64 elements: 8 B, 8 KiB, 256 KiB (rendezvous)
			for _, mode := range []string{"persistent", "nonblocking"} {
				b.Run(fmt.Sprintf("np%d/%dB/%s", np, 8*n, mode), func(b *testing.B) { halo(b, np, n, mode == "persistent") })
			}
		}
	}
}

func halo(b *testing.B, np, n int, persistent bool) {
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		left, right := (c.Rank()+np-1)%np, (c.Rank()+1)%np
		toL, toR, fromL, fromR := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		var bufs [4]any = [4]any{fromL, fromR, toR, toL} // boxed once, as a loop reusing its buffers would
		reqs := make([]*gompj.Request, 4)
		if persistent {
			var err error
			if reqs[0], err = c.RecvInit(bufs[0], left, 0); err != nil {
				return err
			}
			if reqs[1], err = c.RecvInit(bufs[1], right, 1); err != nil {
				return err
			}
			if reqs[2], err = c.SendInit(bufs[2], right, 0); err != nil {
				return err
			}
			if reqs[3], err = c.SendInit(bufs[3], left, 1); err != nil {
				return err
			}
		}
		exchange := func() error {
			if persistent {
				if err := gompj.Startall(reqs...); err != nil {
					return err
				}
				return gompj.Waitall(reqs...)
			}
			var err error
			if reqs[0], err = c.Irecv(bufs[0], left, 0); err != nil {
				return err
			}
			if reqs[1], err = c.Irecv(bufs[1], right, 1); err != nil {
				return err
			}
			if reqs[2], err = c.Isend(bufs[2], right, 0); err != nil {
				return err
			}
			if reqs[3], err = c.Isend(bufs[3], left, 1); err != nil {
				return err
			}
			return gompj.Waitall(reqs...)
		}
		for i := 0; i < 100; i++ { // warm up pools and chunks
			if err := exchange(); err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			b.SetBytes(int64(2 * 8 * n))
			b.ResetTimer()
		}
		for i := 0; i < b.N; i++ {
			toL[0], toR[0] = float64(i), float64(i)
			if err := exchange(); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			b.StopTimer()
		}
		if fromL[0] != float64(b.N-1) || fromR[0] != float64(b.N-1) {
			return fmt.Errorf("halo: got %v %v after %d exchanges", fromL[0], fromR[0], b.N)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
