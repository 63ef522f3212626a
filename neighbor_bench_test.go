package gompj_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/gompj/gompj"
)

// BenchmarkHalo2D is the halo exchange of `gompj bench halo` as a Go benchmark pair, all ranks goroutines of this
// process: every rank of a periodic 2D grid (DimsCreate, 4 ranks: 2x2, so each neighbour twice, once per
// direction) exchanges a block with each of its four neighbours, back to back, by
//
//	neighbor    NeighborAlltoall
//	persistent  NeighborAlltoallInit once, Start and Wait per exchange
//	isend       by hand: CartShift once, Irecv x4, Isend x4, Waitall per exchange
//	allgather   NeighborAllgather (the same edges, one block sent to all)
//
// Its figures are for comparing the forms at one size. For instruction counts, which the load does not change,
// run a fixed number of exchanges under callgrind and take the difference of two counts, e.g.
//
//	go test -c -o /tmp/gompj.test . &&
//	valgrind --tool=callgrind /tmp/gompj.test -test.run '^$' -test.bench 'Halo2D/np4/512B/neighbor$' -test.benchtime 2000x
//
// The collective table's variables choose the neighbourhood collectives' algorithm, e.g.
// GOMPJ_COLL_NEIGHBOR_ALLTOALL=hybrid GOMPJ_COLL_NEIGHBOR_ALLGATHER=hybrid for the shared-memory one.
func BenchmarkHalo2D(b *testing.B) {
	for _, np := range []int{1, 4} {
		for _, size := range []int{8, 512, 8 << 10, 128 << 10} {
			for _, mode := range []string{"neighbor", "persistent", "isend", "allgather"} {
				b.Run(fmt.Sprintf("np%d/%s/%s", np, sizeName(size), mode), func(b *testing.B) { halo2D(b, np, size, mode) })
			}
		}
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

func halo2D(b *testing.B, np, size int, mode string) {
	b.ReportAllocs()
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		dims, err := gompj.DimsCreate(c.Size(), []int{0, 0})
		if err != nil {
			return err
		}
		g, err := c.CartCreate(dims, []bool{true, true}, false)
		if err != nil {
			return err
		}
		defer g.Free()
		m := max(size/8, 1)
		send, recv := make([]float64, 4*m), make([]float64, 4*m)
		var sendAny, recvAny, oneAny any = send, recv, send[:m] // boxed once, as a loop reusing its buffers would
		var exchange func() error
		switch mode {
		case "neighbor":
			exchange = func() error { return g.NeighborAlltoall(sendAny, recvAny) }
		case "allgather":
			exchange = func() error { return g.NeighborAllgather(oneAny, recvAny) }
		case "persistent":
			pr, err := g.NeighborAlltoallInit(sendAny, recvAny)
			if err != nil {
				return err
			}
			defer pr.Free()
			exchange = func() error {
				if err := pr.Start(); err != nil {
					return err
				}
				_, err := pr.Wait()
				return err
			}
		case "isend":
			// What goes to the -1 neighbour of a dimension arrives there as the block from its +1 neighbour.
			var minus, plus [2]int
			for d := range 2 {
				if minus[d], plus[d], err = g.CartShift(d, 1); err != nil {
					return err
				}
			}
			var sb, rb [4]any
			for k := range 4 {
				sb[k], rb[k] = send[k*m:(k+1)*m], recv[k*m:(k+1)*m]
			}
			reqs := make([]*gompj.Request, 8)
			exchange = func() error {
				for d := range 2 {
					var err error
					if reqs[4*d], err = g.Irecv(rb[2*d], minus[d], 2*d+1); err != nil {
						return err
					}
					if reqs[4*d+1], err = g.Irecv(rb[2*d+1], plus[d], 2*d); err != nil {
						return err
					}
					if reqs[4*d+2], err = g.Isend(sb[2*d], minus[d], 2*d); err != nil {
						return err
					}
					if reqs[4*d+3], err = g.Isend(sb[2*d+1], plus[d], 2*d+1); err != nil {
						return err
					}
				}
				return gompj.Waitall(reqs...)
			}
		}
		for i := 0; i < 200; i++ { // warm up pools, chunks and plans
			if err := exchange(); err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			b.SetBytes(int64(2 * 4 * 8 * m))
			b.ResetTimer()
		}
		for i := 0; i < b.N; i++ {
			for k := range 4 {
				send[k*m] = float64(i*4 + k)
			}
			if err := exchange(); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			b.StopTimer()
		}
		// The last exchange's blocks arrived: on a 2x2 grid block j comes from the source's block j^1 (its
		// destination order), or its block 0 for the allgather.
		for j := range 4 {
			want := float64((b.N-1)*4 + (j ^ 1))
			if mode == "allgather" {
				want = float64((b.N - 1) * 4)
			}
			if recv[j*m] != want {
				return fmt.Errorf("%s: block %d starts with %v after %d exchanges, want %v", mode, j, recv[j*m], b.N, want)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
