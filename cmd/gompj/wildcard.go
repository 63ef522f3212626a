package main

import (
	"gompj"
	"gompj/bench"
)

// latency-any is osu_latency with rank 0 receiving from AnySource: across nodes it shows that a wildcard receive
// costs the same as a specific one (the remote message lands in the same queues; nothing polls).
func init() {
	bench.Register(&bench.Benchmark{Name: "latency-any", Title: "OSU MPI Latency Test (AnySource receive on rank 0)",
		Column: "Latency (us)", MinRanks: 2, Sizes: bench.Sizes(true, 4<<20), Run: latencyAny})
}

func latencyAny(c *gompj.Comm, size int, o *bench.Options) (float64, error) {
	iters, warmup := 10000, 1000
	if size > 8192 {
		iters, warmup = 1000, 100
	}
	if o.Iters > 0 {
		iters = o.Iters
	}
	if o.Warmup > 0 {
		warmup = o.Warmup
	}
	sbuf, rbuf := make([]byte, size), make([]byte, size)
	var t0 float64
	for i := 0; i < iters+warmup; i++ {
		if i == warmup {
			t0 = gompj.Wtime()
		}
		switch c.Rank() {
		case 0:
			if err := c.Send(sbuf, 1, 1); err != nil {
				return 0, err
			}
			if _, err := c.Recv(rbuf, gompj.AnySource, 1); err != nil {
				return 0, err
			}
		case 1:
			if _, err := c.Recv(rbuf, 0, 1); err != nil {
				return 0, err
			}
			if err := c.Send(sbuf, 0, 1); err != nil {
				return 0, err
			}
		}
	}
	return (gompj.Wtime() - t0) * 1e6 / float64(2*iters), nil
}
