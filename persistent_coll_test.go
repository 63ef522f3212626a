package gompj_test

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	. "github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// Persistent collectives, restarted with new data: every collective is made once per communicator (in place too),
// then run again and again, all started at once by Startall or one by one by Start, the send buffers rewritten
// before each run, and every run compared with the blocking collective on the same data. On sub-communicators
// and the whole, in the three modes.
func TestPersistentCollectives(t *testing.T) {
	np, pureNP := 9, 4
	if testing.Short() || raceEnabled {
		np, pureNP = 5, 3
	}
	onenodeSubtest(t, persistentBody(t), Config{Ranks: np})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: np, Nodes: 3}, persistentBody(t)).Check(t)
	})
	t.Run("pure", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: pureNP, Nodes: pureNP}, persistentBody(t)).Check(t)
	})
}

// pCase is one persistent collective and its reference.
type pCase struct {
	name  string
	fill  func(run int)            // rewrites the send side for a run
	block func() error             // the blocking collective on the same data, into reference buffers
	init  func() (*Request, error) // the persistent collective, made once
	check func() error             // compares the last run with the reference
}

func persistentBody(t *testing.T) func(c *Comm) error {
	return func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		for _, k := range []int{np, (np + 1) / 2, 1} {
			color := 0
			if me >= k {
				color = 1
			}
			sub, err := c.Split(color, me)
			if err != nil {
				return err
			}
			for _, n := range []int{1, 7, 101, largeNB} { // 101: past a slot's entry, read from the buffers (direct)
				if n == largeNB && sub.Size() != np {
					continue
				}
				if err := persistentRuns(t, sub, n, rand.New(rand.NewSource(int64(me*31+k*7+n)))); err != nil {
					return fmt.Errorf("size %d, %d elements: %w", sub.Size(), n, err)
				}
			}
			if err := sub.Free(); err != nil {
				return err
			}
		}
		return persistentErrors(t, c)
	}
}

func persistentRuns(t *testing.T, c *Comm, n int, rng *rand.Rand) error {
	np, me := c.Size(), c.Rank()
	root := np / 2
	var cs []pCase
	vals := func(rank, run, n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = float64((rank*5+run*3+i)%11 + 1)
		}
		return s
	}
	{ // allreduce: send rewritten per run
		send, got, ref := make([]float64, n), make([]float64, n), make([]float64, n)
		cs = append(cs, pCase{"allreduce", func(run int) { copy(send, vals(me, run, n)) },
			func() error { return c.Allreduce(send, ref, Sum) },
			func() (*Request, error) { return c.AllreduceInit(send, got, Sum) },
			func() error { return same("allreduce", got, ref) }})
	}
	{ // allreduce in place, non-commutative: the buffer is the input of each run
		buf, ref := make([]Loc[int], n), make([]Loc[int], n)
		mk := func(run int) []Loc[int] {
			s := make([]Loc[int], n)
			for i := range s {
				s[i] = Loc[int]{Value: (me+run+i)%3 + 2, Index: me + run + i}
			}
			return s
		}
		var run0 int
		cs = append(cs, pCase{"allreduce in place affine", func(run int) { run0 = run; copy(buf, mk(run)) },
			func() error { copy(ref, mk(run0)); return c.Allreduce(InPlace, ref, affineOp) },
			func() (*Request, error) { return c.AllreduceInit(InPlace, buf, affineOp) },
			func() error { return same("allreduce in place affine", buf, ref) }})
	}
	{ // bcast
		buf, ref := make([]float64, n), make([]float64, n)
		var run0 int
		cs = append(cs, pCase{"bcast", func(run int) {
			run0 = run
			if me == root {
				copy(buf, vals(root, run, n))
			}
		}, func() error {
			if me == root {
				copy(ref, vals(root, run0, n))
			}
			return c.Bcast(ref, root)
		}, func() (*Request, error) { return c.BcastInit(buf, root) },
			func() error { return same("bcast", buf, ref) }})
	}
	{ // reduce, gather, scatter, allgather, alltoall, reduce_scatter_block, scan, exscan, barrier
		send := make([]float64, n)
		all := make([]float64, n*np)
		fill := func(run int) { copy(send, vals(me, run, n)); copy(all, vals(me+100, run, n*np)) }
		var rr, gr, rRef, gRef []float64
		if me == root {
			rr, gr, rRef, gRef = make([]float64, n), make([]float64, n*np), make([]float64, n), make([]float64, n*np)
		}
		sr, sRef := make([]float64, n), make([]float64, n)
		ag, agRef := make([]float64, n*np), make([]float64, n*np)
		at, atRef := make([]float64, n*np), make([]float64, n*np)
		rs, rsRef := make([]float64, n), make([]float64, n)
		sc, scRef := make([]float64, n), make([]float64, n)
		ex, exRef := make([]float64, n), make([]float64, n)
		cs = append(cs,
			pCase{"reduce", fill, func() error { return c.Reduce(send, rRef, Sum, root) },
				func() (*Request, error) { return c.ReduceInit(send, rr, Sum, root) },
				func() error { return same("reduce", rr, rRef) }},
			pCase{"gather", fill, func() error { return c.Gather(send, gRef, root) },
				func() (*Request, error) { return c.GatherInit(send, gr, root) },
				func() error { return same("gather", gr, gRef) }},
			pCase{"scatter", fill, func() error { return c.Scatter(all, sRef, root) },
				func() (*Request, error) { return c.ScatterInit(all, sr, root) },
				func() error { return same("scatter", sr, sRef) }},
			pCase{"allgather", fill, func() error { return c.Allgather(send, agRef) },
				func() (*Request, error) { return c.AllgatherInit(send, ag) },
				func() error { return same("allgather", ag, agRef) }},
			pCase{"alltoall", fill, func() error { return c.Alltoall(all, atRef) },
				func() (*Request, error) { return c.AlltoallInit(all, at) },
				func() error { return same("alltoall", at, atRef) }},
			pCase{"reduce_scatter_block", fill, func() error { return c.ReduceScatterBlock(all, rsRef, Sum) },
				func() (*Request, error) { return c.ReduceScatterBlockInit(all, rs, Sum) },
				func() error { return same("reduce_scatter_block", rs, rsRef) }},
			pCase{"scan", fill, func() error { return c.Scan(send, scRef, Sum) },
				func() (*Request, error) { return c.ScanInit(send, sc, Sum) },
				func() error { return same("scan", sc, scRef) }},
			pCase{"exscan", fill, func() error { return c.Exscan(send, exRef, Sum) },
				func() (*Request, error) { return c.ExscanInit(send, ex, Sum) },
				func() error { return same("exscan", ex, exRef) }},
			pCase{"barrier", func(int) {}, c.Barrier, c.BarrierInit, func() error { return nil }},
		)
		// the v variants, with uneven counts
		cnt, dsp := make([]int, np), make([]int, np)
		off := 0
		for i := range cnt {
			cnt[i] = (i + n) % 3
			dsp[i] = off
			off += cnt[i]
		}
		mine := make([]float64, cnt[me])
		vall := make([]float64, off)
		vfill := func(run int) { copy(mine, vals(me, run, cnt[me])); copy(vall, vals(me+50, run, off)) }
		var gv, gvRef []float64
		if me == root {
			gv, gvRef = make([]float64, off), make([]float64, off)
		}
		sv, svRef := make([]float64, cnt[me]), make([]float64, cnt[me])
		agv, agvRef := make([]float64, off), make([]float64, off)
		rsv, rsvRef := make([]float64, cnt[me]), make([]float64, cnt[me])
		cs = append(cs,
			pCase{"gatherv", vfill, func() error { return c.Gatherv(mine, gvRef, cnt, dsp, root) },
				func() (*Request, error) { return c.GathervInit(mine, gv, cnt, dsp, root) },
				func() error { return same("gatherv", gv, gvRef) }},
			pCase{"scatterv", vfill, func() error { return c.Scatterv(vall, cnt, dsp, svRef, root) },
				func() (*Request, error) { return c.ScattervInit(vall, cnt, dsp, sv, root) },
				func() error { return same("scatterv", sv, svRef) }},
			pCase{"allgatherv", vfill, func() error { return c.Allgatherv(mine, agvRef, cnt, dsp) },
				func() (*Request, error) { return c.AllgathervInit(mine, agv, cnt, dsp) },
				func() error { return same("allgatherv", agv, agvRef) }},
			pCase{"reduce_scatter", vfill, func() error { return c.ReduceScatter(vall, rsvRef, cnt, Sum) },
				func() (*Request, error) { return c.ReduceScatterInit(vall, rsv, cnt, Sum) },
				func() error { return same("reduce_scatter", rsv, rsvRef) }},
		)
		// alltoallv: everybody sends cnt[j] elements to rank j
		rc := make([]int, np)
		for j := range rc {
			rc[j] = cnt[me]
		}
		rd := make([]int, np)
		for j := 1; j < np; j++ {
			rd[j] = rd[j-1] + rc[j-1]
		}
		atvR, atvRRef := make([]float64, cnt[me]*np), make([]float64, cnt[me]*np)
		cs = append(cs, pCase{"alltoallv", vfill,
			func() error { return c.Alltoallv(vall, cnt, dsp, atvRRef, rc, rd) },
			func() (*Request, error) { return c.AlltoallvInit(vall, cnt, dsp, atvR, rc, rd) },
			func() error { return same("alltoallv", atvR, atvRRef) }})
	}
	reqs := make([]*Request, len(cs))
	for i, k := range cs {
		r, err := k.init()
		if err != nil {
			return fmt.Errorf("%s init: %w", k.name, err)
		}
		reqs[i] = r
	}
	for run := 0; run < 4; run++ {
		for _, k := range cs {
			k.fill(run)
		}
		// the blocking references first: the persistent runs then read the same send buffers
		for _, k := range cs {
			if err := k.block(); err != nil {
				return fmt.Errorf("blocking %s: %w", k.name, err)
			}
		}
		if run%2 == 0 {
			if err := Startall(reqs...); err != nil {
				return fmt.Errorf("run %d: Startall: %w", run, err)
			}
		} else {
			for i, r := range reqs {
				if err := r.Start(); err != nil {
					return fmt.Errorf("run %d: %s: Start: %w", run, cs[i].name, err)
				}
			}
		}
		// Start on an active request is ErrRequest, and changes nothing
		if err := reqs[0].Start(); !errors.Is(err, ErrRequest) {
			t.Errorf("np=%d rank=%d: Start of an active persistent allreduce: %v, want ErrRequest", np, me, err)
		}
		if err := complete(slices.Clone(reqs), rng); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		for _, k := range cs {
			if err := k.check(); err != nil {
				t.Errorf("np=%d rank=%d n=%d run %d: %v", np, me, n, run, err)
			}
		}
		// done and reported: inactive, so Wait returns at once
		if st, err := reqs[0].Wait(); err != nil || st != (Status{}) {
			t.Errorf("np=%d rank=%d: Wait on an inactive persistent request: %v, %v", np, me, st, err)
		}
	}
	for _, r := range reqs {
		if err := r.Free(); err != nil {
			return err
		}
	}
	if err := reqs[0].Start(); !errors.Is(err, ErrRequest) {
		t.Errorf("np=%d rank=%d: Start of a freed persistent collective: %v, want ErrRequest", np, me, err)
	}
	return nil
}

// persistentErrors: bad arguments fail at Init with the blocking collective's class.
func persistentErrors(t *testing.T, c *Comm) error {
	np, me := c.Size(), c.Rank()
	f := make([]float64, 4)
	for _, k := range []struct {
		name  string
		init  func() (*Request, error)
		class error
	}{
		{"BcastInit root", func() (*Request, error) { return c.BcastInit(f, -1) }, ErrRoot},
		{"AllreduceInit type", func() (*Request, error) { return c.AllreduceInit(f, make([]int8, 4), Sum) }, ErrType},
		{"AllreduceInit truncate", func() (*Request, error) { return c.AllreduceInit(f, make([]float64, 1), Sum) }, ErrTruncate},
		{"ReduceInit op", func() (*Request, error) { return c.ReduceInit(f, f, Bor, 0) }, ErrOp},
		{"AlltoallvInit counts", func() (*Request, error) { return c.AlltoallvInit(f, nil, nil, f, nil, nil) }, ErrArg},
	} {
		if r, err := k.init(); !errors.Is(err, k.class) || r != nil {
			t.Errorf("np=%d rank=%d %s: %v, want %v", np, me, k.name, err, k.class)
		}
	}
	return nil
}

// TestPersistentCollectiveStartAllocations: a Start of a persistent collective, and the Wait that completes it,
// allocate nothing at steady state, with the shared-memory algorithms, with message-based ones, and node-aware.
func TestPersistentCollectiveStartAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const runs = 100
	for _, algo := range []string{"", "recursive_doubling", "ring"} {
		for _, n := range []int{1, 101, 1 << 16} { // in a slot's entry, read from the buffers (direct), an operation
			algo, n := algo, n
			t.Run(fmt.Sprintf("%s/%d", algo, n), func(t *testing.T) {
				err := RunWith(Config{Ranks: 4}, func(c *Comm) error {
					if algo != "" {
						if err := c.ForceAlgorithm("iallreduce", algo); err != nil {
							return err
						}
						if err := c.ForceAlgorithm("ibcast", "binomial"); err != nil {
							return err
						}
					}
					send, recv, buf := make([]float64, n), make([]float64, n), make([]float64, n)
					ar, err := c.AllreduceInit(send, recv, Sum)
					if err != nil {
						return err
					}
					bc, err := c.BcastInit(buf, 0)
					if err != nil {
						return err
					}
					ba, err := c.BarrierInit() // on the barrier's count (nbc: gateStarter)
					if err != nil {
						return err
					}
					var runErr error
					step := func() {
						if err := Startall(ar, bc, ba); err != nil {
							runErr = err
						}
						if err := Waitall(ar, bc, ba); err != nil {
							runErr = err
						}
					}
					for i := 0; i < 10; i++ { // warm up: first runs grow lists that keep their memory
						step()
					}
					if c.Rank() != 0 {
						for i := 0; i < runs+1; i++ {
							step()
						}
						return runErr
					}
					allocs := testing.AllocsPerRun(runs, step)
					if runErr != nil {
						return runErr
					}
					if allocs > 0 {
						return fmt.Errorf("algorithm %q, %d doubles: %v allocations per Startall+Waitall", algo, n, allocs)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
