package gompj_test

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/gompj/gompj"
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/internal/harness"
	"github.com/gompj/gompj/ranks"
)

// The nonblocking collectives against the blocking ones, in the harness's three modes, one job per mode with every
// case inside it (CI's time): every collective, on sub-communicators of every size from 1 to the job's (and, beside
// each, the communicator of the other ranks, running its own cases at the same time), at several roots, with 0, 1
// and 7 elements and, on the whole communicator, a vector above every protocol switch (the intra-node and network
// eager limits, the shared-memory inline size and reduction chunk, the table's thresholds); in place where MPI
// allows it; objects. Each batch starts all its nonblocking collectives back to back, with point-to-point
// requests among them, and each rank completes them in an order of its own (Waitall, Waitany, Testall, Wait in a
// random order, Test loops). Then every algorithm of every collective is forced in turn, and bad arguments must
// fail at the start with the blocking collective's error class while the job goes on.
func TestNonblockingCollectives(t *testing.T) {
	np, nodesNP, pureNP := 17, 17, 6
	if testing.Short() || raceEnabled {
		np, nodesNP, pureNP = 7, 7, 3
	}
	onenodeSubtest(t, nbBody(t, true), Config{Ranks: np})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: nodesNP, Nodes: 3}, nbBody(t, true)).Check(t)
	})
	t.Run("pure", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: pureNP, Nodes: pureNP}, nbBody(t, true)).Check(t)
	})
	// Overlap mode (GOMPJ_OVERLAP=1): workers start the calls that cross node processes, over the host's shared
	// memory and over TCP.
	t.Run("overlap", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 5, Nodes: 2, Env: []string{env.Overlap.Name + "=1"}},
			nbBody(t, true)).Check(t)
	})
	t.Run("overlap-tcp", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 3, Env: []string{env.Overlap.Name + "=1", env.HostSHM.Name + "=0"}},
			nbBody(t, true)).Check(t)
	})
}

// TestNonblockingNoAsyncProgress: with the worker pool off (GOMPJ_ASYNC_PROGRESS=0) the collectives move on only
// in the calls of their ranks, and still complete in any order.
func TestNonblockingNoAsyncProgress(t *testing.T) {
	onenodeSubtest(t, nbBody(t, false), Config{Ranks: 5, NoAsyncProgress: true})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 2, Env: []string{env.AsyncProgress.Name + "=0"}},
			nbBody(t, false)).Check(t)
	})
}

const tagNB = 77

func nbBody(t *testing.T, full bool) func(c *Comm) error {
	return func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		sizes := make([]int, 0, np)
		for k := 1; k <= np; k++ {
			sizes = append(sizes, k)
		}
		if !full {
			sizes = []int{np}
		}
		for _, k := range sizes {
			color := 0
			if me >= k {
				color = 1
			}
			sub, err := c.Split(color, np-me) // reversed order: sub-communicator ranks differ from world ranks
			if err != nil {
				return err
			}
			counts := []int{0, 1, 7}
			if sub.Size() == np {
				counts = append(counts, largeNB)
			}
			for i, n := range counts {
				if err := nbBatch(t, sub, n, i, rand.New(rand.NewSource(int64(me*1000+k*10+i)))); err != nil {
					return err
				}
			}
			if err := sub.Free(); err != nil {
				return err
			}
		}
		if err := nbAlgorithms(t, c); err != nil {
			return err
		}
		return nbErrors(t, c)
	}
}

// largeNB is a float64 count above every switch: 128 KiB network eager limit, 64 KiB intra-node eager limit,
// 16 KiB shared-memory reduction chunks, inline contributions, the table's size thresholds.
const largeNB = (128<<10)/8 + 3

// nbCase is one collective: the blocking call into reference buffers, the nonblocking one into its own, and a
// comparison of the two.
type nbCase struct {
	name  string
	block func() error
	start func() (*Request, error)
	check func() error
}

type nbVals struct {
	c          *Comm
	n, np, me  int
	salt, root int
}

func (v nbVals) floats(rank, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64((rank*7+i*3+v.salt)%13 + 1)
	}
	return s
}

func (v nbVals) locs(rank, n int) []Loc[int] {
	s := make([]Loc[int], n)
	for i := range s {
		s[i] = Loc[int]{Value: (rank+i+v.salt)%3 + 2, Index: rank*5 + i}
	}
	return s
}

func same[T comparable](what string, got, want []T) error {
	if !slices.Equal(got, want) {
		for i := range want {
			if i >= len(got) || got[i] != want[i] {
				return fmt.Errorf("%s: element %d of %d: got %v, want %v", what, i, len(want), got[min(i, len(got)-1)], want[i])
			}
		}
		return fmt.Errorf("%s: length %d, want %d", what, len(got), len(want))
	}
	return nil
}

type objVal struct {
	Name string
	Vals []int
}

// nbCases returns the batch's cases on c with n elements (root chosen by the batch).
func nbCases(v nbVals) []nbCase {
	c, n, np, me, root := v.c, v.n, v.np, v.me, v.root
	var cs []nbCase
	add := func(name string, block func() error, start func() (*Request, error), check func() error) {
		cs = append(cs, nbCase{name, block, start, check})
	}
	add("barrier", c.Barrier, c.Ibarrier, func() error { return nil })
	{ // bcast
		ref, got := make([]float64, n), make([]float64, n)
		if me == root {
			ref, got = v.floats(root, n), v.floats(root, n)
		}
		add("bcast", func() error { return c.Bcast(ref, root) }, func() (*Request, error) { return c.Ibcast(got, root) },
			func() error { return same("bcast", got, ref) })
	}
	for _, red := range []struct {
		name string
		op   Op
	}{{"sum", Sum}, {"affine", affineOp}} {
		var mk func(rank, n int) any
		var cmp func(what string, a, b any) error
		var alloc func(n int) any
		if red.name == "sum" {
			mk = func(r, n int) any { return v.floats(r, n) }
			alloc = func(n int) any { return make([]float64, n) }
			cmp = func(what string, a, b any) error { return same(what, a.([]float64), b.([]float64)) }
		} else {
			mk = func(r, n int) any { return v.locs(r, n) }
			alloc = func(n int) any { return make([]Loc[int], n) }
			cmp = func(what string, a, b any) error { return same(what, a.([]Loc[int]), b.([]Loc[int])) }
		}
		op := red.op
		{
			ref, got := alloc(n), alloc(n)
			add("allreduce "+red.name, func() error { return c.Allreduce(mk(me, n), ref, op) },
				func() (*Request, error) { return c.Iallreduce(mk(me, n), got, op) },
				func() error { return cmp("allreduce "+red.name, got, ref) })
		}
		{
			ref, got := mk(me, n), mk(me, n)
			add("allreduce in place "+red.name, func() error { return c.Allreduce(InPlace, ref, op) },
				func() (*Request, error) { return c.Iallreduce(InPlace, got, op) },
				func() error { return cmp("allreduce in place "+red.name, got, ref) })
		}
		{
			var ref, got any
			if me == root {
				ref, got = alloc(n), alloc(n)
			}
			add("reduce "+red.name, func() error { return c.Reduce(mk(me, n), ref, op, root) },
				func() (*Request, error) { return c.Ireduce(mk(me, n), got, op, root) },
				func() error {
					if me != root {
						return nil
					}
					return cmp("reduce "+red.name, got, ref)
				})
		}
		{
			ref, got := mk(me, n), mk(me, n)
			send := func(b any) any {
				if me == root {
					return InPlace
				}
				return b
			}
			add("reduce in place "+red.name, func() error { return c.Reduce(send(ref), ref, op, root) },
				func() (*Request, error) { return c.Ireduce(send(got), got, op, root) },
				func() error { return cmp("reduce in place "+red.name, got, ref) })
		}
		for _, excl := range []bool{false, true} {
			name := "scan " + red.name
			call, icall := c.Scan, c.Iscan
			if excl {
				name, call, icall = "exscan "+red.name, c.Exscan, c.Iexscan
			}
			ref, got := alloc(n), alloc(n)
			add(name, func() error { return call(mk(me, n), ref, op) },
				func() (*Request, error) { return icall(mk(me, n), got, op) },
				func() error { return cmp(name, got, ref) })
			refIn, gotIn := mk(me, n), mk(me, n)
			add(name+" in place", func() error { return call(InPlace, refIn, op) },
				func() (*Request, error) { return icall(InPlace, gotIn, op) },
				func() error { return cmp(name+" in place", gotIn, refIn) })
		}
		{ // reduce_scatter: uneven blocks
			cnts := make([]int, np)
			tot := 0
			for i := range cnts {
				cnts[i] = (i + n) % 3
				tot += cnts[i]
			}
			ref, got := alloc(cnts[me]), alloc(cnts[me])
			add("reduce_scatter "+red.name, func() error { return c.ReduceScatter(mk(me, tot), ref, cnts, op) },
				func() (*Request, error) { return c.IreduceScatter(mk(me, tot), got, cnts, op) },
				func() error { return cmp("reduce_scatter "+red.name, got, ref) })
			refIn, gotIn := mk(me, tot), mk(me, tot)
			add("reduce_scatter in place "+red.name, func() error { return c.ReduceScatter(InPlace, refIn, cnts, op) },
				func() (*Request, error) { return c.IreduceScatter(InPlace, gotIn, cnts, op) },
				func() error { return cmp("reduce_scatter in place "+red.name, gotIn, refIn) })
			refB, gotB := alloc(n), alloc(n)
			add("reduce_scatter_block "+red.name, func() error { return c.ReduceScatterBlock(mk(me, n*np), refB, op) },
				func() (*Request, error) { return c.IreduceScatterBlock(mk(me, n*np), gotB, op) },
				func() error { return cmp("reduce_scatter_block "+red.name, gotB, refB) })
		}
	}
	{ // gather, gatherv, in place
		var ref, got []float64
		if me == root {
			ref, got = make([]float64, n*np), make([]float64, n*np)
		}
		add("gather", func() error { return c.Gather(v.floats(me, n), ref, root) },
			func() (*Request, error) { return c.Igather(v.floats(me, n), got, root) },
			func() error { return same("gather", got, ref) })
		refIn, gotIn := make([]float64, n*np), make([]float64, n*np)
		copy(refIn[me*n:], v.floats(me, n))
		copy(gotIn[me*n:], v.floats(me, n))
		sendOf := func(b []float64) any {
			if me == root {
				return InPlace
			}
			return v.floats(me, n)
		}
		add("gather in place", func() error { return c.Gather(sendOf(refIn), refIn, root) },
			func() (*Request, error) { return c.Igather(sendOf(gotIn), gotIn, root) },
			func() error { return same("gather in place", gotIn, refIn) })
		cnts, displs := make([]int, np), make([]int, np)
		off := 0
		for i := np - 1; i >= 0; i-- { // blocks in reverse rank order, with gaps
			cnts[i] = (i*n + 1) % 4
			displs[i] = off
			off += cnts[i] + 1
		}
		var refV, gotV []float64
		if me == root {
			refV, gotV = make([]float64, off), make([]float64, off)
		}
		add("gatherv", func() error { return c.Gatherv(v.floats(me, cnts[me]), refV, cnts, displs, root) },
			func() (*Request, error) { return c.Igatherv(v.floats(me, cnts[me]), gotV, cnts, displs, root) },
			func() error { return same("gatherv", gotV, refV) })
		// scatter, scatterv
		var src, srcV []float64
		if me == root {
			src, srcV = v.floats(root+100, n*np), v.floats(root+200, off)
		}
		refS, gotS := make([]float64, n), make([]float64, n)
		add("scatter", func() error { return c.Scatter(src, refS, root) },
			func() (*Request, error) { return c.Iscatter(src, gotS, root) },
			func() error { return same("scatter", gotS, refS) })
		refSV, gotSV := make([]float64, cnts[me]), make([]float64, cnts[me])
		add("scatterv", func() error { return c.Scatterv(srcV, cnts, displs, refSV, root) },
			func() (*Request, error) { return c.Iscatterv(srcV, cnts, displs, gotSV, root) },
			func() error { return same("scatterv", gotSV, refSV) })
		recvOf := func(b []float64) any {
			if me == root {
				return InPlace
			}
			return b
		}
		refSI, gotSI := make([]float64, n), make([]float64, n)
		add("scatter in place", func() error { return c.Scatter(src, recvOf(refSI), root) },
			func() (*Request, error) { return c.Iscatter(src, recvOf(gotSI), root) },
			func() error { return same("scatter in place", gotSI, refSI) })
		// allgather, allgatherv
		refA, gotA := make([]float64, n*np), make([]float64, n*np)
		add("allgather", func() error { return c.Allgather(v.floats(me, n), refA) },
			func() (*Request, error) { return c.Iallgather(v.floats(me, n), gotA) },
			func() error { return same("allgather", gotA, refA) })
		refAI, gotAI := make([]float64, n*np), make([]float64, n*np)
		copy(refAI[me*n:], v.floats(me, n))
		copy(gotAI[me*n:], v.floats(me, n))
		add("allgather in place", func() error { return c.Allgather(InPlace, refAI) },
			func() (*Request, error) { return c.Iallgather(InPlace, gotAI) },
			func() error { return same("allgather in place", gotAI, refAI) })
		refAV, gotAV := make([]float64, off), make([]float64, off)
		add("allgatherv", func() error { return c.Allgatherv(v.floats(me, cnts[me]), refAV, cnts, displs) },
			func() (*Request, error) { return c.Iallgatherv(v.floats(me, cnts[me]), gotAV, cnts, displs) },
			func() error { return same("allgatherv", gotAV, refAV) })
		// alltoall, alltoallv
		refT, gotT := make([]float64, n*np), make([]float64, n*np)
		add("alltoall", func() error { return c.Alltoall(v.floats(me, n*np), refT) },
			func() (*Request, error) { return c.Ialltoall(v.floats(me, n*np), gotT) },
			func() error { return same("alltoall", gotT, refT) })
		refTI, gotTI := v.floats(me, n*np), v.floats(me, n*np)
		add("alltoall in place", func() error { return c.Alltoall(InPlace, refTI) },
			func() (*Request, error) { return c.Ialltoall(InPlace, gotTI) },
			func() error { return same("alltoall in place", gotTI, refTI) })
		sc, sd, rc, rd := make([]int, np), make([]int, np), make([]int, np), make([]int, np)
		so, ro := 0, 0
		for j := 0; j < np; j++ {
			sc[j], rc[j] = (me+j+n)%3, (j+me+n)%3 // what me sends j is what j receives from me
			sd[j], rd[j] = so, ro
			so += sc[j] + 1
			ro += rc[j]
		}
		refTV, gotTV := make([]float64, ro), make([]float64, ro)
		add("alltoallv", func() error { return c.Alltoallv(v.floats(me, so), sc, sd, refTV, rc, rd) },
			func() (*Request, error) { return c.Ialltoallv(v.floats(me, so), sc, sd, gotTV, rc, rd) },
			func() error { return same("alltoallv", gotTV, refTV) })
	}
	if n <= 7 { // objects: a pointer for bcast, values for gather and allgather, a slice at the root for scatter
		mkObj := func(r int) objVal { return objVal{Name: fmt.Sprint("rank", r), Vals: make([]int, r%3+n)} }
		var refB, gotB objVal
		if me == root {
			refB, gotB = mkObj(root), mkObj(root)
		}
		add("bcast object", func() error { return c.Bcast(&refB, root) },
			func() (*Request, error) { return c.Ibcast(&gotB, root) },
			func() error {
				if fmt.Sprint(gotB) != fmt.Sprint(refB) {
					return fmt.Errorf("bcast object: got %v, want %v", gotB, refB)
				}
				return nil
			})
		var refG, gotG []objVal
		add("gather objects", func() error { return c.Gather(mkObj(me), &refG, root) },
			func() (*Request, error) { return c.Igather(mkObj(me), &gotG, root) },
			func() error {
				if fmt.Sprint(gotG) != fmt.Sprint(refG) {
					return fmt.Errorf("gather objects: got %v, want %v", gotG, refG)
				}
				return nil
			})
		var refA, gotA []objVal
		add("allgather objects", func() error { return c.Allgather(mkObj(me), &refA) },
			func() (*Request, error) { return c.Iallgather(mkObj(me), &gotA) },
			func() error {
				if fmt.Sprint(gotA) != fmt.Sprint(refA) {
					return fmt.Errorf("allgather objects: got %v, want %v", gotA, refA)
				}
				return nil
			})
		var all []objVal
		if me == root {
			for r := 0; r < np; r++ {
				all = append(all, mkObj(r+50))
			}
		}
		var refS, gotS objVal
		add("scatter objects", func() error { return c.Scatter(all, &refS, root) },
			func() (*Request, error) { return c.Iscatter(all, &gotS, root) },
			func() error {
				if fmt.Sprint(gotS) != fmt.Sprint(refS) {
					return fmt.Errorf("scatter objects: got %v, want %v", gotS, refS)
				}
				return nil
			})
	}
	return cs
}

// nbBatch runs one batch on c: the blocking references, then every nonblocking collective started back to back
// with a ring of point-to-point messages among them, completed in an order of this rank's own.
func nbBatch(t *testing.T, c *Comm, n, batch int, rng *rand.Rand) error {
	np, me := c.Size(), c.Rank()
	v := nbVals{c: c, n: n, np: np, me: me, salt: batch, root: (batch * 5) % np}
	cs := nbCases(v)
	for _, k := range cs {
		if err := k.block(); err != nil {
			return fmt.Errorf("np=%d n=%d blocking %s: %w", np, n, k.name, err)
		}
	}
	var reqs []*Request
	var which []string
	pin, pout := make([]int, n+1), make([]int, n+1)
	for i := range pout {
		pout[i] = me*1000 + i
	}
	for i, k := range cs {
		r, err := k.start()
		if err != nil {
			return fmt.Errorf("np=%d n=%d start %s: %w", np, n, k.name, err)
		}
		reqs, which = append(reqs, r), append(which, k.name)
		if i == len(cs)/2 { // point-to-point in the middle of the collectives
			rr, err := c.Irecv(pin, (me-1+np)%np, tagNB)
			if err != nil {
				return err
			}
			sr, err := c.Isend(pout, (me+1)%np, tagNB)
			if err != nil {
				return err
			}
			reqs, which = append(reqs, rr, sr), append(which, "irecv", "isend")
		}
	}
	if err := complete(reqs, rng); err != nil {
		return fmt.Errorf("np=%d n=%d completing %v: %w", np, n, which, err)
	}
	for _, k := range cs {
		if err := k.check(); err != nil {
			t.Errorf("np=%d rank=%d n=%d root=%d: %v", np, me, n, v.root, err)
		}
	}
	for i := range pin {
		if want := ((me-1+np)%np)*1000 + i; pin[i] != want {
			t.Errorf("np=%d rank=%d: point-to-point among the collectives: element %d is %d, want %d", np, me, i, pin[i], want)
			break
		}
	}
	return nil
}

// complete completes reqs in one of several orders.
func complete(reqs []*Request, rng *rand.Rand) error {
	switch rng.Intn(5) {
	case 0:
		return Waitall(reqs...)
	case 1: // Waitany until none is left
		left := slices.Clone(reqs)
		for {
			i, _, err := Waitany(left...)
			if err != nil {
				return err
			}
			if i < 0 {
				return nil
			}
			left[i] = nil
		}
	case 2:
		for {
			ok, err := Testall(reqs...)
			if err != nil || ok {
				return err
			}
			runtime.Gosched()
		}
	case 3: // Wait in a random order
		for _, i := range rng.Perm(len(reqs)) {
			if _, err := reqs[i].Wait(); err != nil {
				return err
			}
		}
		return nil
	default: // Test each until all are done, from the last
		done := make([]bool, len(reqs))
		for left := len(reqs); left > 0; {
			for i := len(reqs) - 1; i >= 0; i-- {
				if done[i] {
					continue
				}
				_, ok, err := reqs[i].Test()
				if err != nil {
					return err
				}
				if ok {
					done[i] = true
					left--
				}
			}
			runtime.Gosched()
		}
		return nil
	}
}

// nbAlgorithms forces every nonblocking algorithm of every collective in turn (one per collective and pass) and
// runs a batch under it.
func nbAlgorithms(t *testing.T, c *Comm) error {
	colls := []string{"barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv",
		"allgather", "allgatherv", "alltoall", "alltoallv", "reduce_scatter", "scan", "exscan"}
	passes := 0
	for _, k := range colls {
		passes = max(passes, len(collectives.Algorithms(k)))
	}
	for p := 0; p < passes; p++ {
		for _, k := range colls {
			as := collectives.Algorithms(k)
			if err := c.ForceAlgorithm("i"+k, as[p%len(as)]); err != nil {
				return err
			}
		}
		if err := nbBatch(t, c, 3+p, p, rand.New(rand.NewSource(int64(p*100+c.Rank())))); err != nil {
			return fmt.Errorf("algorithms pass %d: %w", p, err)
		}
	}
	for _, k := range colls {
		if err := c.ForceAlgorithm("i"+k, ""); err != nil {
			return err
		}
	}
	return nil
}

// nbErrors: bad arguments fail at the start with the blocking collective's class, and the job goes on.
func nbErrors(t *testing.T, c *Comm) error {
	np, me := c.Size(), c.Rank()
	f := make([]float64, 4)
	cases := []struct {
		name  string
		start func() (*Request, error)
		class error
	}{
		{"ibcast root", func() (*Request, error) { return c.Ibcast(f, np) }, ErrRoot},
		{"ireduce root", func() (*Request, error) { return c.Ireduce(f, f, Sum, -1) }, ErrRoot},
		{"iallreduce type", func() (*Request, error) { return c.Iallreduce(f, make([]int32, 4), Sum) }, ErrType},
		{"iallreduce truncate", func() (*Request, error) { return c.Iallreduce(f, make([]float64, 2), Sum) }, ErrTruncate},
		{"iallreduce op", func() (*Request, error) { return c.Iallreduce(f, make([]float64, 4), Band) }, ErrOp},
		{"iallgather truncate", func() (*Request, error) { return c.Iallgather(f, make([]float64, 4*np-1)) }, ErrTruncate},
		{"ialltoall uneven", func() (*Request, error) { return c.Ialltoall(make([]float64, np+1), make([]float64, np+1)) }, ErrArg},
		{"igather in place uneven", func() (*Request, error) { return c.Igather(InPlace, make([]float64, np+1), me) }, ErrArg},
		{"igatherv counts", func() (*Request, error) { return c.Igatherv(f, f, []int{1}, nil, me) }, ErrArg},
		{"ireduce_scatter counts", func() (*Request, error) { return c.IreduceScatter(f, f, make([]int, np+1), Sum) }, ErrArg},
		{"ibcast buffer", func() (*Request, error) { return c.Ibcast(nil, 0) }, ErrBuffer},
		{"igather in place off the root", func() (*Request, error) { return c.Igather(InPlace, f, (me+1)%max(np, 2)) }, ErrArg},
	}
	for _, k := range cases {
		if (k.name == "igather in place off the root" || strings.HasSuffix(k.name, "uneven")) && np == 1 {
			continue
		}
		r, err := k.start()
		if !errors.Is(err, k.class) || r != nil {
			t.Errorf("np=%d rank=%d %s: request %v, error %v, want class %v", np, me, k.name, r != nil, err, k.class)
		}
	}
	// np+1 doubles for np ranks: with an even np their bytes divide evenly, their elements do not (the blocking
	// collectives used to cut the blocks by bytes and split elements)
	if np > 1 {
		if err := c.Alltoall(make([]float64, np+1), make([]float64, np+1)); !errors.Is(err, ErrArg) {
			t.Errorf("np=%d rank=%d: blocking alltoall of %d doubles: %v, want ErrArg", np, me, np+1, err)
		}
		if me == 0 {
			if err := c.Scatter(make([]float64, np+1), make([]float64, 1), 0); !errors.Is(err, ErrArg) {
				t.Errorf("np=%d: blocking scatter of %d doubles: %v, want ErrArg", np, np+1, err)
			}
		}
		if err := c.Allgather(InPlace, make([]float64, np+1)); !errors.Is(err, ErrArg) {
			t.Errorf("np=%d rank=%d: blocking allgather in place of %d doubles: %v, want ErrArg", np, me, np+1, err)
		}
	}
	// the job goes on
	out := make([]float64, 1)
	r, err := c.Iallreduce([]float64{1}, out, Sum)
	if err == nil {
		_, err = r.Wait()
	}
	if err != nil || out[0] != float64(np) {
		t.Errorf("np=%d rank=%d: an allreduce after the errors: %v, %v", np, me, out, err)
	}
	return nil
}

// TestNonblockingRepeated: the same calls again and again on the same buffers with new data each time (a rank
// reuses the operation it built for a call), sometimes two at once, sometimes with the counts' values changed in
// the same slices, compared with the blocking collectives every time.
func TestNonblockingRepeated(t *testing.T) {
	body := func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		n := 5
		send, got, ref := make([]float64, n), make([]float64, n), make([]float64, n)
		buf, bref := make([]int, n), make([]int, n)
		got2, ref2 := make([]float64, n), make([]float64, n)
		cnts, displs := make([]int, np), make([]int, np)
		gv, gvRef := make([]float64, n*np), make([]float64, n*np)
		at, atRef := make([]float64, n*np), make([]float64, n*np)
		all := make([]float64, n*np)
		// allgatherv: fixed counts, displacements that change in the same slice (blocks in rank order, or reversed)
		acnt, adsp := make([]int, np), make([]int, np)
		for i := range acnt {
			acnt[i] = i%3 + 1
		}
		agv, agvRef := make([]float64, 3*np), make([]float64, 3*np)
		// reduce_scatter: counts in the same slice, new values from time to time (the memo compares them by value)
		rsc, rs, rsRef := make([]int, np), make([]float64, n), make([]float64, n)
		for it := 0; it < 40; it++ {
			for i := range send {
				send[i] = float64((me+1)*(it+1) + i)
			}
			for i := range all {
				all[i] = float64(me*1000 + it*10 + i)
			}
			if me == it%np {
				for i := range buf {
					buf[i], bref[i] = it*7+i, it*7+i
				}
			}
			off := 0
			for i := range cnts { // the same slices, new values from time to time
				cnts[i] = (i + it/5) % (n + 1)
				displs[i] = off
				off += cnts[i]
			}
			if err := c.Allreduce(send, ref, Sum); err != nil {
				return err
			}
			if err := c.Scan(send, ref2, Max); err != nil {
				return err
			}
			if err := c.Bcast(bref, it%np); err != nil {
				return err
			}
			if err := c.Gatherv(send[:cnts[me]], gvRef, cnts, displs, 0); err != nil {
				return err
			}
			if err := c.Alltoall(all, atRef); err != nil {
				return err
			}
			o := 0
			for k := range adsp {
				i := k
				if it/3%2 == 1 {
					i = np - 1 - k
				}
				adsp[i] = o
				o += acnt[i]
			}
			if err := c.Allgatherv(send[:acnt[me]], agvRef, acnt, adsp); err != nil {
				return err
			}
			clear(rsc)
			rsc[it/5%np] += 3
			rsc[(it/5+1)%np] += 2
			if err := c.ReduceScatter(send, rsRef, rsc, Sum); err != nil {
				return err
			}
			if err := startAndWait(
				func() (*Request, error) { return c.Iallreduce(send, got, Sum) },
				func() (*Request, error) { return c.Iscan(send, got2, Max) },
				func() (*Request, error) { return c.Ibcast(buf, it%np) },
				func() (*Request, error) { return c.Igatherv(send[:cnts[me]], gv, cnts, displs, 0) },
				func() (*Request, error) { return c.Ialltoall(all, at) },
				func() (*Request, error) { return c.Iallgatherv(send[:acnt[me]], agv, acnt, adsp) },
				func() (*Request, error) { return c.IreduceScatter(send, rs, rsc, Sum) },
				c.Ibarrier,
			); err != nil {
				return err
			}
			for _, e := range []error{same("allreduce", got, ref), same("scan", got2, ref2), same("bcast", buf, bref),
				same("alltoall", at, atRef), same("allgatherv", agv, agvRef),
				same("reduce_scatter", rs[:rsc[me]], rsRef[:rsc[me]])} {
				if e != nil {
					t.Errorf("np=%d rank=%d iteration %d: %v", np, me, it, e)
				}
			}
			if me == 0 {
				if e := same("gatherv", gv[:off], gvRef[:off]); e != nil {
					t.Errorf("np=%d iteration %d: %v", np, it, e)
				}
			}
		}
		return nil
	}
	onenodeSubtest(t, body, Config{Ranks: 1}, Config{Ranks: 2}, Config{Ranks: 5})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 5, Nodes: 2}, body).Check(t)
	})
}

// startAndWait starts every call in turn, so that all are outstanding at once, and then waits for them all.
func startAndWait(starts ...func() (*Request, error)) error {
	reqs := make([]*Request, 0, len(starts))
	for _, start := range starts {
		r, err := start()
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	return Waitall(reqs...)
}

// TestNodeAwareChains: the members that do not lead their node run a repeated small node-aware collective as a chain
// of arrivals at its phases inside the node (nbc: chainAgain), and fall back to running the operation when a phase's
// slot is still in use. On a ring of 2 slots, three collectives of two node phases each are outstanding at once, so
// that the later ones find their slots taken; some ranks start late, so that leaders and members meet in either
// order. Every result is checked against the blocking collective. With 2 elements per rank, and with 101, past a
// slot's entry, where the node's phases read the members' buffers (direct).
func TestNodeAwareChains(t *testing.T) {
	body := func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		m, err := strconv.Atoi(os.Getenv("CHAIN_ELEMS")) // elements per rank (see below)
		if err != nil {
			return err
		}
		x, sum, sumRef := make([]float64, m), make([]float64, m), make([]float64, m)
		all, allRef := make([]float64, m*np), make([]float64, m*np)
		to, at, atRef := make([]float64, m*np), make([]float64, m*np), make([]float64, m*np)
		for it := 0; it < 60; it++ {
			for i := range x {
				x[i] = float64(me*it + i)
			}
			for j := range to {
				to[j] = float64(me*100 + j + it)
			}
			if err := c.Allreduce(x, sumRef, Sum); err != nil {
				return err
			}
			if err := c.Allgather(x, allRef); err != nil {
				return err
			}
			if err := c.Alltoall(to, atRef); err != nil {
				return err
			}
			if (me+it)%3 == 0 {
				for i := 0; i < 20; i++ {
					runtime.Gosched() // start late: not for synchronisation, the results do not depend on it
				}
			}
			if err := startAndWait(
				func() (*Request, error) { return c.Iallreduce(x, sum, Sum) },
				func() (*Request, error) { return c.Iallgather(x, all) },
				c.Ibarrier,
				func() (*Request, error) { return c.Ialltoall(to, at) },
			); err != nil {
				return err
			}
			for _, e := range []error{same("allreduce", sum, sumRef), same("allgather", all, allRef),
				same("alltoall", at, atRef)} {
				if e != nil {
					return fmt.Errorf("rank %d, iteration %d: %w", me, it, e)
				}
			}
		}
		return nil
	}
	// In a slot's entry, and past it: the node's phases then read the members' buffers (direct)
	for _, m := range []int{2, 101} {
		t.Run(strconv.Itoa(m), func(t *testing.T) {
			env := []string{"GOMPJ_NBC_SLOTS=2", "CHAIN_ELEMS=" + strconv.Itoa(m)}
			harness.Procs(t, harness.Spec{Ranks: 6, Nodes: 2, Env: env}, body).Check(t)
		})
	}
}

// TestNodeAwareIbarrierModel: the node-aware Ibarrier, whose node phases wait on the node's barrier count and the
// leader's release (nbc: hiergate.go, lead.go), in random batches on 3 node processes of 2 or 3 ranks, on 2 of 4,
// and on one of 8: several Ibarriers outstanding at once (some of them persistent barriers' Starts), Barriers and
// small Iallreduces between them (whose node phases share the count and the slots), completed in an order of each
// rank's own, some ranks starting late. A completed barrier must have been started by every member: each rank
// counts its starts where the ranks of its node process read them, and checks its node's ranks after each
// completion; across nodes, every rank's start times (a wall clock that the node processes share) are checked
// against each completion at the end. With and without the worker pool.
func TestNodeAwareIbarrierModel(t *testing.T) {
	body := func(c *Comm) error {
		node, err := c.SplitNode()
		if err != nil {
			return err
		}
		wrs := make([]int64, node.Size()) // the node's ranks' ranks in c, the world
		if err := node.Allgather([]int64{int64(c.Rank())}, wrs); err != nil {
			return err
		}
		locals := make([]*ibarStarts, node.Size())
		ibarStartsMu.Lock()
		for i := range locals {
			wr := int(wrs[i])
			if ibarStartsOf[wr] == nil {
				ibarStartsOf[wr] = new(ibarStarts)
			}
			locals[i] = ibarStartsOf[wr]
		}
		ibarStartsMu.Unlock()
		me := locals[node.Rank()]
		if err := c.Barrier(); err != nil { // every local rank's counter is made
			return err
		}
		var pbs [3]*Request // persistent barriers, which a batch starts in some Ibarriers' places
		for i := range pbs {
			if pbs[i], err = c.BarrierInit(); err != nil {
				return err
			}
		}
		rng := rand.New(rand.NewSource(int64(7)))            // the same batches on every rank
		own := rand.New(rand.NewSource(int64(c.Rank() + 1))) // each rank's own completion order
		started := 0
		// When this rank started each Ibarrier, and saw each complete (at most 3 a batch), by the wall clock, which
		// the node processes share.
		var starts []int64
		dones := make([]int64, 3*300)
		for it := 0; it < 300; it++ {
			type pending struct {
				r    *Request
				k    int // the barrier's number; 0 for an Iallreduce
				x, y []int64
			}
			var reqs []pending
			nb := 1 + rng.Intn(3)
			for j := 0; j < nb; j++ {
				if rng.Intn(3) == 0 {
					if err := c.Barrier(); err != nil {
						return err
					}
				}
				if (c.Rank()+it+j)%4 == 0 {
					for i := 0; i < 10; i++ {
						runtime.Gosched() // start late: not for synchronisation, the checks do not depend on it
					}
				}
				if (c.Rank()+it+j)%7 == 0 {
					for t0 := time.Now(); time.Since(t0) < 100*time.Microsecond; {
						// start later still (not for synchronisation): a member released early would be seen
					}
				}
				persistent := rng.Intn(3) == 0
				started++
				me.n.Store(int64(started))
				starts = append(starts, time.Now().UnixNano())
				var r *Request
				if persistent {
					r, err = pbs[j], pbs[j].Start()
				} else {
					r, err = c.Ibarrier()
				}
				if err != nil {
					return err
				}
				reqs = append(reqs, pending{r: r, k: started})
				if rng.Intn(2) == 0 {
					x, y := []int64{int64(c.Rank() + it)}, make([]int64, 1)
					r, err := c.Iallreduce(x, y, Sum)
					if err != nil {
						return err
					}
					reqs = append(reqs, pending{r: r, x: x, y: y})
				}
			}
			own.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
			for _, p := range reqs {
				if _, err := p.r.Wait(); err != nil {
					return err
				}
				if p.k == 0 {
					if want := int64(c.Size()*(c.Size()-1)/2 + c.Size()*it); p.y[0] != want {
						return fmt.Errorf("rank %d, batch %d: Iallreduce gave %d, want %d", c.Rank(), it, p.y[0], want)
					}
					continue
				}
				dones[p.k-1] = time.Now().UnixNano()
				for i, l := range locals {
					if n := l.n.Load(); n < int64(p.k) {
						return fmt.Errorf("rank %d, batch %d: Ibarrier %d completed before node rank %d started it "+
							"(it has started %d)", c.Rank(), it, p.k, i, n)
					}
				}
			}
		}
		for _, p := range pbs {
			if err := p.Free(); err != nil {
				return err
			}
		}
		// Every rank's starts against this one's completions: a completion seen before some member's start, by the
		// shared clock, is a barrier that let a member through early (across nodes too).
		all := make([]int64, started*c.Size())
		if err := c.Allgather(starts, all); err != nil {
			return err
		}
		for k := 0; k < started; k++ {
			for r := 0; r < c.Size(); r++ {
				if st := all[r*started+k]; dones[k] < st {
					return fmt.Errorf("rank %d: Ibarrier %d completed %v before rank %d started it", c.Rank(), k+1,
						time.Duration(st-dones[k]), r)
				}
			}
		}
		return nil
	}
	// 3 nodes: the leaders' operation (nbc: gatedBarrier; a persistent barrier's own); 2 nodes: the leaders'
	// exchange without one (nbc: lead.go); 1 node: the count alone (nbc: gate.go).
	for _, nodes := range []int{3, 2, 1} {
		for _, async := range []string{"1", "0"} {
			t.Run(fmt.Sprintf("nodes=%d/async=%s", nodes, async), func(t *testing.T) {
				harness.Procs(t, harness.Spec{Ranks: 8, Nodes: nodes,
					Env: []string{env.AsyncProgress.Name + "=" + async}}, body).Check(t)
			})
		}
	}
}

// ibarStarts is a rank's count of Ibarriers started, which the other ranks of its node process read
// (TestNodeAwareIbarrierModel).
type ibarStarts struct{ n atomic.Int64 }

var (
	ibarStartsMu sync.Mutex
	ibarStartsOf = map[int]*ibarStarts{}
)

// TestNonblockingProgressWithoutCalls: collectives complete while ranks compute and call nothing. Every rank but
// rank 0 starts them and then only watches their completion flags, which no gompj call of its own moves on; only
// the worker pool (and the other ranks) can complete them, including these ranks' own shares of shared-memory
// collectives (a bcast reader's copy, an allreduce's chunk, an alltoall's blocks). Rank 0 waits as usual.
func TestNonblockingProgressWithoutCalls(t *testing.T) {
	body := func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		n := 40000 // above the eager limits and the shared-memory reduction chunk
		buf := make([]float64, n)
		if me == 0 {
			for i := range buf {
				buf[i] = float64(i)
			}
		}
		send, sum := make([]float64, n), make([]float64, n)
		for i := range send {
			send[i] = float64(me + i)
		}
		a2s, a2r := make([]float64, 3*np), make([]float64, 3*np)
		for i := range a2s {
			a2s[i] = float64(me*100 + i)
		}
		var reqs []*Request
		for _, start := range []func() (*Request, error){
			func() (*Request, error) { return c.Ibcast(buf, 0) },
			func() (*Request, error) { return c.Iallreduce(send, sum, Sum) },
			func() (*Request, error) { return c.Ialltoall(a2s, a2r) },
			c.Ibarrier,
		} {
			r, err := start()
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		if me != 0 {
			for _, r := range reqs { // computing: no gompj call until every collective is done
				for !ranks.Finished(r) {
					runtime.Gosched()
				}
			}
		}
		if err := Waitall(reqs...); err != nil {
			return err
		}
		for i := range buf {
			want := float64(np*(np-1)/2 + np*i)
			if buf[i] != float64(i) || sum[i] != want {
				t.Errorf("np=%d rank=%d element %d: bcast %v, allreduce %v (want %v)", np, me, i, buf[i], sum[i], want)
				break
			}
		}
		for j := 0; j < np; j++ {
			for k := 0; k < 3; k++ {
				if got, want := a2r[j*3+k], float64(j*100+me*3+k); got != want {
					t.Errorf("np=%d rank=%d alltoall block %d: got %v, want %v", np, me, j, got, want)
				}
			}
		}
		return nil
	}
	harness.Run(t, 4, body)
	// Two node processes: the node-aware Ibarrier's leaders run no operation (nbc: lead.go), and a leader that
	// computes has its message sent by its node's member and the other's read by the device's own loop.
	for _, np := range []int{4, 2} {
		t.Run(fmt.Sprintf("2nodes/np=%d", np), func(t *testing.T) {
			harness.Procs(t, harness.Spec{Ranks: np, Nodes: 2}, body).Check(t)
		})
	}
}

// TestNonblockingThreadMultiple: several goroutines of each rank run nonblocking collectives at once, each on a
// communicator of its own (MPI orders collectives per communicator), waiting in their own completion calls: the
// rank's operations and its event are shared by all of them. A request freed while active still completes for the
// others.
func TestNonblockingThreadMultiple(t *testing.T) {
	body := func(c *Comm) error {
		const workers, iters = 3, 30
		np, me := c.Size(), c.Rank()
		comms := make([]*Comm, workers)
		for i := range comms {
			d, err := c.Dup()
			if err != nil {
				return err
			}
			comms[i] = d
		}
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			go func(w int, d *Comm) {
				errs <- func() error {
					n := 1 + w*5000 // small, and above the shared-memory reduction chunk
					s, r := make([]int64, n), make([]int64, n)
					for it := 0; it < iters; it++ {
						for i := range s {
							s[i] = int64(me + it + i)
						}
						req, err := d.Iallreduce(s, r, Sum)
						if err != nil {
							return err
						}
						b, err := d.Ibarrier()
						if err != nil {
							return err
						}
						if it%7 == 3 {
							if err := b.Free(); err != nil { // nobody waits for it: it still runs to its end
								return err
							}
							b = nil
						}
						if err := Waitall(req, b); err != nil {
							return err
						}
						for i := range r {
							if want := int64(np*(np-1)/2 + np*(it+i)); r[i] != want {
								return fmt.Errorf("goroutine %d iteration %d element %d: %d, want %d", w, it, i, r[i], want)
							}
						}
					}
					return nil
				}()
			}(w, comms[w])
		}
		var first error
		for w := 0; w < workers; w++ {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
		for _, d := range comms {
			if err := d.Barrier(); err != nil {
				return err
			}
		}
		return nil
	}
	harness.Run(t, 3, body)
}

// TestNonblockingReuseAllocations: a small nonblocking collective started again on the same buffers reuses the
// operation built the first time (nbc's cache), node-aware ones across node processes included, so that a start
// and its wait allocate only the request, give or take the network's records for messages that arrive before
// their receives (a bcast root running ahead: up to one more per call here). Rebuilding a small node-aware
// Iallreduce made about 50. Each node process counts its own ranks' allocations, between barriers.
func TestNonblockingReuseAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	body := func(c *Comm) error {
		node, err := c.SplitNode() // made before the window: the ranks of this process, which share its count
		if err != nil {
			return err
		}
		local := node.Size()
		// boxed once, as a caller reusing buffers would
		var send, recv any = make([]float64, 4), make([]float64, 4)
		var a2s, a2r any = make([]float64, c.Size()), make([]float64, c.Size())
		calls := []func() (*Request, error){
			func() (*Request, error) { return c.Iallreduce(send, recv, Sum) },
			func() (*Request, error) { return c.Ibcast(send, 0) },
			func() (*Request, error) { return c.Ialltoall(a2s, a2r) },
			c.Ibarrier,
		}
		const runs = 300
		var msgs []string
		for k, call := range calls {
			once := func() error {
				r, err := call()
				if err != nil {
					return err
				}
				_, err = r.Wait()
				return err
			}
			for i := 0; i < 50; i++ { // first builds, pools, the network's buffers
				if err := once(); err != nil {
					return err
				}
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < runs; i++ {
				if err := once(); err != nil {
					return err
				}
			}
			runtime.ReadMemStats(&after)
			if err := c.Barrier(); err != nil {
				return err
			}
			// per start on this rank: the process's allocations over its ranks' starts (every rank of the process
			// measured the same window, give or take the barriers)
			if per := float64(after.Mallocs-before.Mallocs) / float64(runs*local); per > 4 {
				msgs = append(msgs, fmt.Sprintf("call %d on %d ranks: %.2f allocations per start and wait", k, c.Size(), per))
			}
		}
		if len(msgs) > 0 {
			return fmt.Errorf("%s", strings.Join(msgs, "; "))
		}
		return nil
	}
	onenodeSubtest(t, body, Config{Ranks: 3})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 5, Nodes: 2}, body).Check(t)
	})
}

// TestNonblockingLargeCallsFreed: nonblocking collectives too large to be kept for reuse (nbc's cache: Iallreduce,
// Ialltoall, Ibcast) are built afresh at every call, and each must be garbage once it has completed. A
// shared-memory op held its predecessor on its slot, which held its own: the live heap grew by about 15 KB per
// Iallreduce of 128 KiB on 4 ranks, without bound, and the growing heap made every collection slower. The live heap
// after a collection must not grow between a first window of calls and a second one three times as long. Measured
// by each node process's lowest rank while the others wait in a barrier.
func TestNonblockingLargeCallsFreed(t *testing.T) {
	body := func(c *Comm) error {
		node, err := c.SplitNode()
		if err != nil {
			return err
		}
		const n = 16384 // float64s: 128 KiB, above what nbc keeps for reuse
		send, recv := make([]float64, n), make([]float64, n)
		a2s, a2r := make([]float64, n), make([]float64, n)
		once := func() error {
			r, err := c.Iallreduce(send, recv, Sum)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			if r, err = c.Ialltoall(a2s, a2r); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			if r, err = c.Ibcast(send, 1); err != nil { // its readers never acquire the slot
				return err
			}
			_, err = r.Wait()
			return err
		}
		const calls = 200
		first, second, err := liveHeapWindows(c, node, calls, once)
		if err != nil {
			return err
		}
		if node.Rank() == 0 && second > first+4<<20 {
			return fmt.Errorf("live heap %d KiB after %d calls, %d KiB after %d more: operations that finished are kept",
				first>>10, calls, second>>10, 3*calls)
		}
		return nil
	}
	onenodeSubtest(t, body, Config{Ranks: 4})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 2}, body).Check(t)
	})
}

// TestFreedCommunicatorsReleased: communicators split off, used for nonblocking collectives (small ones, kept for
// reuse in the communicator's state, and large ones) and freed, again and again, must not pile up: the live heap
// after a collection must not grow between a first window of cycles and a second one three times as long. In one
// process, the collective state's cleanup held the state, which held the kept operations, which held the
// communicator, so the cleanup never ran (about 72 KB per cycle); across node processes, the node communicator's
// slot held the last operation and through it its parent, which had to die first to free the node communicator
// (about 107 KB per cycle).
func TestFreedCommunicatorsReleased(t *testing.T) {
	body := func(c *Comm) error {
		node, err := c.SplitNode()
		if err != nil {
			return err
		}
		small, smallOut := make([]float64, 4), make([]float64, 4)
		large, largeOut := make([]float64, 16384), make([]float64, 16384)
		cycle := func() error {
			sc, err := c.Split(c.Rank()%2, c.Rank())
			if err != nil {
				return err
			}
			for _, b := range [][2][]float64{{small, smallOut}, {large, largeOut}} {
				r, err := sc.Iallreduce(b[0], b[1], Sum)
				if err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil {
					return err
				}
			}
			return sc.Free()
		}
		const cycles = 100
		first, second, err := liveHeapWindows(c, node, cycles, cycle)
		if err != nil {
			return err
		}
		if node.Rank() == 0 && second > first+8<<20 {
			return fmt.Errorf("live heap %d KiB after %d cycles of Split, Iallreduce and Free, %d KiB after %d more: "+
				"freed communicators are kept", first>>10, cycles, second>>10, 3*cycles)
		}
		return nil
	}
	onenodeSubtest(t, body, Config{Ranks: 4})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 8, Nodes: 2}, body).Check(t)
	})
}

// liveHeapWindows runs step n times, then 3n times more, and returns the live heap (after a collection) at the
// end of each window, as node's lowest rank measures it while the others wait in a barrier (0 on the others).
func liveHeapWindows(c, node *Comm, n int, step func() error) (first, second uint64, err error) {
	live := func() (uint64, error) {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		var m runtime.MemStats
		if node.Rank() == 0 {
			runtime.GC()
			runtime.ReadMemStats(&m)
		}
		return m.HeapAlloc, c.Barrier()
	}
	for w, runs := range []int{n, 3 * n} {
		for i := 0; i < runs; i++ {
			if err := step(); err != nil {
				return 0, 0, err
			}
		}
		h, err := live()
		if err != nil {
			return 0, 0, err
		}
		if w == 0 {
			first = h
		} else {
			second = h
		}
	}
	return first, second, nil
}

// TestNonblockingScratchReuse: large calls whose schedules take scratch buffers from the pools (nbc/scratch.go),
// three of each outstanding at once and completed in reverse order, again and again with new data, so that a
// finished op's buffers go to the next ones while others still run. Every result is checked against its formula:
// a buffer given back too early, or handed to two ops, shows as a wrong element.
func TestNonblockingScratchReuse(t *testing.T) {
	const n = 40000 // float64s: 320 KB, above the pools' 32 KiB and the network's eager limit
	body := func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		nc, err := c.SplitNode()
		if err != nil {
			return err
		}
		if nc.Size() == np { // node-aware schedules across nodes; on one node, the message-based ones
			for coll, algo := range map[string]string{"iallreduce": "rabenseifner", "ireduce": "binomial",
				"iexscan": "chain", "ialltoall": "bruck"} {
				if err := c.ForceAlgorithm(coll, algo); err != nil {
					return err
				}
			}
		}
		const k = 3
		send, sum, ex := make([][]float64, k), make([][]float64, k), make([][]float64, k)
		ab, at := make([][]float64, k), make([][]float64, k)
		blk := n / np
		for j := range send {
			send[j], sum[j], ex[j] = make([]float64, n), make([]float64, n), make([]float64, n)
			ab[j], at[j] = make([]float64, blk*np), make([]float64, blk*np)
		}
		val := func(it, j, r, i int) float64 { return float64((r+1)*(it*k+j+1) + i%97) }
		for it := 0; it < 6; it++ {
			var reqs []*Request
			for j := 0; j < k; j++ {
				for i := range send[j] {
					send[j][i], ex[j][i] = val(it, j, me, i), -1
				}
				for i := range ab[j] {
					ab[j][i] = float64(me*1000000 + (i/blk)*1000 + it*10 + j + i%blk)
				}
				copy(ex[j], send[j])
				for _, start := range []func() (*Request, error){
					func() (*Request, error) { return c.Iallreduce(send[j], sum[j], Sum) },
					func() (*Request, error) { return c.Iexscan(InPlace, ex[j], Sum) },
					func() (*Request, error) { return c.Ialltoall(ab[j], at[j]) },
				} {
					r, err := start()
					if err != nil {
						return err
					}
					reqs = append(reqs, r)
				}
			}
			for i := len(reqs) - 1; i >= 0; i-- {
				if _, err := reqs[i].Wait(); err != nil {
					return err
				}
			}
			for j := 0; j < k; j++ {
				for i := 0; i < n; i++ {
					var all, below float64
					for r := 0; r < np; r++ {
						all += val(it, j, r, i)
						if r < me {
							below += val(it, j, r, i)
						}
					}
					if sum[j][i] != all {
						return fmt.Errorf("rank %d iteration %d call %d: allreduce element %d: got %v, want %v", me, it, j, i, sum[j][i], all)
					}
					if me > 0 && ex[j][i] != below {
						return fmt.Errorf("rank %d iteration %d call %d: exscan element %d: got %v, want %v", me, it, j, i, ex[j][i], below)
					}
				}
				for i := range at[j] {
					src, off := i/blk, i%blk
					if want := float64(src*1000000 + me*1000 + it*10 + j + off); at[j][i] != want {
						return fmt.Errorf("rank %d iteration %d call %d: alltoall element %d: got %v, want %v", me, it, j, i, at[j][i], want)
					}
				}
			}
		}
		return nil
	}
	onenodeSubtest(t, body, Config{Ranks: 2}, Config{Ranks: 3}, Config{Ranks: 4})
	t.Run("nodes", func(t *testing.T) {
		harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 2}, body).Check(t)
	})
}

// TestNonblockingSmallCallsBytes: a small nonblocking collective takes no memory per call but its handle (16
// bytes from its rank's block). Its sends and receives between node processes, and the requests of its phases
// within a node, are children that their operation collects and gives back to its rank (ranks.Child); they were
// one-shot requests, which an operation's hook on their flags kept from ever being reused: 256 fresh bytes per
// step. The operation's own request goes back to its rank once reported (ranks' reuseOp); it was about 330 bytes a
// call and rank. Each node process's lowest rank measures what the process allocated per call of its ranks, for a
// node-aware 8-byte Iallreduce (two phases within the node around one between the leaders) and one forced to
// recursive doubling (a send and a receive per rank): 32 bytes for 2 ranks, against 1836 with one-shot requests
// and 672 with children alone.
func TestNonblockingSmallCallsBytes(t *testing.T) {
	body := func(c *Comm) error {
		node, err := c.SplitNode()
		if err != nil {
			return err
		}
		send, recv := []float64{float64(c.Rank())}, make([]float64, 1)
		once := func() error {
			r, err := c.Iallreduce(send, recv, Sum)
			if err != nil {
				return err
			}
			_, err = r.Wait()
			return err
		}
		for _, algo := range []string{"", "recursive_doubling"} {
			if err := c.ForceAlgorithm("iallreduce", algo); err != nil {
				return err
			}
			per, err := bytesPerCall(c, node, 2000, once)
			if err != nil {
				return err
			}
			if limit := 100.0 * float64(node.Size()); node.Rank() == 0 && per > limit {
				return fmt.Errorf("iallreduce %q: %.0f bytes per call on a node process of %d ranks, want at most %.0f",
					algo, per, node.Size(), limit)
			}
		}
		return nil
	}
	harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 2}, body).Check(t)
}

// bytesPerCall makes n calls of step on every rank of c, after as many to warm up, and returns the bytes that the
// node process allocated per call, as node's lowest rank measures them (0 on the others).
func bytesPerCall(c, node *Comm, n int, step func() error) (float64, error) {
	var before, after runtime.MemStats
	for w := range 2 {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		if w == 1 && node.Rank() == 0 {
			runtime.ReadMemStats(&before)
		}
		for range n {
			if err := step(); err != nil {
				return 0, err
			}
		}
	}
	if node.Rank() == 0 {
		runtime.ReadMemStats(&after)
	}
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n), c.Barrier()
}
