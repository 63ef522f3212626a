package gompj_test

import (
	"testing"

	"github.com/gompj/gompj"
)

// Benchmarks of a nonblocking collective's pure communication time (start, then wait at once: the overlap
// benchmarks' "Pure Comm." column) beside its blocking form, two ranks on one node, for profiles of the start and
// wait path (go test -bench Iallreduce -cpuprofile ...; valgrind --tool=callgrind on the test binary).

func BenchmarkIallreduce8B(b *testing.B) {
	collBench(b, 2, func(c *gompj.Comm, s, r []float64) error {
		q, err := c.Iallreduce(s, r, gompj.Sum)
		if err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	})
}

func BenchmarkAllreduce8B(b *testing.B) {
	collBench(b, 2, func(c *gompj.Comm, s, r []float64) error { return c.Allreduce(s, r, gompj.Sum) })
}

func BenchmarkIallreduce1MiBNp8(b *testing.B) {
	collBenchN(b, 8, 1<<17, func(c *gompj.Comm, s, r []float64) error {
		q, err := c.Iallreduce(s, r, gompj.Sum)
		if err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	})
}

func BenchmarkAllreduce1MiBNp8(b *testing.B) {
	collBenchN(b, 8, 1<<17, func(c *gompj.Comm, s, r []float64) error { return c.Allreduce(s, r, gompj.Sum) })
}

// 8-byte twins of the three collectives whose pure time is held to 1.25x of the blocking form, at np=2 and np=8:
//
//	go test -run '^$' -bench '[Aa]llreduce8B|[Aa]lltoall8B|[Bb]cast8B' .
//
// Instruction counts per call, load-independent: the test binary under valgrind --tool=callgrind with
// GOMAXPROCS=1 (waits then yield at once, so the ranks take turns and the count is the work, not the spinning) and
// GODEBUG=asyncpreemptoff=1 (callgrind cannot follow the preemption signal), e.g. -test.run '^$' -test.bench
// '^BenchmarkIalltoall8B$' -test.benchtime 20000x; divide by (20000+100)*np calls.

func BenchmarkIallreduce8BNp8(b *testing.B) { collBench(b, 8, iallreduce) }

func BenchmarkAllreduce8BNp8(b *testing.B) { collBench(b, 8, allreduce) }

func BenchmarkIalltoall8B(b *testing.B) { alltoallBench(b, 2, true) }

func BenchmarkAlltoall8B(b *testing.B) { alltoallBench(b, 2, false) }

func BenchmarkIalltoall8BNp8(b *testing.B) { alltoallBench(b, 8, true) }

func BenchmarkAlltoall8BNp8(b *testing.B) { alltoallBench(b, 8, false) }

func BenchmarkIbcast8B(b *testing.B) { collBench(b, 2, ibcast) }

func BenchmarkBcast8B(b *testing.B) { collBench(b, 2, bcast) }

func BenchmarkIbcast8BNp8(b *testing.B) { collBench(b, 8, ibcast) }

func BenchmarkBcast8BNp8(b *testing.B) { collBench(b, 8, bcast) }

func iallreduce(c *gompj.Comm, s, r []float64) error {
	q, err := c.Iallreduce(s, r, gompj.Sum)
	if err != nil {
		return err
	}
	_, err = q.Wait()
	return err
}

func allreduce(c *gompj.Comm, s, r []float64) error { return c.Allreduce(s, r, gompj.Sum) }

func ibcast(c *gompj.Comm, s, _ []float64) error {
	q, err := c.Ibcast(s, 0)
	if err != nil {
		return err
	}
	_, err = q.Wait()
	return err
}

func bcast(c *gompj.Comm, s, _ []float64) error { return c.Bcast(s, 0) }

// alltoallBench runs one alltoall of 8 bytes per pair (one float64 to every rank) per iteration on np ranks of one
// node, nonblocking (start, then wait at once) or blocking.
func alltoallBench(b *testing.B, np int, nonblocking bool) {
	collBenchN(b, np, np, func(c *gompj.Comm, s, r []float64) error { return alltoall(c, s, r, nonblocking) })
}

// 1 MiB blocks, two ranks: the shared-memory alltoall's copies, split between the members by claims.
func BenchmarkIalltoall1MiB(b *testing.B) {
	collBenchN(b, 2, 2<<17, func(c *gompj.Comm, s, r []float64) error { return alltoall(c, s, r, true) })
}

func BenchmarkAlltoall1MiB(b *testing.B) {
	collBenchN(b, 2, 2<<17, func(c *gompj.Comm, s, r []float64) error { return alltoall(c, s, r, false) })
}

func BenchmarkIbarrier(b *testing.B) {
	collBench(b, 2, func(c *gompj.Comm, _, _ []float64) error {
		q, err := c.Ibarrier()
		if err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	})
}

func BenchmarkBarrier(b *testing.B) {
	collBench(b, 2, func(c *gompj.Comm, _, _ []float64) error { return c.Barrier() })
}

// collBench runs one collective call per iteration on np ranks of one node, with one float64 in and out.
func collBench(b *testing.B, np int, call func(c *gompj.Comm, s, r []float64) error) {
	collBenchN(b, np, 1, call)
}

// collBenchN is collBench with n float64s in and out.
func collBenchN(b *testing.B, np, n int, call func(c *gompj.Comm, s, r []float64) error) {
	rankBench(b, np, func(c *gompj.Comm) (func() error, error) {
		s, r := make([]float64, n), make([]float64, n)
		return func() error { return call(c, s, r) }, nil
	})
}

// rankBench times b.N calls of once, which setup makes for each of np ranks of one node, after 100 untimed ones
// (caches, slots, pools warm).
func rankBench(b *testing.B, np int, setup func(c *gompj.Comm) (once func() error, err error)) {
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		once, err := setup(c)
		if err != nil {
			return err
		}
		for i := 0; i < 100; i++ {
			if err := once(); err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			b.ResetTimer()
		}
		for i := 0; i < b.N; i++ {
			if err := once(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// 1 MiB twins of Ibcast at np=2 (a pure-time cell of the nonblocking-collectives issue):
//
//	go test -run '^$' -bench '[Bb]cast1MiB' .
func BenchmarkIbcast1MiB(b *testing.B) { collBenchN(b, 2, 1<<17, ibcast) }

func BenchmarkBcast1MiB(b *testing.B) { collBenchN(b, 2, 1<<17, bcast) }

// BenchmarkAllreduceInit8B is the persistent twin of BenchmarkIallreduce8B: one Start and Wait per iteration of a
// request built once, so the two differ by what a nonblocking call costs to start (resolving its arguments, a new
// request) above the run of the same schedule.
func BenchmarkAllreduceInit8B(b *testing.B) {
	rankBench(b, 2, func(c *gompj.Comm) (func() error, error) {
		q, err := c.AllreduceInit(make([]float64, 1), make([]float64, 1), gompj.Sum)
		if err != nil {
			return nil, err
		}
		return func() error {
			if err := q.Start(); err != nil {
				return err
			}
			_, err := q.Wait()
			return err
		}, nil
	})
}
