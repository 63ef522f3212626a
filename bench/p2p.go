package bench

import (
	"github.com/gompj/gompj"
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

const tagData, tagAck, tagWarm = 1, 2, 3

// p2pLoop runs step on ranks 0 and 1: warmup times, and unless Options.Warmup was given, again until minWarmup
// has passed on rank 0's clock (rank 0 tells rank 1 after each round, so both make the same calls), then iters
// times. It returns the seconds the last iters steps took. Other ranks take no part and return 0.
func p2pLoop(c *gompj.Comm, o *Options, iters, warmup int, step func() error) (float64, error) {
	if c.Rank() > 1 {
		return 0, nil
	}
	more := buffer(1)
	start := gompj.Wtime()
	for {
		for i := 0; i < warmup; i++ {
			if err := step(); err != nil {
				return 0, err
			}
		}
		if o.Warmup > 0 {
			break
		}
		var err error
		if c.Rank() == 0 {
			more[0] = 0
			if gompj.Wtime()-start < minWarmup {
				more[0] = 1
			}
			err = c.Send(more, 1, tagWarm)
		} else {
			_, err = c.Recv(more, 0, tagWarm)
		}
		if err != nil {
			return 0, err
		}
		if more[0] == 0 {
			break
		}
	}
	t0 := gompj.Wtime()
	for i := 0; i < iters; i++ {
		if err := step(); err != nil {
			return 0, err
		}
	}
	return gompj.Wtime() - t0, nil
}

// latency is osu_latency: ranks 0 and 1 ping-pong; the figure is half the round trip in microseconds.
func latency(c *gompj.Comm, size int, o *Options) (float64, error) { return pingpong(c, size, o, 1) }

// pingpong times the ping-pong with rank 0 receiving from source (1, or AnySource).
func pingpong(c *gompj.Comm, size int, o *Options, source int) (_ float64, err error) {
	iters, warmup := o.iterations(size, 10000, 1000)
	m := newMem(c, o)
	defer m.free(&err)
	sbuf, rbuf := m.bytes(size), m.bytes(size)
	if m.err != nil {
		return 0, m.err
	}
	t, err := p2pLoop(c, o, iters, warmup, func() error {
		if c.Rank() == 0 {
			if err := c.Send(sbuf, 1, tagData); err != nil {
				return err
			}
			_, err := c.Recv(rbuf, source, tagData)
			return err
		}
		if _, err := c.Recv(rbuf, 0, tagData); err != nil {
			return err
		}
		return c.Send(sbuf, 0, tagData)
	})
	return t * 1e6 / float64(2*iters), err
}

// bandwidth is osu_bw: rank 0 posts a window of Isends from one buffer, rank 1 a window of Irecvs into one
// buffer, then rank 1 acknowledges; MB/s is 1e6 bytes per second.
func bandwidth(c *gompj.Comm, size int, o *Options) (_ float64, err error) {
	iters, warmup := o.iterations(size, 100, 20)
	m := newMem(c, o)
	defer m.free(&err)
	var buf any = m.bytes(size) // boxed once (see boxing)
	if m.err != nil {
		return 0, m.err
	}
	ack := buffer(4)
	reqs := make([]*gompj.Request, o.Window)
	t, err := p2pLoop(c, o, iters, warmup, func() error {
		for j := range reqs {
			var err error
			if c.Rank() == 0 {
				reqs[j], err = c.Isend(buf, 1, tagData)
			} else {
				reqs[j], err = c.Irecv(buf, 0, tagData)
			}
			if err != nil {
				return err
			}
		}
		if err := gompj.Waitall(reqs...); err != nil {
			return err
		}
		if c.Rank() == 0 {
			_, err := c.Recv(ack, 1, tagAck)
			return err
		}
		return c.Send(ack, 0, tagAck)
	})
	return rate(size*o.Window*iters, t), err
}

// bibandwidth is osu_bibw: both ranks post a window of Irecvs and a window of Isends at once.
func bibandwidth(c *gompj.Comm, size int, o *Options) (_ float64, err error) {
	iters, warmup := o.iterations(size, 100, 20)
	m := newMem(c, o)
	defer m.free(&err)
	var sbuf, rbuf any = m.bytes(size), m.bytes(size) // boxed once (see boxing)
	if m.err != nil {
		return 0, m.err
	}
	reqs := make([]*gompj.Request, 2*o.Window)
	peer := 1 - c.Rank()
	t, err := p2pLoop(c, o, iters, warmup, func() error {
		for j := 0; j < o.Window; j++ {
			r, err := c.Irecv(rbuf, peer, tagData)
			if err != nil {
				return err
			}
			reqs[j] = r
		}
		for j := 0; j < o.Window; j++ {
			r, err := c.Isend(sbuf, peer, tagData)
			if err != nil {
				return err
			}
			reqs[o.Window+j] = r
		}
		return gompj.Waitall(reqs...)
	})
	return rate(2*size*o.Window*iters, t), err
}

// boxing: Irecv keeps an object receive's target until it completes, so its interface argument escapes, and
// boxing a slice into it at every call allocates the slice header. The bandwidth loops therefore box their buffers
// once, as a program reusing its buffers would, and as the C benchmarks pass the same pointer every time
// (TestBandwidthAllocations).

// rate is bytes over seconds in MB/s (1e6 bytes per second), 0 for a rank that timed nothing.
func rate(bytes int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / seconds / 1e6
}
