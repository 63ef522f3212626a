package bench

import (
	"fmt"
	"runtime"
	"time"

	"github.com/gompj/gompj"
)

// OSU-style overlap benchmarks of the nonblocking collectives (osu_ibarrier, osu_ibcast, osu_ireduce,
// osu_iallreduce, osu_igather, osu_iscatter, osu_iallgather, osu_ialltoall, osu_ireduce_scatter), measured as
// OSU measures them:
//
//   - pure communication: the collective started and waited for at once, averaged over the iterations;
//   - overall: the collective started, then a computation as long as the pure communication time with no gompj call
//     in it, then the wait; compute is how long the computation took;
//   - overlap = 100 * (1 - (overall - compute) / pure), clamped to 0..100: the share of the communication that the
//     computation hid.
//
// Each figure is averaged over the ranks. The computation is OSU's busy loop (-compute busy, the default: the rank
// spins on arithmetic, keeping its core) or a sleep (-compute idle: work offloaded to a GPU, or a rank waiting for
// I/O, leaves the cores free). Sizes and buffers as the blocking collective benchmarks (coll.go); an untimed
// barrier separates the iterations.

func init() {
	type overlapBench struct {
		name, coll, title string
		minSize           int
		setup             func(m *mem, size int) func() (*gompj.Request, error)
	}
	for _, b := range []overlapBench{
		{"ibarrier", "barrier", "OSU MPI Non-blocking Barrier Latency Test", 0, ibarrierSetup},
		{"ibcast", "bcast", "OSU MPI Non-blocking Broadcast Latency Test", 1, ibcastSetup},
		{"ireduce", "reduce", "OSU MPI Non-blocking Reduce Latency Test", 8, ireduceSetup},
		{"iallreduce", "allreduce", "OSU MPI Non-blocking Allreduce Latency Test", 8, iallreduceSetup},
		{"igather", "gather", "OSU MPI Non-blocking Gather Latency Test", 1, igatherSetup},
		{"iscatter", "scatter", "OSU MPI Non-blocking Scatter Latency Test", 1, iscatterSetup},
		{"iallgather", "allgather", "OSU MPI Non-blocking Allgather Latency Test", 1, iallgatherSetup},
		{"ialltoall", "alltoall", "OSU MPI Non-blocking All-to-All Latency Test", 1, ialltoallSetup},
		{"ireduce_scatter", "reduce_scatter", "OSU MPI Non-blocking Reduce_scatter Latency Test", 8, ireduceScatterSetup},
	} {
		b := b
		sizes := []int{0}
		if b.name != "ibarrier" {
			sizes = nil
			for n := b.minSize; n <= 1<<20; n *= 2 {
				sizes = append(sizes, n)
			}
		}
		Register(&Benchmark{Name: b.name, Title: b.title, Column: "Overall(us)", MinRanks: 1, Sizes: sizes,
			Average: true, Columns: []string{"Overall(us)", "Compute(us)", "Pure Comm.(us)", "Overlap(%)"},
			RunRow: func(c *gompj.Comm, size int, o *Options) (_ []float64, err error) {
				m := newMem(c, o)
				defer m.free(&err)
				start := b.setup(m, size)
				if m.err != nil {
					return nil, m.err
				}
				return overlapRow(c, b.coll, size, o, start)
			},
			Derive: func(row []float64) { row[3] = overlapPercent(row[0], row[1], row[2]) }})
	}
}

// overlapPercent is OSU's overlap from overall, compute and pure communication times.
func overlapPercent(overall, compute, pure float64) float64 {
	if pure <= 0 {
		return 0
	}
	return min(max(100*(1-(overall-compute)/pure), 0), 100)
}

// overlapRow measures one size: overall, compute and pure communication times in microseconds, and this rank's
// overlap (recomputed from the averages by Derive).
func overlapRow(c *gompj.Comm, coll string, size int, o *Options, start func() (*gompj.Request, error)) ([]float64, error) {
	if o.Algo != "" {
		if err := c.ForceAlgorithm("i"+coll, o.Algo); err != nil {
			return nil, err
		}
		defer c.ForceAlgorithm("i"+coll, "")
	}
	idle := false
	switch o.Compute {
	case "", "busy":
	case "idle":
		idle = true
	default:
		return nil, fmt.Errorf("-compute %q: want busy or idle", o.Compute)
	}
	iters, warmup := o.iterations(size, 1000, 100)
	// one iteration: start, compute for d (none if 0), wait; the times it took, in seconds
	once := func(d time.Duration) (total, comp float64, err error) {
		t0 := gompj.Wtime()
		r, err := start()
		if err != nil {
			return 0, 0, err
		}
		if d > 0 {
			tc := gompj.Wtime()
			compute(d, idle)
			comp = gompj.Wtime() - tc
		}
		if _, err := r.Wait(); err != nil {
			return 0, 0, err
		}
		return gompj.Wtime() - t0, comp, c.Barrier()
	}
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	// Warm up as the blocking collective benchmarks do (coll.go): the iterations asked for, and at least
	// minCollWarmup.
	if err := warmUp(c, o, warmup, func() (float64, error) { t, _, err := once(0); return t, err }); err != nil {
		return nil, err
	}
	var pure float64
	for i := 0; i < iters; i++ {
		t, _, err := once(0)
		if err != nil {
			return nil, err
		}
		pure += t
	}
	pure /= float64(iters)
	d := time.Duration(pure * 1e9)
	var overall, comp float64
	for i := 0; i < iters; i++ {
		t, tc, err := once(d)
		if err != nil {
			return nil, err
		}
		overall += t
		comp += tc
	}
	overall /= float64(iters)
	comp /= float64(iters)
	return []float64{overall * 1e6, comp * 1e6, pure * 1e6, overlapPercent(overall, comp, pure)}, nil
}

// compute takes d without calling gompj: busy, OSU's way, on arithmetic (checking the clock every few thousand
// operations); idle, asleep.
func compute(d time.Duration, idle bool) {
	if idle {
		time.Sleep(d)
		return
	}
	end := time.Now().Add(d)
	x := 1.0
	for {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 0.0000001
		}
		if !time.Now().Before(end) {
			break
		}
	}
	runtime.KeepAlive(x) // the arithmetic must happen
}

func ibarrierSetup(m *mem, size int) func() (*gompj.Request, error) { return m.c.Ibarrier }

func ibcastSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	buf := m.bytes(size)
	return func() (*gompj.Request, error) { return c.Ibcast(buf, 0) }
}

func ireduceSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	s, r := m.floats(floats(size)), m.floats(floats(size))
	return func() (*gompj.Request, error) { return c.Ireduce(s, r, gompj.Sum, 0) }
}

func iallreduceSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	s, r := m.floats(floats(size)), m.floats(floats(size))
	return func() (*gompj.Request, error) { return c.Iallreduce(s, r, gompj.Sum) }
}

func igatherSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	s := m.bytes(size)
	var r []byte
	if c.Rank() == 0 {
		r = m.bytes(size * c.Size())
	}
	return func() (*gompj.Request, error) { return c.Igather(s, r, 0) }
}

func iscatterSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	var s []byte
	if c.Rank() == 0 {
		s = m.bytes(size * c.Size())
	}
	r := m.bytes(size)
	return func() (*gompj.Request, error) { return c.Iscatter(s, r, 0) }
}

func iallgatherSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	s, r := m.bytes(size), m.bytes(size*c.Size())
	return func() (*gompj.Request, error) { return c.Iallgather(s, r) }
}

func ialltoallSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	s, r := m.bytes(size*c.Size()), m.bytes(size*c.Size())
	return func() (*gompj.Request, error) { return c.Ialltoall(s, r) }
}

func ireduceScatterSetup(m *mem, size int) func() (*gompj.Request, error) {
	c := m.c
	n := c.Size()
	per := max(floats(size)/n, 1)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = per
	}
	s, r := m.floats(per*n), m.floats(per)
	return func() (*gompj.Request, error) { return c.IreduceScatter(s, r, counts, gompj.Sum) }
}
