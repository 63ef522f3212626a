package bench

import (
	"gompj"
)

func init() {
	Register(&Benchmark{Name: "latency", Title: "OSU MPI Latency Test", Column: "Latency (us)", MinRanks: 2,
		Sizes: Sizes(true, 4<<20), Run: latency})
	// latency-any is latency with rank 0 receiving from AnySource: across nodes it shows that a wildcard receive
	// costs what a specific one does (the remote message lands in the same queues; nothing polls).
	Register(&Benchmark{Name: "latency-any", Title: "OSU MPI Latency Test (AnySource receive on rank 0)",
		Column: "Latency (us)", MinRanks: 2, Sizes: Sizes(true, 4<<20),
		Run: func(c *gompj.Comm, size int, o *Options) (float64, error) {
			return pingpong(c, size, o, gompj.AnySource)
		}})
	Register(&Benchmark{Name: "bw", Title: "OSU MPI Bandwidth Test", Column: "Bandwidth (MB/s)", MinRanks: 2,
		Sizes: Sizes(false, 4<<20), Run: bandwidth})
	Register(&Benchmark{Name: "bibw", Title: "OSU MPI Bi-Directional Bandwidth Test", Column: "Bandwidth (MB/s)",
		MinRanks: 2, Sizes: Sizes(false, 4<<20), Run: bibandwidth})
}

const tagData, tagAck = 1, 2

// latency is osu_latency: ranks 0 and 1 ping-pong; the figure is half the round trip in microseconds.
func latency(c *gompj.Comm, size int, o *Options) (float64, error) { return pingpong(c, size, o, 1) }

// pingpong times the ping-pong with rank 0 receiving from source (1, or AnySource).
func pingpong(c *gompj.Comm, size int, o *Options, source int) (float64, error) {
	iters, warmup := o.iterations(size, 10000, 1000)
	sbuf, rbuf := make([]byte, size), make([]byte, size)
	var t0 float64
	for i := 0; i < iters+warmup; i++ {
		if i == warmup {
			t0 = gompj.Wtime()
		}
		switch c.Rank() {
		case 0:
			if err := c.Send(sbuf, 1, tagData); err != nil {
				return 0, err
			}
			if _, err := c.Recv(rbuf, source, tagData); err != nil {
				return 0, err
			}
		case 1:
			if _, err := c.Recv(rbuf, 0, tagData); err != nil {
				return 0, err
			}
			if err := c.Send(sbuf, 0, tagData); err != nil {
				return 0, err
			}
		}
	}
	return (gompj.Wtime() - t0) * 1e6 / float64(2*iters), nil
}

// bandwidth is osu_bw: rank 0 posts a window of Isends from one buffer, rank 1 a window of Irecvs into one
// buffer, then rank 1 acknowledges; MB/s is 1e6 bytes per second.
func bandwidth(c *gompj.Comm, size int, o *Options) (float64, error) {
	iters, warmup := o.iterations(size, 100, 20)
	buf := make([]byte, size)
	ack := make([]byte, 4)
	reqs := make([]*gompj.Request, o.Window)
	var t0 float64
	for i := 0; i < iters+warmup; i++ {
		if i == warmup {
			t0 = gompj.Wtime()
		}
		switch c.Rank() {
		case 0:
			for j := range reqs {
				r, err := c.Isend(buf, 1, tagData)
				if err != nil {
					return 0, err
				}
				reqs[j] = r
			}
			if err := gompj.Waitall(reqs...); err != nil {
				return 0, err
			}
			if _, err := c.Recv(ack, 1, tagAck); err != nil {
				return 0, err
			}
		case 1:
			for j := range reqs {
				r, err := c.Irecv(buf, 0, tagData)
				if err != nil {
					return 0, err
				}
				reqs[j] = r
			}
			if err := gompj.Waitall(reqs...); err != nil {
				return 0, err
			}
			if err := c.Send(ack, 0, tagAck); err != nil {
				return 0, err
			}
		}
	}
	t := gompj.Wtime() - t0
	return float64(size) * float64(o.Window) * float64(iters) / t / 1e6, nil
}

// bibandwidth is osu_bibw: both ranks post a window of Irecvs and a window of Isends at once.
func bibandwidth(c *gompj.Comm, size int, o *Options) (float64, error) {
	iters, warmup := o.iterations(size, 100, 20)
	sbuf, rbuf := make([]byte, size), make([]byte, size)
	reqs := make([]*gompj.Request, 2*o.Window)
	peer := 1 - c.Rank()
	var t0 float64
	for i := 0; i < iters+warmup; i++ {
		if i == warmup {
			t0 = gompj.Wtime()
		}
		if c.Rank() > 1 {
			continue
		}
		for j := 0; j < o.Window; j++ {
			r, err := c.Irecv(rbuf, peer, tagData)
			if err != nil {
				return 0, err
			}
			reqs[j] = r
		}
		for j := 0; j < o.Window; j++ {
			r, err := c.Isend(sbuf, peer, tagData)
			if err != nil {
				return 0, err
			}
			reqs[o.Window+j] = r
		}
		if err := gompj.Waitall(reqs...); err != nil {
			return 0, err
		}
	}
	t := gompj.Wtime() - t0
	return 2 * float64(size) * float64(o.Window) * float64(iters) / t / 1e6, nil
}
