package bench

import (
	"fmt"

	"github.com/gompj/gompj"
)

func init() {
	Register(&Benchmark{Name: "mbw_mr", Title: "OSU MPI Multiple Bandwidth / Message Rate Test", Column: "MB/s",
		Columns: []string{"MB/s", "Messages/s"}, MinRanks: 2, Sizes: Sizes(false, 4<<20),
		RunRow: func(c *gompj.Comm, size int, o *Options) ([]float64, error) {
			mbs, msgs, err := multiBandwidth(c, size, o)
			return []float64{mbs, msgs}, err
		},
		Note: func(np int, o *Options) string {
			return fmt.Sprintf("[ pairs: %d ] [ window size: %d ]", np/2, o.Window)
		}})
}

// multiBandwidth is osu_mbw_mr: with pairs = np/2, rank i < pairs sends windows of o.Window Isends to rank
// i+pairs, which posts a window of Irecvs and acknowledges each window with a 4-byte message; with an odd np the
// last rank only joins the collectives. Every pair runs at once. The figures, on rank 0, are OSU's: the pairs' bytes
// over the slowest sender's time in MB/s (1e6 bytes per second), and their messages per second.
func multiBandwidth(c *gompj.Comm, size int, o *Options) (mbs, msgs float64, err error) {
	pairs, me := c.Size()/2, c.Rank()
	iters, warmup := o.iterations(size, 100, 20)
	m := newMem(c, o)
	defer m.free(&err)
	var buf any = m.bytes(size) // boxed once (see boxing)
	if m.err != nil {
		return 0, 0, m.err
	}
	ack := buffer(4)
	reqs := make([]*gompj.Request, o.Window)
	step := func() error { return nil }
	switch {
	case me < pairs:
		peer := me + pairs
		step = func() error {
			for j := range reqs {
				var err error
				if reqs[j], err = c.Isend(buf, peer, tagData); err != nil {
					return err
				}
			}
			if err := gompj.Waitall(reqs...); err != nil {
				return err
			}
			_, err := c.Recv(ack, peer, tagAck)
			return err
		}
	case me < 2*pairs:
		peer := me - pairs
		step = func() error {
			for j := range reqs {
				var err error
				if reqs[j], err = c.Irecv(buf, peer, tagData); err != nil {
					return err
				}
			}
			if err := gompj.Waitall(reqs...); err != nil {
				return err
			}
			return c.Send(ack, peer, tagAck)
		}
	}
	// Warm up as the other point-to-point benchmarks do: warmup windows, and unless Options.Warmup was given, more
	// until minWarmup has passed on rank 0's clock, which rank 0 tells everyone after each round.
	more := []int32{0}
	start := gompj.Wtime()
	for {
		for i := 0; i < warmup; i++ {
			if err := step(); err != nil {
				return 0, 0, err
			}
		}
		if o.Warmup > 0 {
			break
		}
		if me == 0 {
			more[0] = 0
			if gompj.Wtime()-start < minWarmup {
				more[0] = 1
			}
		}
		if err := c.Bcast(more, 0); err != nil {
			return 0, 0, err
		}
		if more[0] == 0 {
			break
		}
	}
	if err := c.Barrier(); err != nil {
		return 0, 0, err
	}
	t0 := gompj.Wtime()
	for i := 0; i < iters; i++ {
		if err := step(); err != nil {
			return 0, 0, err
		}
	}
	t := []float64{0}
	if me < pairs {
		t[0] = gompj.Wtime() - t0
	}
	slowest := []float64{0}
	if err := c.Reduce(t, slowest, gompj.Max, 0); err != nil {
		return 0, 0, err
	}
	if me != 0 || slowest[0] <= 0 {
		return 0, 0, nil
	}
	n := float64(pairs) * float64(o.Window) * float64(iters)
	return n * float64(size) / slowest[0] / 1e6, n / slowest[0], nil
}
