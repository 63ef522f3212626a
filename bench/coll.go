package bench

import (
	"sort"

	"github.com/gompj/gompj"
)

// OSU-style collective benchmarks (osu_barrier, osu_bcast, osu_reduce, osu_allreduce, osu_gather, osu_scatter,
// osu_allgather, osu_alltoall, osu_alltoallv, osu_reduce_scatter): each iteration times one call on every rank,
// followed by an untimed barrier, as the OSU suite does; the figure is the mean latency per call in microseconds,
// averaged over the ranks. Reductions sum float64s (sizes from 8 bytes); the others move bytes. For gather,
// scatter, allgather, alltoall and alltoallv (equal counts, as OSU's) the size is one rank's block; for
// reduce_scatter it is the whole vector.

func init() {
	type collBench struct {
		name, coll, title string
		minSize           int
		setup             func(m *mem, size int) func() error
	}
	for _, b := range []collBench{
		{"barrier", "barrier", "OSU MPI Barrier Latency Test", 0, barrierSetup},
		{"bcast", "bcast", "OSU MPI Broadcast Latency Test", 1, bcastSetup},
		{"reduce", "reduce", "OSU MPI Reduce Latency Test", 8, reduceSetup},
		{"allreduce", "allreduce", "OSU MPI Allreduce Latency Test", 8, allreduceSetup},
		{"gather", "gather", "OSU MPI Gather Latency Test", 1, gatherSetup},
		{"scatter", "scatter", "OSU MPI Scatter Latency Test", 1, scatterSetup},
		{"allgather", "allgather", "OSU MPI Allgather Latency Test", 1, allgatherSetup},
		{"alltoall", "alltoall", "OSU MPI All-to-All Personalized Exchange Latency Test", 1, alltoallSetup},
		{"alltoallv", "alltoallv", "OSU MPI All-to-Allv Personalized Exchange Latency Test", 1, alltoallvSetup},
		{"reduce_scatter", "reduce_scatter", "OSU MPI Reduce_scatter Latency Test", 8, reduceScatterSetup},
	} {
		b := b
		sizes := []int{0}
		if b.name != "barrier" {
			sizes = nil
			for n := b.minSize; n <= 1<<20; n *= 2 {
				sizes = append(sizes, n)
			}
		}
		Register(&Benchmark{Name: b.name, Title: b.title, Column: "Avg Latency(us)", MinRanks: 1, Sizes: sizes,
			Average: true, Run: func(c *gompj.Comm, size int, o *Options) (float64, error) {
				return collLatency(c, b.coll, size, o, b.setup)
			}})
	}
}

func collLatency(c *gompj.Comm, coll string, size int, o *Options, setup func(*mem, int) func() error) (t float64, err error) {
	if o.Algo != "" {
		if err := c.ForceAlgorithm(coll, o.Algo); err != nil {
			return 0, err
		}
		defer c.ForceAlgorithm(coll, "")
	}
	iters, warmup := o.iterations(size, 1000, 100)
	m := newMem(c, o)
	defer m.free(&err)
	call := setup(m, size)
	if m.err != nil {
		return 0, m.err
	}
	once := timedCall(c, call)
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	if err := warmUp(c, o, warmup, once); err != nil {
		return 0, err
	}
	return meanOf(once, iters)
}

// meanOf makes n timed calls and returns their mean in microseconds.
func meanOf(once func() (float64, error), n int) (float64, error) {
	var total float64
	for i := 0; i < n; i++ {
		t, err := once()
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total * 1e6 / float64(n), nil
}

// timedCall returns a function that times one call and then waits in an untimed barrier, as OSU's loops do.
func timedCall(c *gompj.Comm, call func() error) func() (float64, error) {
	return func() (float64, error) {
		t0 := gompj.Wtime()
		if err := call(); err != nil {
			return 0, err
		}
		t := gompj.Wtime() - t0
		return t, c.Barrier()
	}
}

// warmUp makes the given number of calls, and by default goes on for at least minCollWarmup (rank 0's clock
// decides, so that every rank makes the same calls): a Go process's runtime is busy for its first milliseconds
// (sysmon polls every 20 us until it finds nothing to do, and each poll takes a core from a spinning rank for tens
// of microseconds), and its heap grows for longer (see minCollWarmup); both outlast a thousand calls of a small
// collective.
func warmUp(c *gompj.Comm, o *Options, warmup int, once func() (float64, error)) error {
	start := gompj.Wtime()
	for {
		for i := 0; i < warmup; i++ {
			if _, err := once(); err != nil {
				return err
			}
		}
		more := []byte{0}
		if o.Warmup == 0 && c.Rank() == 0 && gompj.Wtime()-start < minCollWarmup {
			more[0] = 1
		}
		if err := c.Bcast(more, 0); err != nil {
			return err
		}
		if more[0] == 0 {
			return nil
		}
	}
}

// interleavedLatencies times several ways of doing the same thing against each other, fairly on a machine whose
// speed drifts: after warming each up, it runs them in turn, a batch of calls each (after an eighth as many
// untimed, to warm the caches again), for rounds of batches, and returns each one's median batch mean in
// microseconds. Timed one after the other, as collLatency would, each met a different state of the machine; so a
// drift falls on all of them alike, and the median drops a batch that a burst of other work slowed. Every rank
// makes the same calls.
func interleavedLatencies(c *gompj.Comm, size int, o *Options, calls ...func() error) ([]float64, error) {
	iters, warmup := o.iterations(size, 1000, 100)
	batch := max(iters/interleaveRounds, 1)
	onces := make([]func() (float64, error), len(calls))
	for i, call := range calls {
		onces[i] = timedCall(c, call)
	}
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	for _, once := range onces {
		if err := warmUp(c, o, warmup, once); err != nil {
			return nil, err
		}
	}
	return interleaved(len(onces), func(i int) (float64, error) {
		if _, err := meanOf(onces[i], max(batch/8, 1)); err != nil { // untimed: caches warm again after the others
			return 0, err
		}
		return meanOf(onces[i], batch)
	})
}

// interleaveRounds is how many batches of each way interleavedLatencies and interleavedPingPongs time.
const interleaveRounds = 15

// interleaved runs batch(0), ..., batch(n-1) in turn for interleaveRounds rounds and returns the median figure of
// each.
func interleaved(n int, batch func(i int) (float64, error)) ([]float64, error) {
	figs := make([][]float64, n)
	for r := 0; r < interleaveRounds; r++ {
		for i := range n {
			f, err := batch(i)
			if err != nil {
				return nil, err
			}
			figs[i] = append(figs[i], f)
		}
	}
	out := make([]float64, n)
	for i, f := range figs {
		sort.Float64s(f)
		out[i] = f[len(f)/2]
	}
	return out, nil
}

// minWarmup is the shortest default warm-up of a point-to-point benchmark, in seconds.
const minWarmup = 0.02

// minCollWarmup is the shortest default warm-up of a collective benchmark, blocking or nonblocking, in seconds. A
// fresh node process's heap grows for its first tens of thousands of calls that allocate (a nonblocking
// collective's requests: 931 bytes a call between node processes), and until its second collection every
// allocation lands on fresh pages, which this VM faults in at 13 us each. An 8-byte Iallreduce between two node
// processes took 10-12 us a call for its first 10 000 calls (180 ms), 2-4 us after (Allreduce: 3.0, then 2.0);
// `bench iallreduce -np 2 -nodes 2 -sizes 8` read 11.5-13.1 us after 20 ms of warm-up, 2.7-5.7 after 20 000 calls;
// with 250 ms, 2.0-2.7 us against 9.3-18.0 with 20 ms (3 alternated pairs).
const minCollWarmup = 0.25

func floats(size int) int { return max(size/8, 1) }

func barrierSetup(m *mem, size int) func() error { return m.c.Barrier }

func bcastSetup(m *mem, size int) func() error {
	c := m.c
	buf := m.bytes(size)
	return func() error { return c.Bcast(buf, 0) }
}

func reduceSetup(m *mem, size int) func() error {
	c := m.c
	s, r := m.floats(floats(size)), m.floats(floats(size))
	return func() error { return c.Reduce(s, r, gompj.Sum, 0) }
}

func allreduceSetup(m *mem, size int) func() error {
	c := m.c
	s, r := m.floats(floats(size)), m.floats(floats(size))
	return func() error { return c.Allreduce(s, r, gompj.Sum) }
}

func gatherSetup(m *mem, size int) func() error {
	c := m.c
	s := m.bytes(size)
	var r []byte
	if c.Rank() == 0 {
		r = m.bytes(size * c.Size())
	}
	return func() error { return c.Gather(s, r, 0) }
}

func scatterSetup(m *mem, size int) func() error {
	c := m.c
	var s []byte
	if c.Rank() == 0 {
		s = m.bytes(size * c.Size())
	}
	r := m.bytes(size)
	return func() error { return c.Scatter(s, r, 0) }
}

func allgatherSetup(m *mem, size int) func() error {
	c := m.c
	s, r := m.bytes(size), m.bytes(size*c.Size())
	return func() error { return c.Allgather(s, r) }
}

func alltoallSetup(m *mem, size int) func() error {
	c := m.c
	s, r := m.bytes(size*c.Size()), m.bytes(size*c.Size())
	return func() error { return c.Alltoall(s, r) }
}

func alltoallvSetup(m *mem, size int) func() error {
	c := m.c
	n := c.Size()
	s, r := m.bytes(size*n), m.bytes(size*n)
	counts, displs := make([]int, n), make([]int, n)
	for i := range counts {
		counts[i], displs[i] = size, i*size
	}
	return func() error { return c.Alltoallv(s, counts, displs, r, counts, displs) }
}

func reduceScatterSetup(m *mem, size int) func() error {
	c := m.c
	n := c.Size()
	per := max(floats(size)/n, 1)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = per
	}
	s, r := m.floats(per*n), m.floats(per)
	return func() error { return c.ReduceScatter(s, r, counts, gompj.Sum) }
}
