package gompj_test

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"

	. "github.com/gompj/gompj"
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/internal/harness"
)

// runN runs body on np ranks in the harness's three modes: one node, several node processes, one rank per
// process.
func runN(t *testing.T, np int, body func(c *Comm) error) {
	t.Helper()
	harness.Run(t, np, body)
}

// runOneNode runs body on np goroutine ranks of one node only (tests about shared-memory waiting).
func runOneNode(t *testing.T, np int, body func(c *Comm) error) {
	t.Helper()
	if err := RunWith(Config{Ranks: np}, body); err != nil {
		t.Fatalf("np=%d: %v", np, err)
	}
}

// onenodeSubtest runs body in subtest "onenode": one job of goroutine ranks in this process per configuration. The
// node processes that the same test's harness subtests start run this test binary too, and skip it.
func onenodeSubtest(t *testing.T, body func(c *Comm) error, cfgs ...Config) {
	t.Helper()
	t.Run("onenode", func(t *testing.T) {
		if os.Getenv(env.HarnessJob.Name) != "" {
			t.Skip("node process of another subtest")
		}
		for _, cfg := range cfgs {
			if err := RunWith(cfg, body); err != nil {
				t.Fatalf("%d ranks: %v", cfg.Ranks, err)
			}
		}
	})
}

// The matrix is smaller in -short mode and under the race detector (see collectives_race_test.go).
func matrixSizes(t *testing.T) (nps []int, counts []int) {
	for np := 1; np <= 17; np++ {
		nps = append(nps, np)
	}
	counts = []int{0, 1, 7}
	switch {
	case raceEnabled:
		// Without 5: np 3 already has a rank count that is neither a power of two nor a node's even share, and
		// np 5 was the matrix's costliest row under the detector (31 of the root package's 346 s).
		nps = []int{1, 2, 3, 8}
	case testing.Short():
		nps = []int{1, 2, 3, 5, 8}
	}
	return
}

// largeCount returns an element count whose byte size is above every protocol switch (64 KiB eager limit, 16 KiB
// reduction chunks, 8 KiB table thresholds, 4 KiB staging).
func largeCount(sz int) int { return (64<<10)/sz + 3 }

type opRef[T any] struct {
	name string
	op   Op
	f    func(a, b T) T // a op b, a from the lower ranks
}

type tcase[T any] struct {
	name string
	mk   func(rank, i int) T
	ops  []opRef[T]
	bad  []Op // ops that must be ErrOp on this type
}

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

func b2n[T integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

func intCase[T integer](name string) tcase[T] {
	return tcase[T]{name: name,
		mk: func(r, i int) T { return T((r*7+i*3)%5 + 1) },
		ops: []opRef[T]{
			{"sum", Sum, func(a, b T) T { return a + b }},
			{"prod", Prod, func(a, b T) T { return a * b }},
			{"min", Min, func(a, b T) T { return min(a, b) }},
			{"max", Max, func(a, b T) T { return max(a, b) }},
			{"land", Land, func(a, b T) T { return b2n[T](a != 0 && b != 0) }},
			{"lor", Lor, func(a, b T) T { return b2n[T](a != 0 || b != 0) }},
			{"lxor", Lxor, func(a, b T) T { return b2n[T]((a != 0) != (b != 0)) }},
			{"band", Band, func(a, b T) T { return a & b }},
			{"bor", Bor, func(a, b T) T { return a | b }},
			{"bxor", Bxor, func(a, b T) T { return a ^ b }},
		},
		bad: []Op{MaxLoc}}
}

func floatCase[T ~float32 | ~float64](name string) tcase[T] {
	return tcase[T]{name: name,
		mk: func(r, i int) T { return T((r*7+i*3)%5 + 1) }, // small integers: every order sums exactly
		ops: []opRef[T]{
			{"sum", Sum, func(a, b T) T { return a + b }},
			{"prod", Prod, func(a, b T) T { return a * b }},
			{"min", Min, func(a, b T) T { return min(a, b) }},
			{"max", Max, func(a, b T) T { return max(a, b) }},
		},
		bad: []Op{Band, Land, MinLoc}}
}

func complexCase[T ~complex64 | ~complex128](name string) tcase[T] {
	return tcase[T]{name: name,
		mk: func(r, i int) T { return T(complex(float64((r+i)%3+1), float64((r*i)%2))) },
		ops: []opRef[T]{
			{"sum", Sum, func(a, b T) T { return a + b }},
			{"prod", Prod, func(a, b T) T { return a * b }},
		},
		bad: []Op{Max, Bor}}
}

func locRef[T collectives.LocValue](greater bool) func(a, b Loc[T]) Loc[T] {
	return func(a, b Loc[T]) Loc[T] {
		if a.Value == b.Value {
			if a.Index < b.Index {
				return a
			}
			return b
		}
		if (a.Value > b.Value) == greater {
			return a
		}
		return b
	}
}

func locCase[T collectives.LocValue](name string) tcase[Loc[T]] {
	return tcase[Loc[T]]{name: name,
		mk: func(r, i int) Loc[T] { return Loc[T]{Value: T((r*7 + i*5) % 4), Index: (r * 3) % 5} },
		ops: []opRef[Loc[T]]{
			{"maxloc", MaxLoc, locRef[T](true)},
			{"minloc", MinLoc, locRef[T](false)},
		},
		bad: []Op{Sum}}
}

// affine maps x -> Value*x + Index compose associatively but not commutatively: a user op that checks rank order.
func affine(a, b Loc[int]) Loc[int] {
	return Loc[int]{Value: a.Value * b.Value, Index: a.Value*b.Index + a.Index}
}

var affineOp = NewOp(func(in, inout []Loc[int]) {
	for i := range inout {
		inout[i] = affine(in[i], inout[i])
	}
}, false)

func userCase() tcase[Loc[int]] {
	return tcase[Loc[int]]{name: "user-affine",
		mk:  func(r, i int) Loc[int] { return Loc[int]{Value: r%3 + 2, Index: r + i} },
		ops: []opRef[Loc[int]]{{"affine", affineOp, affine}},
		bad: []Op{NewOp(func(in, inout []float64) {}, true)}}
}

func boolCase() tcase[bool] {
	return tcase[bool]{name: "bool",
		mk: func(r, i int) bool { return (r+i)%3 != 0 },
		ops: []opRef[bool]{
			{"land", Land, func(a, b bool) bool { return a && b }},
			{"lor", Lor, func(a, b bool) bool { return a || b }},
			{"lxor", Lxor, func(a, b bool) bool { return a != b }},
		},
		bad: []Op{Sum, Band}}
}

func fill[T any](tc tcase[T], rank, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = tc.mk(rank, i)
	}
	return s
}

// reference folds ranks lo..hi-1 in order.
func reference[T any](tc tcase[T], f func(a, b T) T, lo, hi, n int) []T {
	out := fill(tc, lo, n)
	for r := lo + 1; r < hi; r++ {
		for i := range out {
			out[i] = f(out[i], tc.mk(r, i))
		}
	}
	return out
}

type checker struct {
	t    *testing.T
	c    *Comm
	what string
}

func (k checker) err(err error, format string, a ...any) bool {
	if err != nil {
		k.t.Errorf("np=%d rank=%d %s %s: %v", k.c.Size(), k.c.Rank(), k.what, fmt.Sprintf(format, a...), err)
		return true
	}
	return false
}

func expect[T comparable](k checker, got, want []T, format string, a ...any) {
	if slices.Equal(got, want) {
		return
	}
	where := fmt.Sprintf(format, a...)
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			k.t.Errorf("np=%d rank=%d %s %s: element %d of %d: got %v, want %v", k.c.Size(), k.c.Rank(), k.what,
				where, i, len(want), got[i], want[i])
			return
		}
	}
	k.t.Errorf("np=%d rank=%d %s %s: length %d, want %d", k.c.Size(), k.c.Rank(), k.what, where, len(got), len(want))
}

func roots(np int) []int {
	rs := []int{0}
	if np > 1 {
		rs = append(rs, np-1)
	}
	if np > 2 {
		rs = append(rs, np/2)
	}
	return rs
}

// reductions runs every reduction collective over tc's ops with every applicable algorithm.
func reductions[T comparable](t *testing.T, c *Comm, tc tcase[T], counts []int, algos bool) {
	np, me := c.Size(), c.Rank()
	k := checker{t, c, tc.name}
	if algos && len(counts) > 1 {
		counts = append(slices.Clone(counts), 100) // between the inline and the chunked shared-memory paths
	}
	forceEach := func(coll string, run func(algo string)) {
		list := []string{""}
		if algos {
			list = append(list, collectives.Algorithms(coll)...)
		}
		for _, a := range list {
			if k.err(c.ForceAlgorithm(coll, a), "force %s %s", coll, a) {
				return
			}
			run(a)
		}
		k.err(c.ForceAlgorithm(coll, ""), "unforce %s", coll)
	}
	for _, o := range tc.ops {
		for _, n := range counts {
			mine := fill(tc, me, n)
			all := reference(tc, o.f, 0, np, n)
			forceEach("allreduce", func(a string) {
				out := make([]T, n)
				if !k.err(c.Allreduce(mine, out, o.op), "allreduce %s n=%d algo=%q", o.name, n, a) {
					expect(k, out, all, "allreduce %s n=%d algo=%q", o.name, n, a)
				}
				inp := slices.Clone(mine)
				if !k.err(c.Allreduce(InPlace, inp, o.op), "allreduce in place %s n=%d algo=%q", o.name, n, a) {
					expect(k, inp, all, "allreduce in place %s n=%d algo=%q", o.name, n, a)
				}
			})
			forceEach("reduce", func(a string) {
				for _, root := range roots(np) {
					var out []T
					if me == root {
						out = make([]T, n+1) // longer than needed: allowed
					}
					if k.err(c.Reduce(mine, out, o.op, root), "reduce %s n=%d root=%d algo=%q", o.name, n, root, a) {
						continue
					}
					if me == root {
						expect(k, out[:n], all, "reduce %s n=%d root=%d algo=%q", o.name, n, root, a)
					}
					inp := slices.Clone(mine)
					send := any(mine)
					if me == root {
						send = InPlace
					}
					if !k.err(c.Reduce(send, inp, o.op, root), "reduce in place %s", o.name) && me == root {
						expect(k, inp, all, "reduce in place %s n=%d root=%d algo=%q", o.name, n, root, a)
					}
				}
			})
			forceEach("scan", func(a string) {
				out := make([]T, n)
				if !k.err(c.Scan(mine, out, o.op), "scan %s n=%d", o.name, n) {
					expect(k, out, reference(tc, o.f, 0, me+1, n), "scan %s n=%d algo=%q", o.name, n, a)
				}
				if !algos {
					return // in place: for the types that run every algorithm, which is enough to cover them
				}
				inp := slices.Clone(mine)
				if !k.err(c.Scan(InPlace, inp, o.op), "scan in place %s n=%d algo=%q", o.name, n, a) {
					expect(k, inp, reference(tc, o.f, 0, me+1, n), "scan in place %s n=%d algo=%q", o.name, n, a)
				}
			})
			forceEach("exscan", func(a string) {
				out := make([]T, n)
				if !k.err(c.Exscan(mine, out, o.op), "exscan %s n=%d", o.name, n) && me > 0 {
					expect(k, out, reference(tc, o.f, 0, me, n), "exscan %s n=%d algo=%q", o.name, n, a)
				}
				inp := slices.Clone(mine)
				if !k.err(c.Exscan(InPlace, inp, o.op), "exscan in place %s n=%d", o.name, n) && me > 0 {
					expect(k, inp, reference(tc, o.f, 0, me, n), "exscan in place %s n=%d algo=%q", o.name, n, a)
				}
			})
			forceEach("reduce_scatter", func(a string) {
				// uneven blocks: rank i gets (i+n)%3 elements
				cnts := make([]int, np)
				tot := 0
				for i := range cnts {
					cnts[i] = (i + n) % 3
					tot += cnts[i]
				}
				in := fill(tc, me, tot)
				ref := reference(tc, o.f, 0, np, tot)
				off := 0
				for i := 0; i < me; i++ {
					off += cnts[i]
				}
				out := make([]T, cnts[me])
				if !k.err(c.ReduceScatter(in, out, cnts, o.op), "reduce_scatter %s", o.name) {
					expect(k, out, ref[off:off+cnts[me]], "reduce_scatter %s n=%d algo=%q", o.name, n, a)
				}
				// in place: the vector is in recv (one spare element), the block is left at its start
				inp := append(slices.Clone(in), tc.mk(me, 99))
				if !k.err(c.ReduceScatter(InPlace, inp, cnts, o.op), "reduce_scatter in place %s", o.name) {
					expect(k, inp[:cnts[me]], ref[off:off+cnts[me]], "reduce_scatter in place %s n=%d algo=%q", o.name, n, a)
				}
				blk := make([]T, n)
				ref = reference(tc, o.f, 0, np, n*np)
				if !k.err(c.ReduceScatterBlock(fill(tc, me, n*np), blk, o.op), "reduce_scatter_block %s", o.name) {
					expect(k, blk, ref[me*n:(me+1)*n], "reduce_scatter_block %s n=%d algo=%q", o.name, n, a)
				}
				inb := fill(tc, me, n*np)
				if !k.err(c.ReduceScatterBlock(InPlace, inb, o.op), "reduce_scatter_block in place %s", o.name) {
					expect(k, inb[:n], ref[me*n:(me+1)*n], "reduce_scatter_block in place %s n=%d algo=%q", o.name, n, a)
				}
			})
		}
	}
	for _, bad := range tc.bad {
		err := c.Allreduce(fill(tc, me, 2), make([]T, 2), bad)
		if !errors.Is(err, ErrOp) {
			t.Errorf("%s: allreduce with %s: %v, want ErrOp", tc.name, bad.Name(), err)
		}
	}
}

// movement runs the collectives that move data without combining it, for every algorithm.
func movement[T comparable](t *testing.T, c *Comm, tc tcase[T], counts []int, algos bool) {
	np, me := c.Size(), c.Rank()
	k := checker{t, c, tc.name}
	if algos && len(counts) > 1 {
		counts = append(slices.Clone(counts), 100)
	}
	val := func(r, i int) T { return tc.mk(r*31, i) } // distinct per rank
	forceEach := func(coll string, run func(algo string)) {
		list := []string{""}
		if algos {
			list = append(list, collectives.Algorithms(coll)...)
		}
		for _, a := range list {
			if k.err(c.ForceAlgorithm(coll, a), "force %s %s", coll, a) {
				return
			}
			run(a)
		}
		k.err(c.ForceAlgorithm(coll, ""), "unforce %s", coll)
	}
	mk := func(r, lo, n int) []T {
		s := make([]T, n)
		for i := range s {
			s[i] = val(r, lo+i)
		}
		return s
	}
	for _, n := range counts {
		forceEach("bcast", func(a string) {
			for _, root := range roots(np) {
				buf := make([]T, n)
				if me == root {
					buf = mk(root, 0, n)
				}
				if !k.err(c.Bcast(buf, root), "bcast n=%d root=%d algo=%q", n, root, a) {
					expect(k, buf, mk(root, 0, n), "bcast n=%d root=%d algo=%q", n, root, a)
				}
			}
		})
		forceEach("gather", func(a string) {
			for _, root := range roots(np) {
				var out []T
				if me == root {
					out = make([]T, n*np)
				}
				if k.err(c.Gather(mk(me, 0, n), out, root), "gather n=%d root=%d algo=%q", n, root, a) {
					continue
				}
				if me == root {
					var want []T
					for r := 0; r < np; r++ {
						want = append(want, mk(r, 0, n)...)
					}
					expect(k, out, want, "gather n=%d root=%d algo=%q", n, root, a)
					in := make([]T, n*np)
					copy(in[me*n:], mk(me, 0, n))
					if !k.err(c.Gather(InPlace, in, root), "gather in place") {
						expect(k, in, want, "gather in place n=%d root=%d algo=%q", n, root, a)
					}
				} else {
					k.err(c.Gather(mk(me, 0, n), nil, root), "gather (in place at root)")
				}
			}
		})
		forceEach("scatter", func(a string) {
			for _, root := range roots(np) {
				var send []T
				if me == root {
					send = mk(root, 0, n*np)
				}
				out := make([]T, n)
				if !k.err(c.Scatter(send, out, root), "scatter n=%d root=%d algo=%q", n, root, a) {
					expect(k, out, mk(root, me*n, n), "scatter n=%d root=%d algo=%q", n, root, a)
				}
				// In place: the root's own block stays where it is in send, the others get theirs.
				out = make([]T, n)
				var recv any = out
				if me == root {
					recv = InPlace
				}
				if !k.err(c.Scatter(send, recv, root), "scatter in place n=%d root=%d algo=%q", n, root, a) {
					if me == root {
						expect(k, send, mk(root, 0, n*np), "scatter in place: the root's send buffer n=%d algo=%q", n, a)
					} else {
						expect(k, out, mk(root, me*n, n), "scatter in place n=%d root=%d algo=%q", n, root, a)
					}
				}
			}
		})
		forceEach("allgather", func(a string) {
			var want []T
			for r := 0; r < np; r++ {
				want = append(want, mk(r, 0, n)...)
			}
			out := make([]T, n*np)
			if !k.err(c.Allgather(mk(me, 0, n), out), "allgather n=%d algo=%q", n, a) {
				expect(k, out, want, "allgather n=%d algo=%q", n, a)
			}
			in := make([]T, n*np)
			copy(in[me*n:], mk(me, 0, n))
			if !k.err(c.Allgather(InPlace, in), "allgather in place") {
				expect(k, in, want, "allgather in place n=%d algo=%q", n, a)
			}
		})
		forceEach("alltoall", func(a string) {
			// block j from rank r: val(r, j*n + i)
			out := make([]T, n*np)
			var want []T
			for r := 0; r < np; r++ {
				want = append(want, mk(r, me*n, n)...)
			}
			if !k.err(c.Alltoall(mk(me, 0, n*np), out), "alltoall n=%d algo=%q", n, a) {
				expect(k, out, want, "alltoall n=%d algo=%q", n, a)
			}
			in := mk(me, 0, n*np)
			if !k.err(c.Alltoall(InPlace, in), "alltoall in place") {
				expect(k, in, want, "alltoall in place n=%d algo=%q", n, a)
			}
		})
		// v variants: rank r contributes (r+n)%4 elements; displacements leave a gap of one element.
		cnt := func(r int) int { return (r + n) % 4 }
		cnts, displs := make([]int, np), make([]int, np)
		tot := 0
		for r := 0; r < np; r++ {
			cnts[r], displs[r] = cnt(r), tot
			tot += cnt(r) + 1
		}
		forceEach("gatherv", func(a string) {
			for _, root := range roots(np) {
				out := make([]T, tot)
				if k.err(c.Gatherv(mk(me, 0, cnt(me)), out, cnts, displs, root), "gatherv n=%d root=%d algo=%q", n, root, a) {
					continue
				}
				if me == root {
					for r := 0; r < np; r++ {
						expect(k, out[displs[r]:displs[r]+cnts[r]], mk(r, 0, cnts[r]), "gatherv from %d root=%d algo=%q", r, root, a)
					}
				}
				if !algos {
					continue // in place: for the types that run every algorithm
				}
				// In place: the root's block is already at its displacement in recv.
				var send any = mk(me, 0, cnt(me))
				var in []T
				if me == root {
					send, in = InPlace, make([]T, tot)
					copy(in[displs[me]:], mk(me, 0, cnt(me)))
				}
				if k.err(c.Gatherv(send, in, cnts, displs, root), "gatherv in place n=%d root=%d algo=%q", n, root, a) {
					continue
				}
				if me == root {
					for r := 0; r < np; r++ {
						expect(k, in[displs[r]:displs[r]+cnts[r]], mk(r, 0, cnts[r]), "gatherv in place from %d root=%d algo=%q", r, root, a)
					}
				}
			}
		})
		forceEach("scatterv", func(a string) {
			for _, root := range roots(np) {
				send := mk(root, 0, tot)
				out := make([]T, cnt(me))
				if !k.err(c.Scatterv(send, cnts, displs, out, root), "scatterv n=%d root=%d algo=%q", n, root, a) {
					expect(k, out, send[displs[me]:displs[me]+cnts[me]], "scatterv root=%d algo=%q", root, a)
				}
				if !algos {
					continue // in place: for the types that run every algorithm
				}
				// In place: the root keeps its block where it is in send.
				out = make([]T, cnt(me))
				var recv any = out
				if me == root {
					recv = InPlace
				}
				if k.err(c.Scatterv(send, cnts, displs, recv, root), "scatterv in place n=%d root=%d algo=%q", n, root, a) {
					continue
				}
				if me == root {
					expect(k, send, mk(root, 0, tot), "scatterv in place: the root's send n=%d algo=%q", n, a)
				} else {
					expect(k, out, send[displs[me]:displs[me]+cnts[me]], "scatterv in place root=%d algo=%q", root, a)
				}
			}
		})
		forceEach("allgatherv", func(a string) {
			out := make([]T, tot)
			if !k.err(c.Allgatherv(mk(me, 0, cnt(me)), out, cnts, displs), "allgatherv n=%d algo=%q", n, a) {
				for r := 0; r < np; r++ {
					expect(k, out[displs[r]:displs[r]+cnts[r]], mk(r, 0, cnts[r]), "allgatherv from %d algo=%q", r, a)
				}
			}
			if !algos {
				return // in place: for the types that run every algorithm
			}
			// In place: each rank's block is already at its displacement in recv.
			in := make([]T, tot)
			copy(in[displs[me]:], mk(me, 0, cnt(me)))
			if !k.err(c.Allgatherv(InPlace, in, cnts, displs), "allgatherv in place n=%d algo=%q", n, a) {
				for r := 0; r < np; r++ {
					expect(k, in[displs[r]:displs[r]+cnts[r]], mk(r, 0, cnts[r]), "allgatherv in place from %d algo=%q", r, a)
				}
			}
		})
		forceEach("alltoallv", func(a string) {
			// to rank j: (me+j+n)%3 elements; packed send, gapped receive
			sc, rc, rd := make([]int, np), make([]int, np), make([]int, np)
			stot, rtot := 0, 0
			for j := 0; j < np; j++ {
				sc[j] = (me + j + n) % 3
				stot += sc[j]
				rc[j], rd[j] = (j+me+n)%3, rtot
				rtot += rc[j] + 1
			}
			send := mk(me, 0, stot)
			out := make([]T, rtot)
			if !k.err(c.Alltoallv(send, sc, nil, out, rc, rd), "alltoallv n=%d algo=%q", n, a) {
				for j := 0; j < np; j++ {
					off := 0 // where rank j's block for me starts in its send
					for x := 0; x < me; x++ {
						off += (j + x + n) % 3
					}
					expect(k, out[rd[j]:rd[j]+rc[j]], mk(j, off, rc[j]), "alltoallv from %d algo=%q", j, a)
				}
			}
		})
	}
}

func TestCollectivesMatrix(t *testing.T) {
	nps, counts := matrixSizes(t)
	for _, np := range nps {
		t.Run(fmt.Sprint("np", np), func(t *testing.T) {
			// Every element type runs up to 8 ranks. Its kernels are the same code whatever the communicator's
			// size, which is where the algorithms differ; so beyond 8 ranks, and under the race detector (which
			// looks for races in the algorithms, not in the kernels), one type of each kind runs: integer, float,
			// complex, bool, the location pairs and a user op. That took a third off the matrix's time in CI,
			// whose 15 minutes the suite came within a minute of.
			every := np <= 8 && !raceEnabled
			runN(t, np, func(c *Comm) error {
				if every {
					reductions(t, c, intCase[int8]("int8"), counts, false)
					reductions(t, c, intCase[int16]("int16"), counts, false)
				}
				reductions(t, c, intCase[int32]("int32"), counts, false)
				if every {
					reductions(t, c, intCase[int64]("int64"), counts, true)
					reductions(t, c, intCase[byte]("byte"), counts, false)
					reductions(t, c, intCase[uint16]("uint16"), counts, false)
					reductions(t, c, intCase[uint32]("uint32"), counts, false)
					reductions(t, c, intCase[uint64]("uint64"), counts, false)
					reductions(t, c, intCase[int]("int"), counts, false)
					reductions(t, c, intCase[uint]("uint"), counts, false)
					reductions(t, c, floatCase[float32]("float32"), counts, false)
				}
				reductions(t, c, floatCase[float64]("float64"), counts, true)
				if every {
					reductions(t, c, complexCase[complex64]("complex64"), counts, false)
				}
				reductions(t, c, complexCase[complex128]("complex128"), counts, false)
				reductions(t, c, boolCase(), counts, false)
				reductions(t, c, locCase[float64]("loc-float64"), counts, true)
				if every {
					reductions(t, c, locCase[int32]("loc-int32"), counts, false)
				}
				reductions(t, c, userCase(), counts, true)
				movement(t, c, intCase[byte]("byte"), counts, true)
				movement(t, c, floatCase[float64]("float64"), counts, true)
				movement(t, c, locCase[float64]("loc"), counts, false)
				return nil
			})
		})
	}
}

// Messages above every protocol switch, for every algorithm.
func TestCollectivesLarge(t *testing.T) {
	nps := []int{2, 3, 5, 8}
	if testing.Short() || raceEnabled {
		nps = []int{3}
	}
	for _, np := range nps {
		runN(t, np, func(c *Comm) error {
			reductions(t, c, floatCase[float64]("float64"), []int{largeCount(8)}, true)
			reductions(t, c, userCase(), []int{largeCount(16) / 4}, true)
			movement(t, c, intCase[byte]("byte"), []int{largeCount(1)}, true)
			return nil
		})
	}
}

// Sub-communicators: Split into odd and even ranks (reversed order), and Dup. Under a bound on unexpected
// messages so small (tinyShare) that the algorithms' eager sends keep turning rendezvous: none may rely on a
// standard send being buffered.
func TestCollectivesSubComms(t *testing.T) {
	t.Setenv("GOMPJ_UNEXPECTED_SHARE", strconv.Itoa(tinyShare))
	nps := []int{5, 9}
	if testing.Short() || raceEnabled {
		nps = []int{5}
	}
	for _, np := range nps {
		runN(t, np, func(c *Comm) error {
			s, err := c.Split(c.Rank()%2, -c.Rank())
			if err != nil {
				return err
			}
			d, err := c.Dup()
			if err != nil {
				return err
			}
			for _, sub := range []*Comm{s, d} {
				reductions(t, sub, floatCase[float64]("float64"), []int{0, 7, largeCount(8)}, true)
				reductions(t, sub, userCase(), []int{3}, true)
				movement(t, sub, intCase[int32]("int32"), []int{1, 5}, true)
			}
			return nil
		})
	}
}

// Collectives on several communicators interleaved with point-to-point on the same ones: collective traffic
// must never match a user message, whatever the tags. Under a bound on unexpected messages so small (tinyShare)
// that eager sends keep turning rendezvous.
func TestCollectivesMixedWithP2P(t *testing.T) {
	t.Setenv("GOMPJ_UNEXPECTED_SHARE", strconv.Itoa(tinyShare))
	np := 6
	rounds := 200
	if testing.Short() || raceEnabled {
		rounds = 40
	}
	runN(t, np, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		s, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		comms := []*Comm{c, d, s}
		rng := rand.New(rand.NewSource(42)) // same sequence on every rank
		for i := 0; i < rounds; i++ {
			cm := comms[rng.Intn(len(comms))]
			tag := rng.Intn(4)
			n := []int{1, 100, 20000}[rng.Intn(3)]
			// a p2p ring message posted before the collective and received after it
			me, sz := cm.Rank(), cm.Size()
			out := make([]int64, n)
			for j := range out {
				out[j] = int64(me*1000 + j + i)
			}
			req, err := cm.Isend(out, (me+1)%sz, tag)
			if err != nil {
				return err
			}
			x := []int64{int64(me + i)}
			y := make([]int64, 1)
			switch rng.Intn(4) {
			case 0:
				err = cm.Allreduce(x, y, Sum)
				if err == nil && y[0] != int64(sz*(sz-1)/2+sz*i) {
					t.Errorf("round %d: allreduce %d", i, y[0])
				}
			case 1:
				y[0] = x[0]
				err = cm.Bcast(y, sz-1)
				if err == nil && y[0] != int64(sz-1+i) {
					t.Errorf("round %d: bcast %d", i, y[0])
				}
			case 2:
				err = cm.Barrier()
			case 3:
				all := make([]int64, sz)
				err = cm.Allgather(x, all)
				for r := 0; err == nil && r < sz; r++ {
					if all[r] != int64(r+i) {
						t.Errorf("round %d: allgather %v", i, all)
						break
					}
				}
			}
			if err != nil {
				return err
			}
			in := make([]int64, n)
			from := (me - 1 + sz) % sz
			if _, err := cm.Recv(in, from, tag); err != nil {
				return err
			}
			if in[n-1] != int64(from*1000+n-1+i) {
				t.Errorf("round %d: p2p got %d", i, in[n-1])
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Many more ranks than cores: the shared-memory waits must park, not spin forever.
func TestCollectivesOversubscribed(t *testing.T) {
	np := 64
	runOneNode(t, np, func(c *Comm) error {
		for i := 0; i < 20; i++ {
			if err := c.Barrier(); err != nil {
				return err
			}
			y := make([]float64, 1)
			if err := c.Allreduce([]float64{1}, y, Sum); err != nil {
				return err
			}
			if y[0] != float64(np) {
				t.Errorf("allreduce %v", y[0])
			}
			b := make([]byte, 100000)
			if c.Rank() == i%np {
				b[99999] = byte(i + 1)
			}
			if err := c.Bcast(b, i%np); err != nil {
				return err
			}
			if b[99999] != byte(i+1) {
				t.Errorf("bcast %d", b[99999])
			}
			// alltoall: the shared-memory one takes whichever peer is ready; ranks arrive in any order
			s, r := make([]int32, 3*np), make([]int32, 3*np)
			for j := range s {
				s[j] = int32(c.Rank()*1000 + j/3 + i)
			}
			if err := c.Alltoall(s, r); err != nil {
				return err
			}
			for j := 0; j < np; j++ {
				if r[3*j] != int32(j*1000+c.Rank()+i) || r[3*j+2] != r[3*j] {
					t.Errorf("alltoall from %d: %v", j, r[3*j:3*j+3])
					break
				}
			}
		}
		return nil
	})
}

func TestCollectivesErrors(t *testing.T) {
	runN(t, 3, func(c *Comm) error {
		check := func(err, want error, what string) {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", what, err, want)
			}
		}
		check(c.Bcast(make([]int, 1), 3), ErrRoot, "bcast root 3")
		check(c.Reduce([]int{1}, []int{0}, Sum, -1), ErrRoot, "reduce root -1")
		check(c.Allreduce([]float64{1}, make([]float64, 1), Bxor), ErrOp, "bxor on floats")
		check(c.Allreduce([]float64{1}, make([]float64, 1), Op{}), ErrOp, "zero op")
		check(c.Allreduce([]float64{1, 2}, make([]float64, 1), Sum), ErrTruncate, "short allreduce recv")
		check(c.Allreduce([]float64{1}, make([]int, 1), Sum), ErrType, "mixed types")
		check(c.Allgather([]int{1, 2}, make([]int, 5)), ErrTruncate, "short allgather recv")
		check(c.Alltoall([]int{1, 2}, make([]int, 3)), ErrArg, "alltoall send not divisible")
		check(c.Gatherv([]int{1}, make([]int, 2), []int{1, 1, 1}, nil, c.Rank()), ErrTruncate, "gatherv counts overflow")
		check(c.Allreduce(struct{}{}, make([]int, 1), Sum), ErrBuffer, "object reduce")
		check(c.ReduceScatter(InPlace, make([]int, 2), []int{1, 1, 1}, Sum), ErrTruncate, "reduce_scatter in place, short recv")
		check(c.ReduceScatterBlock(InPlace, make([]int, 4), Sum), ErrArg, "reduce_scatter_block in place, 4 elements for 3 ranks")
		// a counts/size mismatch between ranks on a shared-memory path is an error, not an overrun
		n := 4
		if c.Rank() == 1 {
			n = 9
		}
		buf := make([]byte, n)
		err := c.Bcast(buf, 1)
		if c.Rank() != 1 {
			check(err, ErrTruncate, "bcast into a short buffer")
		}
		// objects travel by Bcast
		type obj struct {
			A string
			B []int
		}
		var o obj
		if c.Rank() == 2 {
			o = obj{"x", []int{1, 2}}
		}
		if err := c.Bcast(&o, 2); err != nil || o.A != "x" || len(o.B) != 2 {
			t.Errorf("object bcast: %v %+v", err, o)
		}
		return nil
	})
}

func TestCollectiveTable(t *testing.T) {
	d := CollectiveTable()
	for _, want := range []string{"allreduce", "rabenseifner", "GOMPJ_COLL_TABLE", "dissemination"} {
		if !slices.ContainsFunc([]string{d}, func(s string) bool { return len(s) > 0 && contains(s, want) }) {
			t.Errorf("table description lacks %q:\n%s", want, d)
		}
	}
	runN(t, 2, func(c *Comm) error {
		if err := c.ForceAlgorithm("allreduce", "nonsense"); !errors.Is(err, ErrArg) {
			t.Errorf("forcing an unknown algorithm: %v", err)
		}
		return nil
	})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A rank that fails while the others wait in shared-memory collectives aborts the job: nobody hangs.
func TestCollectivesAbortWakesWaiters(t *testing.T) {
	boom := errors.New("boom")
	for _, np := range []int{3, 16} {
		err := RunWith(Config{Ranks: np}, func(c *Comm) error {
			if c.Rank() == 1 {
				return boom
			}
			for i := 0; ; i++ {
				var err error
				switch i % 4 {
				case 0:
					err = c.Barrier()
				case 1:
					err = c.Bcast(make([]byte, 10), 1)
				case 2:
					err = c.Allreduce([]int{1}, make([]int, 1), Sum)
				case 3:
					err = c.Alltoall(make([]int, 3*np), make([]int, 3*np))
				}
				if err != nil {
					if !errors.Is(err, ErrAborted) {
						t.Errorf("rank %d: %v, want ErrAborted", c.Rank(), err)
					}
					return err
				}
			}
		})
		if !errors.Is(err, boom) {
			t.Errorf("np=%d: job ended with %v, want boom", np, err)
		}
	}
}

type collObj struct {
	Name string
	Vals []int
}

// Values that are not primitive slices travel msgpack-encoded: Bcast, Gather, Allgather, Scatter.
func TestCollectivesObjects(t *testing.T) {
	runN(t, 4, func(c *Comm) error {
		me, np := c.Rank(), c.Size()
		mine := collObj{fmt.Sprint("r", me), []int{me, me * 2}}
		for root := 0; root < np; root++ {
			var all []collObj
			if err := c.Gather(mine, &all, root); err != nil {
				return err
			}
			if me == root {
				for r, o := range all {
					if o.Name != fmt.Sprint("r", r) || len(o.Vals) != 2 || o.Vals[1] != 2*r {
						t.Errorf("gather root %d: %+v", root, all)
						break
					}
				}
			}
			var send []collObj
			if me == root {
				for r := 0; r < np; r++ {
					send = append(send, collObj{fmt.Sprint("to", r), []int{r}})
				}
			}
			var got collObj
			if err := c.Scatter(send, &got, root); err != nil {
				return err
			}
			if got.Name != fmt.Sprint("to", me) || got.Vals[0] != me {
				t.Errorf("scatter root %d: %+v", root, got)
			}
		}
		var all []collObj
		if err := c.Allgather(mine, &all); err != nil {
			return err
		}
		if len(all) != np || all[np-1].Name != fmt.Sprint("r", np-1) {
			t.Errorf("allgather: %+v", all)
		}
		m := map[string]int{}
		if me == 1 {
			m["x"] = 7
		}
		if err := c.Bcast(&m, 1); err != nil || m["x"] != 7 {
			t.Errorf("bcast map: %v %v", m, err)
		}
		return nil
	})
}
