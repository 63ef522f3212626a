package gompj_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	. "github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// Neighbourhood collectives against a sequential reference, in the three modes of internal/harness. Every rank
// can compute every other rank's send buffer, counts and neighbour lists, so each checks its own receive buffer
// against what the definition says it must hold: block j from source j is the block that source addressed to it
// (paired by the edge's direction on a grid, by occurrence order on graphs), ProcNull blocks, gaps and the tail
// keep their sentinel.

// nbrTopo describes a topology for the reference.
type nbrTopo struct {
	name   string
	make   func(c *Comm) (*Comm, error)
	dests  func(r int) []int // destinations of rank r
	srcs   func(r int) []int // sources of rank r
	labelD func(k int) int   // an edge's label at its sender (destination index k)
	labelS func(j int) int   // and at its receiver (source index j)
}

func cartNeighbors(dims []int, periods []bool, r int) []int {
	var out []int
	for d := range dims {
		for _, delta := range []int{-1, 1} {
			co := refCoords(dims, r)
			co[d] += delta
			n, _ := refRank(dims, periods, co)
			out = append(out, n)
		}
	}
	return out
}

func nbrTopologies(np int) []nbrTopo {
	var ts []nbrTopo
	for _, g := range grids(np) {
		dims, periods := g.dims, g.periods
		ts = append(ts, nbrTopo{
			name:   fmt.Sprintf("cart%v%v", dims, periods),
			make:   func(c *Comm) (*Comm, error) { return c.CartCreate(dims, periods, false) },
			dests:  func(r int) []int { return cartNeighbors(dims, periods, r) },
			srcs:   func(r int) []int { return cartNeighbors(dims, periods, r) },
			labelD: func(k int) int { return k },
			labelS: func(j int) int { return j ^ 1 }, // from the -1 neighbour comes what it sent up
		})
	}
	index, edges := randomGraph(np, 5)
	adj := func(r int) []int {
		lo := 0
		if r > 0 {
			lo = index[r-1]
		}
		return edges[lo:index[r]]
	}
	zero := func(int) int { return 0 }
	ts = append(ts, nbrTopo{name: "graph", make: func(c *Comm) (*Comm, error) { return c.GraphCreate(index, edges, false) },
		dests: adj, srcs: adj, labelD: zero, labelS: zero})
	for _, seed := range []int64{7, 8} {
		ts = append(ts, nbrTopo{name: fmt.Sprint("distgraph", seed),
			make: func(c *Comm) (*Comm, error) {
				s, d := distGraph(np, seed, c.Rank())
				return c.DistGraphCreateAdjacent(s, d, false)
			},
			dests:  func(r int) []int { _, d := distGraph(np, seed, r); return d },
			srcs:   func(r int) []int { s, _ := distGraph(np, seed, r); return s },
			labelD: zero, labelS: zero})
	}
	return ts
}

// paired returns, for source entry j of rank r, the destination index at the source that sends it its block.
func (t nbrTopo) paired(r, j int) int {
	srcs := t.srcs(r)
	s, lab := srcs[j], t.labelS(j)
	q := 0
	for i := 0; i < j; i++ {
		if srcs[i] == s && t.labelS(i) == lab {
			q++
		}
	}
	for k, d := range t.dests(s) {
		if d == r && t.labelD(k) == lab {
			if q == 0 {
				return k
			}
			q--
		}
	}
	panic(fmt.Sprintf("%s: no edge from %d to %d", t.name, s, r))
}

func mix(a ...int) int {
	h := 17
	for _, x := range a {
		h = h*1000003 ^ x
		h ^= h >> 13
	}
	if h < 0 {
		h = -h
	}
	return h
}

// nbrLayout is a rank's side of one call: its send buffer's blocks and its receive buffer's, in elements.
type nbrLayout struct {
	sendLen          int
	sCounts, sDispls []int
	rCounts, rDispls []int
	recvLen          int
}

// layoutOf computes rank r's layout for call (coll, m, call): fixed blocks of m (allgather, alltoall) or counts
// from the edge (v variants: below m+1, with gaps).
func layoutOf(t nbrTopo, coll string, r, m, call int) nbrLayout {
	dsts, srcs := t.dests(r), t.srcs(r)
	var l nbrLayout
	edgeCount := func(s, k int) int { return mix(s, k, call) % (m + 1) }
	lenOf := func(s int) int { return mix(s, call) % (m + 1) }
	switch coll {
	case "allgather":
		l.sendLen = m
	case "allgatherv":
		l.sendLen = lenOf(r)
	case "alltoall":
		l.sendLen = m * len(dsts)
		for k := range dsts {
			l.sCounts = append(l.sCounts, m)
			l.sDispls = append(l.sDispls, k*m)
		}
	case "alltoallv":
		at := 0
		for k := range dsts {
			at += k % 2 // a gap
			l.sCounts = append(l.sCounts, edgeCount(r, k))
			l.sDispls = append(l.sDispls, at)
			at += edgeCount(r, k)
		}
		l.sendLen = at + 1
	}
	at := 0
	for j, s := range srcs {
		n := m
		switch coll {
		case "allgatherv":
			n = lenOf(s) // ProcNull's block: any size, it stays untouched
		case "alltoallv":
			if s != ProcNull {
				n = edgeCount(s, t.paired(r, j))
			}
		}
		if coll == "allgatherv" || coll == "alltoallv" {
			at += j % 3 // gaps the call must not touch
		}
		l.rCounts = append(l.rCounts, n)
		l.rDispls = append(l.rDispls, at)
		at += n
	}
	l.recvLen = at + 2 // and a tail
	if coll == "alltoall" && len(dsts) == 0 {
		l.recvLen = at // without destinations the block size comes from the receive buffer: no tail
	}
	return l
}

const sentinel = -7

// strided returns a View of n elements over every other element of a fresh slice (offset 1) filled with fill,
// the slice, and the slice index of view element i.
func strided[T any](n int, fill T) (*View, []T, func(i int) int) {
	back := make([]T, 2*n+3)
	for i := range back {
		back[i] = fill
	}
	v, err := Vector(back[1:], n, 1, 2)
	if err != nil {
		panic(err)
	}
	return v, back, func(i int) int { return 1 + 2*i }
}

// nbrCase is one neighbourhood collective on a rank: its buffers and layout, the call in each form, and the check
// of its result against the reference.
type nbrCase[T comparable] struct {
	l          nbrLayout
	sbuf, rbuf any
	check      func() error
	refill     func(data int) // new send data (from seed data) and a clean receive buffer, for a persistent run
}

// nbrPrepare makes rank g.Rank()'s case for (coll, m, call). conv makes the element type from an int. With
// views, send and receive buffers are strided Views over larger slices, whose other elements must stay untouched.
func nbrPrepare[T comparable](g *Comm, t nbrTopo, coll string, m, call int, conv func(int) T, views bool) *nbrCase[T] {
	r := g.Rank()
	l := layoutOf(t, coll, r, m, call)
	k := &nbrCase[T]{l: l}
	send := make([]T, l.sendLen)
	recv := make([]T, l.recvLen)
	for i := range recv {
		recv[i] = conv(sentinel)
	}
	k.sbuf, k.rbuf = send, recv
	var sback, rback []T
	var sat, rat func(int) int
	if views {
		var sv, rv *View
		sv, sback, sat = strided(l.sendLen, conv(sentinel))
		rv, rback, rat = strided(l.recvLen, conv(sentinel))
		k.sbuf, k.rbuf = sv, rv
	}
	data := call // the data's seed; the layout's is call
	k.refill = func(d int) {
		data = d
		for i := range send {
			send[i] = conv(mix(r, data, i) % 1000)
			if sback != nil {
				sback[sat(i)] = send[i]
			}
		}
		for i := range recv {
			recv[i] = conv(sentinel)
			if rback != nil {
				rback[rat(i)] = recv[i]
			}
		}
	}
	k.refill(call)
	k.check = func() error {
		if rback != nil {
			for i, x := range rback {
				if (i%2 == 0 || i == len(rback)-1) && x != conv(sentinel) {
					return fmt.Errorf("rank %d: element %d outside the receive view was written: %v", r, i, x)
				}
			}
			for i := range recv {
				recv[i] = rback[rat(i)]
			}
		}
		want := make([]T, l.recvLen)
		for i := range want {
			want[i] = conv(sentinel)
		}
		for j, s := range t.srcs(r) {
			if s == ProcNull {
				continue
			}
			off := 0 // where the source's block starts in its send buffer
			if coll == "alltoall" || coll == "alltoallv" {
				off = layoutOf(t, coll, s, m, call).sDispls[t.paired(r, j)]
			}
			for i := range l.rCounts[j] {
				want[l.rDispls[j]+i] = conv(mix(s, data, off+i) % 1000)
			}
		}
		for i := range recv {
			if recv[i] != want[i] {
				return fmt.Errorf("rank %d: element %d is %v, want %v (layout %+v)", r, i, recv[i], want[i], l)
			}
		}
		return nil
	}
	return k
}

// blocking runs the case's collective with the blocking call.
func (k *nbrCase[T]) blocking(g *Comm, coll string) error {
	l := k.l
	switch coll {
	case "allgather":
		return g.NeighborAllgather(k.sbuf, k.rbuf)
	case "allgatherv":
		return g.NeighborAllgatherv(k.sbuf, k.rbuf, l.rCounts, l.rDispls)
	case "alltoall":
		return g.NeighborAlltoall(k.sbuf, k.rbuf)
	}
	return g.NeighborAlltoallv(k.sbuf, l.sCounts, l.sDispls, k.rbuf, l.rCounts, l.rDispls)
}

// start starts it nonblocking, or makes it persistent.
func (k *nbrCase[T]) start(g *Comm, coll string, persistent bool) (*Request, error) {
	l := k.l
	switch {
	case coll == "allgather" && persistent:
		return g.NeighborAllgatherInit(k.sbuf, k.rbuf)
	case coll == "allgather":
		return g.IneighborAllgather(k.sbuf, k.rbuf)
	case coll == "allgatherv" && persistent:
		return g.NeighborAllgathervInit(k.sbuf, k.rbuf, l.rCounts, l.rDispls)
	case coll == "allgatherv":
		return g.IneighborAllgatherv(k.sbuf, k.rbuf, l.rCounts, l.rDispls)
	case coll == "alltoall" && persistent:
		return g.NeighborAlltoallInit(k.sbuf, k.rbuf)
	case coll == "alltoall":
		return g.IneighborAlltoall(k.sbuf, k.rbuf)
	case persistent:
		return g.NeighborAlltoallvInit(k.sbuf, l.sCounts, l.sDispls, k.rbuf, l.rCounts, l.rDispls)
	}
	return g.IneighborAlltoallv(k.sbuf, l.sCounts, l.sDispls, k.rbuf, l.rCounts, l.rDispls)
}

// nbrCheck runs one blocking neighbourhood collective on g (a comm with topology t) and checks the rank's result.
func nbrCheck[T comparable](g *Comm, t nbrTopo, coll string, m, call int, conv func(int) T, views ...bool) error {
	k := nbrPrepare(g, t, coll, m, call, conv, len(views) > 0 && views[0])
	if err := k.blocking(g, coll); err != nil {
		return err
	}
	return k.check()
}

var nbrColls = []string{"allgather", "allgatherv", "alltoall", "alltoallv"}

func neighborSuite(c *Comm) error {
	call := 0 // the same on every rank of a topology: a function of the loop indices only
	for ti, t := range nbrTopologies(c.Size()) {
		call = ti * 1000
		g, err := t.make(c)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if g == nil {
			continue
		}
		for _, algo := range []string{"hybrid", "p2p"} {
			for _, coll := range nbrColls {
				if err := g.ForceAlgorithm("neighbor_"+coll, algo); err != nil {
					return err
				}
			}
			sizes := []int{0, 1, 7}
			if ti%4 == 0 && !raceEnabled {
				sizes = append(sizes, (128<<10)/8+3) // above every protocol switch
			}
			for _, m := range sizes {
				for _, coll := range nbrColls {
					call++
					views := (call+ti)%3 == 0 // a third of the calls with strided views for both buffers
					if err := nbrCheck(g, t, coll, m, call, func(i int) float64 { return float64(i) / 4 }, views); err != nil {
						return fmt.Errorf("%s %s %s m=%d views %v: %w", t.name, algo, coll, m, views, err)
					}
				}
			}
		}
		g.Free()
	}
	return nil
}

func TestModesNeighbor(t *testing.T) {
	nps := []int{5, 9}
	if testing.Short() || raceEnabled {
		nps = nps[:1]
	}
	for _, np := range nps {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { harness.Run(t, np, neighborSuite) })
	}
}

// TestModesNeighborTypes: every element type through both paths, on a periodic grid.
func TestModesNeighborTypes(t *testing.T) {
	harness.Run(t, 4, func(c *Comm) error {
		topo := nbrTopologies(4)[4] // a periodic 2x2 grid: each neighbour twice, once per direction
		g, err := topo.make(c)
		if err != nil {
			return err
		}
		call := 0
		for _, algo := range []string{"hybrid", "p2p"} {
			for _, coll := range nbrColls {
				if err := g.ForceAlgorithm("neighbor_"+coll, algo); err != nil {
					return err
				}
				sizes := []int{3, 9000}
				if raceEnabled {
					sizes = sizes[:1]
				}
				for _, m := range sizes {
					call++
					views := call%2 == 0
					errs := []error{
						nbrCheck(g, topo, coll, m, call, func(i int) byte { return byte(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) int8 { return int8(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) int16 { return int16(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) int32 { return int32(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) int64 { return int64(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) uint16 { return uint16(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) uint32 { return uint32(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) uint64 { return uint64(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) int { return i }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) uint { return uint(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) float32 { return float32(i) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) complex64 { return complex(float32(i), 1) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) complex128 { return complex(1, float64(i)) }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) bool { return i%3 == 0 }, views),
						nbrCheck(g, topo, coll, m, call, func(i int) Loc[float64] { return Loc[float64]{Value: float64(i), Index: i} }),
					}
					if err := errors.Join(errs...); err != nil {
						return fmt.Errorf("%s %s m=%d: %w", algo, coll, m, err)
					}
				}
			}
		}
		return nil
	})
}

// TestModesNeighborErrors: bad arguments and mismatched element types fail with their class, and the
// communicator works afterwards.
func TestModesNeighborErrors(t *testing.T) {
	harness.Run(t, 4, func(c *Comm) error {
		me := c.Rank()
		expect := func(what string, err, class error) error {
			if !errors.Is(err, class) {
				return fmt.Errorf("rank %d: %s: %v, want %v", me, what, err, class)
			}
			return nil
		}
		if err := expect("no topology", c.NeighborAllgather([]int{1}, make([]int, 4)), ErrTopology); err != nil {
			return err
		}
		g, err := c.CartCreate([]int{4}, []bool{true}, false)
		if err != nil {
			return err
		}
		overlap, err := Indexed(make([]int, 3), []int{2, 2}, []int{0, 1})
		if err != nil {
			return err
		}
		// A copy of the handle, which the blocking calls let stay on this stack (only its description escapes), so
		// the error must not read it after the stack moves: formatting it with %v did, through fmt's heap copy
		// of the pointer (a fault under -d=maymorestack=runtime.mayMoreStackMove with GODEBUG=efence=1).
		onStack := *overlap
		overlapErr := g.NeighborAllgather([]int{1, 2}, &onStack)
		for _, ch := range []struct {
			what  string
			err   error
			class error
		}{
			{"receive buffer too small", g.NeighborAllgather([]int{1, 2}, make([]int, 3)), ErrTruncate},
			{"send of another type", g.NeighborAllgather([]int{1}, make([]float64, 2)), ErrType},
			{"send not a multiple of the degree", g.NeighborAlltoall([]int{1, 2, 3}, make([]int, 4)), ErrArg},
			{"too few counts", g.NeighborAllgatherv([]int{1}, make([]int, 4), []int{1}, nil), ErrArg},
			{"a negative count", g.NeighborAlltoallv([]int{1}, []int{1, -1}, nil, make([]int, 4), []int{1, 1}, nil), ErrArg},
			{"a block past the buffer", g.NeighborAlltoallv([]int{1, 2}, []int{1, 1}, []int{0, 2}, make([]int, 4), []int{1, 1}, nil), ErrTruncate},
			{"an object", g.NeighborAllgather(struct{ A int }{1}, make([]int, 2)), ErrBuffer},
			{"nil", g.NeighborAlltoall(nil, nil), ErrBuffer},
			{"receiving into an overlapping View", overlapErr, ErrBuffer},
		} {
			if err := expect(ch.what, ch.err, ch.class); err != nil {
				return err
			}
		}
		want := "receiving into View(4 of []int in 2 blocks), whose blocks overlap"
		if !strings.Contains(overlapErr.Error(), want) {
			return fmt.Errorf("rank %d: %v, want it to say %q", me, overlapErr, want)
		}
		// Element types that differ between neighbours: even ranks send int32, odd ranks float32, so every
		// rank's neighbours (on a ring of 4) are of the other kind: ErrType, on both paths.
		for _, algo := range []string{"hybrid", "p2p"} {
			g.ForceAlgorithm("neighbor_alltoall", algo)
			var err error
			if me%2 == 0 {
				err = g.NeighborAlltoall([]int32{1, 2}, make([]int32, 2))
			} else {
				err = g.NeighborAlltoall([]float32{1, 2}, make([]float32, 2))
			}
			if err := expect(algo+": a neighbour of another element type", err, ErrType); err != nil {
				return err
			}
			// A receive block smaller than what arrives.
			n := 1
			if me%2 == 0 {
				n = 2
			}
			err = g.NeighborAlltoallv(make([]int, 2*n), []int{n, n}, nil, make([]int, 2*n), []int{n, n}, nil)
			if me%2 == 1 {
				if err := expect(algo+": a block larger than the receiver's", err, ErrTruncate); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
		}
		// A graph whose edges are not mutual cannot carry neighbourhood collectives.
		index, edges := []int{1, 1, 1, 1}, []int{1}
		ng, err := c.GraphCreate(index, edges, false)
		if err != nil {
			return err
		}
		if err := expect("an asymmetric graph", ng.NeighborAllgather([]int{1}, make([]int, 1)), ErrTopology); err != nil {
			return err
		}
		// The grid still works.
		out := make([]int, 2)
		if err := g.NeighborAllgather([]int{me}, out); err != nil {
			return err
		}
		if out[0] != (me+3)%4 || out[1] != (me+1)%4 {
			return fmt.Errorf("rank %d after the errors: %v", me, out)
		}
		return nil
	})
}

// TestNeighborConcurrent: several goroutines of each rank run neighbourhood collectives at once, each on its own
// communicator (THREAD_MULTIPLE), on one node and across node processes.
func TestModesNeighborConcurrent(t *testing.T) {
	harness.Run(t, 4, func(c *Comm) error {
		topo := nbrTopologies(4)[4]
		comms := make([]*Comm, 4)
		for i := range comms {
			g, err := topo.make(c)
			if err != nil {
				return err
			}
			comms[i] = g
		}
		var wg sync.WaitGroup
		errs := make([]error, len(comms))
		for i, g := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for call := range 50 {
					coll := nbrColls[call%len(nbrColls)]
					if err := nbrCheck(g, topo, coll, 1+call%5, call*10+i, func(i int) int { return i }); err != nil {
						errs[i] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// TestModesNeighborNonblocking: the nonblocking forms, several outstanding at once on one communicator and
// completed in another order, with blocking collectives between their start and their end; the persistent forms,
// started again with new data. Every result against the reference, views for some.
func TestModesNeighborNonblocking(t *testing.T) {
	harness.Run(t, 5, func(c *Comm) error {
		conv := func(i int) float64 { return float64(i) / 8 }
		sizes := []int{0, 3, 9000}
		for ti, topo := range nbrTopologies(c.Size()) {
			if ti%2 == 1 && ti < len(nbrTopologies(c.Size()))-3 {
				continue // every other grid, and the graphs
			}
			if (testing.Short() || raceEnabled) && ti%3 != 0 {
				continue
			}
			g, err := topo.make(c)
			if err != nil {
				return err
			}
			if g == nil {
				continue
			}
			call := ti * 1000
			// nonblocking: every collective, three sizes, all outstanding at once
			var cases []*nbrCase[float64]
			var reqs []*Request
			var names []string
			for si, m := range sizes {
				for ci, coll := range nbrColls {
					call++
					k := nbrPrepare(g, topo, coll, m, call, conv, (si+ci)%2 == 1)
					r, err := k.start(g, coll, false)
					if err != nil {
						return fmt.Errorf("%s %s m=%d: start: %w", topo.name, coll, m, err)
					}
					cases, reqs, names = append(cases, k), append(reqs, r), append(names, fmt.Sprintf("%s %s m=%d", topo.name, coll, m))
				}
				// a blocking collective while they are in flight
				if err := g.Allreduce([]float64{1}, make([]float64, 1), Sum); err != nil {
					return err
				}
				call++
				if err := nbrCheck(g, topo, "alltoall", 2, call, conv); err != nil {
					return fmt.Errorf("%s: a blocking neighbour alltoall among nonblocking ones: %w", topo.name, err)
				}
			}
			for i := len(reqs) - 1; i >= 0; i-- {
				if _, err := reqs[i].Wait(); err != nil {
					return fmt.Errorf("%s: %w", names[i], err)
				}
				if err := cases[i].check(); err != nil {
					return fmt.Errorf("%s: %w", names[i], err)
				}
			}
			// persistent: made once, run three times with new data
			for ci, coll := range nbrColls {
				call++
				first := call
				k := nbrPrepare(g, topo, coll, 5, first, conv, ci%2 == 0)
				r, err := k.start(g, coll, true)
				if err != nil {
					return fmt.Errorf("%s %s: init: %w", topo.name, coll, err)
				}
				for run := range 3 {
					k.refill(first + 7919*run) // new data, the same layout
					if err := r.Start(); err != nil {
						return fmt.Errorf("%s %s run %d: %w", topo.name, coll, run, err)
					}
					if _, err := r.Wait(); err != nil {
						return fmt.Errorf("%s %s run %d: %w", topo.name, coll, run, err)
					}
					if err := k.check(); err != nil {
						return fmt.Errorf("%s %s persistent run %d: %w", topo.name, coll, run, err)
					}
				}
				if err := r.Free(); err != nil {
					return err
				}
			}
			g.Free()
		}
		return nil
	})
}

// TestPersistentNeighborStartAllocations: a Start and Wait of a persistent neighbourhood alltoall (the halo
// exchange of a stencil code) allocate nothing at steady state, on slices and on Views, small and rendezvous.
func TestPersistentNeighborStartAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const runs = 100
	for _, views := range []bool{false, true} {
		for _, n := range []int{1, 1 << 14} {
			t.Run(fmt.Sprintf("views=%v/%d", views, n), func(t *testing.T) {
				err := RunWith(Config{Ranks: 4}, func(c *Comm) error {
					g, err := c.CartCreate([]int{2, 2}, []bool{true, false}, false)
					if err != nil {
						return err
					}
					var send, recv any = make([]float64, 4*n), make([]float64, 4*n)
					if views {
						send, _ = Vector(make([]float64, 8*n), 4*n, 1, 2)
						recv, _ = Vector(make([]float64, 8*n), 4*n, 1, 2)
					}
					r, err := g.NeighborAlltoallInit(send, recv)
					if err != nil {
						return err
					}
					var runErr error
					step := func() {
						if err := r.Start(); err != nil {
							runErr = err
						}
						if _, err := r.Wait(); err != nil {
							runErr = err
						}
					}
					return stepAllocs(c, runs, step, &runErr, "Start+Wait")
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestModesNeighborReuse: a loop's calls, as a stencil makes them: the same buffers passed again with new data
// (the plan keeps their block layout and each edge's request), alternating with other buffers, other neighbourhood
// collectives, another algorithm, other collectives and point-to-point traffic on the same communicator, and a
// nonblocking neighbourhood collective left outstanding across them. Every result against the reference.
func TestModesNeighborReuse(t *testing.T) {
	harness.Run(t, 5, func(c *Comm) error {
		ts := nbrTopologies(c.Size())
		for ti, t := range []nbrTopo{ts[0], ts[len(ts)-3], ts[len(ts)-1]} { // a grid with ProcNull edges, graphs
			g, err := t.make(c)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if g == nil {
				continue
			}
			var cases []*nbrCase[int32]
			var names []string
			for _, coll := range nbrColls {
				for _, m := range []int{1, 6} {
					for _, views := range []bool{false, true} {
						cases = append(cases, nbrPrepare(g, t, coll, m, ti*100+len(cases), func(i int) int32 { return int32(i) }, views))
						names = append(names, fmt.Sprintf("%s m=%d views=%v", coll, m, views))
					}
				}
			}
			right, left := (g.Rank()+1)%g.Size(), (g.Rank()+g.Size()-1)%g.Size()
			var pending *Request
			pendingCase := -1
			for step := range 80 {
				i := mix(ti, step/3) % len(cases) // runs of three calls on the same buffers
				if i < 0 {
					i = -i
				}
				k, coll := cases[i], nbrColls[i/4]
				if step%9 == 4 {
					algo := []string{"hybrid", "p2p", ""}[step/9%3]
					for _, cl := range nbrColls {
						if err := g.ForceAlgorithm("neighbor_"+cl, algo); err != nil {
							return err
						}
					}
				}
				if step%10 == 3 && pending == nil && i != len(cases)-1 { // a nonblocking one on other buffers
					pendingCase = len(cases) - 1
					cases[pendingCase].refill(-step)
					if pending, err = g.IneighborAlltoallv(cases[pendingCase].sbuf, cases[pendingCase].l.sCounts, cases[pendingCase].l.sDispls,
						cases[pendingCase].rbuf, cases[pendingCase].l.rCounts, cases[pendingCase].l.rDispls); err != nil {
						return err
					}
				}
				if i == pendingCase {
					i, k, coll = 0, cases[0], nbrColls[0]
				}
				k.refill(step*7 + ti)
				if err := k.blocking(g, coll); err != nil {
					return fmt.Errorf("%s step %d %s: %w", t.name, step, names[i], err)
				}
				if err := k.check(); err != nil {
					return fmt.Errorf("%s step %d %s: %w", t.name, step, names[i], err)
				}
				if step%7 == 6 {
					sum := []int{0}
					if err := g.Allreduce([]int{g.Rank()}, sum, Sum); err != nil {
						return err
					}
					in := []int{-1}
					if _, err := g.Sendrecv([]int{g.Rank()}, right, step, in, left, step); err != nil {
						return err
					}
					if sum[0] != g.Size()*(g.Size()-1)/2 || in[0] != left {
						return fmt.Errorf("%s step %d: allreduce %d, from the left %d", t.name, step, sum[0], in[0])
					}
				}
				if pending != nil && step%10 == 8 {
					if _, err := pending.Wait(); err != nil {
						return err
					}
					if err := cases[pendingCase].check(); err != nil {
						return fmt.Errorf("%s: the nonblocking alltoallv: %w", t.name, err)
					}
					pending, pendingCase = nil, -1
				}
			}
			if pending != nil {
				if _, err := pending.Wait(); err != nil {
					return err
				}
			}
			g.Free()
		}
		return nil
	})
}

// TestNeighborAllocations: a blocking neighbourhood collective on the same buffers (a stencil's halo exchange)
// allocates nothing at steady state, anywhere in the process, with either algorithm, on slices and on Views, small
// and rendezvous.
func TestNeighborAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const runs = 100
	for _, algo := range []string{"p2p", "hybrid"} {
		for _, coll := range []string{"alltoall", "allgather"} {
			for _, views := range []bool{false, true} {
				for _, n := range []int{1, 1 << 14} {
					t.Run(fmt.Sprintf("%s/%s/views=%v/%d", algo, coll, views, n), func(t *testing.T) {
						err := RunWith(Config{Ranks: 4}, func(c *Comm) error {
							g, err := c.CartCreate([]int{2, 2}, []bool{true, false}, false)
							if err != nil {
								return err
							}
							if err := g.ForceAlgorithm("neighbor_"+coll, algo); err != nil {
								return err
							}
							var send, recv, one any = make([]float64, 4*n), make([]float64, 4*n), make([]float64, n)
							if views {
								send, _ = Vector(make([]float64, 8*n), 4*n, 1, 2)
								recv, _ = Vector(make([]float64, 8*n), 4*n, 1, 2)
								one, _ = Vector(make([]float64, 2*n), n, 1, 2)
							}
							var runErr error
							step := func() {
								var err error
								if coll == "alltoall" {
									err = g.NeighborAlltoall(send, recv)
								} else {
									err = g.NeighborAllgather(one, recv)
								}
								if err != nil {
									runErr = err
								}
							}
							return stepAllocs(c, runs, step, &runErr, "call")
						})
						if err != nil {
							t.Fatal(err)
						}
					})
				}
			}
		}
	}
}

// stepAllocs runs a collective step the same number of times on every rank of c (10 to warm up, then as many as
// testing.AllocsPerRun makes on rank 0) and fails if it allocated on rank 0, or if a step failed (*runErr).
func stepAllocs(c *Comm, runs int, step func(), runErr *error, what string) error {
	for range 10 {
		step()
	}
	if c.Rank() != 0 {
		for range runs + 1 {
			step()
		}
		return *runErr
	}
	allocs := testing.AllocsPerRun(runs, step)
	if *runErr != nil {
		return *runErr
	}
	if allocs > 0 {
		return fmt.Errorf("%v allocations per %s", allocs, what)
	}
	return nil
}
