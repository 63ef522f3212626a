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

// Topologies in the three modes of internal/harness. Each check compares what the communicator says with a
// reference computed here from the definition, and then proves the neighbours with real messages.

// refCoords and refRank are the row-major definitions.
func refCoords(dims []int, r int) []int {
	c := make([]int, len(dims))
	for i := len(dims) - 1; i >= 0; i-- {
		c[i] = r % dims[i]
		r /= dims[i]
	}
	return c
}

func refRank(dims []int, periods []bool, coords []int) (int, bool) {
	r := 0
	for i, x := range coords {
		if x < 0 || x >= dims[i] {
			if !periods[i] {
				return ProcNull, false
			}
			x = ((x % dims[i]) + dims[i]) % dims[i]
		}
		r = r*dims[i] + x
	}
	return r, true
}

func prod(dims []int) int {
	p := 1
	for _, d := range dims {
		p *= d
	}
	return p
}

// exchangeNeighbors proves a topology's neighbour lists with messages: every rank sends its rank to each
// destination and receives from each source (ProcNull skipped), and what comes from source s must be s.
func exchangeNeighbors(c *Comm) error {
	srcs, dsts, err := c.Neighbors()
	if err != nil {
		return err
	}
	var reqs []*Request
	got := make([][]int, len(srcs))
	for i, s := range srcs {
		got[i] = []int{-1}
		if s == ProcNull {
			continue
		}
		r, err := c.Irecv(got[i], s, 77)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	for _, d := range dsts {
		if d == ProcNull {
			continue
		}
		r, err := c.Isend([]int{c.Rank()}, d, 77)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	if err := Waitall(reqs...); err != nil {
		return err
	}
	for i, s := range srcs {
		if s != ProcNull && got[i][0] != s {
			return fmt.Errorf("rank %d: from source %d (entry %d) came %d", c.Rank(), s, i, got[i][0])
		}
	}
	return nil
}

// grids lists the Cartesian cases for np ranks: 1 to 4 dimensions, periodic and not, some smaller than np.
func grids(np int) (out []struct {
	dims    []int
	periods []bool
}) {
	add := func(dims []int, periods ...bool) {
		if prod(dims) <= np {
			out = append(out, struct {
				dims    []int
				periods []bool
			}{dims, periods})
		}
	}
	d1, _ := DimsCreate(np, []int{0})
	d2, _ := DimsCreate(np, []int{0, 0})
	d3, _ := DimsCreate(np, []int{0, 0, 0})
	d4, _ := DimsCreate(np, []int{0, 0, 0, 0})
	add(d1, false)
	add(d1, true)
	add(d2, false, false)
	add(d2, true, false)
	add(d2, true, true)
	add(d3, false, true, false)
	add(d3, true, true, true)
	add(d4, false, true, false, true)
	add([]int{2, 2}, true, false) // fewer points than ranks
	add([]int{1, 3}, true, true)  // a periodic dimension of one: its own neighbour
	add([]int{2, 1, 2}, true, true, false)
	add([]int{}) // zero dimensions: one rank
	return out
}

func checkCart(c *Comm, dims []int, periods []bool, reorder bool) error {
	cc, err := c.CartCreate(dims, periods, reorder)
	if err != nil {
		return err
	}
	p := prod(dims)
	if c.Rank() >= p {
		if cc != nil {
			return fmt.Errorf("rank %d beyond the grid %v got a communicator", c.Rank(), dims)
		}
		return nil
	}
	if cc == nil || cc.Size() != p || cc.Topo() != TopoCart {
		return fmt.Errorf("rank %d: CartCreate(%v) = %v", c.Rank(), dims, cc)
	}
	defer cc.Free()
	// Without reorder the ranks keep their order; with it, the grid is a permutation of the first p ranks.
	olds := make([]int, p)
	if err := cc.Allgather([]int{c.Rank()}, olds); err != nil {
		return err
	}
	if !reorder && cc.Rank() != c.Rank() {
		return fmt.Errorf("rank %d became %d without reorder", c.Rank(), cc.Rank())
	}
	if !isIota(slices.Sorted(slices.Values(olds))) {
		return fmt.Errorf("the grid's ranks %v are not a permutation of 0..%d", olds, p-1)
	}
	gd, gp, gc, err := cc.CartGet()
	if err != nil {
		return err
	}
	me := cc.Rank()
	if !slices.Equal(gd, dims) || !slices.Equal(gp, periods) || !slices.Equal(gc, refCoords(dims, me)) {
		return fmt.Errorf("CartGet = %v %v %v, want %v %v %v", gd, gp, gc, dims, periods, refCoords(dims, me))
	}
	for r := range p {
		co, err := cc.CartCoords(r)
		if err != nil || !slices.Equal(co, refCoords(dims, r)) {
			return fmt.Errorf("CartCoords(%d) = %v, %v", r, co, err)
		}
		if back, err := cc.CartRank(co); err != nil || back != r {
			return fmt.Errorf("CartRank(%v) = %d, %v; want %d", co, back, err, r)
		}
	}
	var srcs []int
	for d := range dims {
		for _, disp := range []int{-3, -1, 0, 1, 2} {
			s, t, err := cc.CartShift(d, disp)
			if err != nil {
				return err
			}
			at := func(delta int) int {
				co := refCoords(dims, me)
				co[d] += delta
				r, _ := refRank(dims, periods, co)
				return r
			}
			if s != at(-disp) || t != at(disp) {
				return fmt.Errorf("CartShift(%d, %d) on %v = %d, %d; want %d, %d", d, disp, refCoords(dims, me), s, t, at(-disp), at(disp))
			}
		}
		s, t, _ := cc.CartShift(d, 1)
		srcs = append(srcs, s, t)
		// wrapped and out-of-grid coordinates
		co := refCoords(dims, me)
		co[d] += dims[d]
		r, err := cc.CartRank(co)
		if periods[d] && (err != nil || r != me) {
			return fmt.Errorf("CartRank of %v (wrapped) = %d, %v", co, r, err)
		}
		if !periods[d] && !errors.Is(err, ErrRank) {
			return fmt.Errorf("CartRank of %v past a non-periodic edge: %v, want ErrRank", co, err)
		}
	}
	gs, gdst, err := cc.Neighbors()
	if err != nil || !slices.Equal(gs, srcs) || !slices.Equal(gdst, srcs) {
		return fmt.Errorf("Neighbors = %v %v, %v; want %v for both", gs, gdst, err, srcs)
	}
	if err := exchangeNeighbors(cc); err != nil {
		return err
	}
	// Dup keeps the topology.
	dup, err := cc.Dup()
	if err != nil {
		return err
	}
	if d, _, co, err := dup.CartGet(); err != nil || !slices.Equal(d, dims) || !slices.Equal(co, gc) {
		return fmt.Errorf("Dup lost the topology: %v %v %v", d, co, err)
	}
	dup.Free()
	// Every sub-grid.
	for mask := 0; mask < 1<<len(dims); mask++ {
		remain := make([]bool, len(dims))
		var sd []int
		var sp []bool
		for i := range dims {
			remain[i] = mask&(1<<i) != 0
			if remain[i] {
				sd = append(sd, dims[i])
				sp = append(sp, periods[i])
			}
		}
		sub, err := cc.CartSub(remain)
		if err != nil {
			return err
		}
		if sub.Size() != prod(sd) {
			return fmt.Errorf("CartSub(%v) of %v has %d ranks", remain, dims, sub.Size())
		}
		d, per, co, err := sub.CartGet()
		if err != nil {
			return err
		}
		var want []int
		for i, x := range refCoords(dims, me) {
			if remain[i] {
				want = append(want, x)
			}
		}
		if !slices.Equal(d, nilEmpty(sd)) || !slices.Equal(per, nilEmptyB(sp)) || !slices.Equal(co, nilEmpty(want)) {
			return fmt.Errorf("CartSub(%v) of %v: CartGet = %v %v %v, want %v %v %v", remain, dims, d, per, co, sd, sp, want)
		}
		// The members of my sub-grid are exactly the ranks that share my coordinates in the dropped dimensions.
		all := make([]int, sub.Size())
		if err := sub.Allgather([]int{me}, all); err != nil {
			return err
		}
		for j, r := range all {
			rc, mc := refCoords(dims, r), refCoords(dims, me)
			for i := range dims {
				if !remain[i] && rc[i] != mc[i] {
					return fmt.Errorf("CartSub(%v): rank %d (%v) is in the sub-grid of %v", remain, r, rc, mc)
				}
			}
			if sc, _ := sub.CartCoords(j); len(sc) != len(sd) {
				return fmt.Errorf("CartSub(%v): coordinates %v", remain, sc)
			}
		}
		if err := exchangeNeighbors(sub); err != nil {
			return err
		}
		sub.Free()
	}
	return nil
}

func isIota(s []int) bool {
	for i, x := range s {
		if x != i {
			return false
		}
	}
	return true
}

func nilEmpty(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func nilEmptyB(s []bool) []bool {
	if s == nil {
		return []bool{}
	}
	return s
}

// randomGraph makes a symmetric graph of n nodes (every rank derives the same one from seed).
func randomGraph(n int, seed int64) (index, edges []int) {
	rng := rand.New(rand.NewSource(seed))
	adj := make([][]int, n)
	for i := range n {
		for j := i; j < n; j++ {
			for k := rng.Intn(5); k >= 3; k-- { // sometimes an edge, sometimes two, self loops included
				adj[i] = append(adj[i], j)
				if i != j {
					adj[j] = append(adj[j], i)
				} else {
					adj[i] = append(adj[i], i)
				}
			}
		}
		adj[i] = append(adj[i], (i+1)%n) // a ring keeps it connected
		adj[(i+1)%n] = append(adj[(i+1)%n], i)
	}
	for i := range n {
		rng.Shuffle(len(adj[i]), func(a, b int) { adj[i][a], adj[i][b] = adj[i][b], adj[i][a] })
		edges = append(edges, adj[i]...)
		index = append(index, len(edges))
	}
	return index, edges
}

func checkGraph(c *Comm, n int, seed int64) error {
	index, edges := randomGraph(n, seed)
	g, err := c.GraphCreate(index, edges, true)
	if err != nil {
		return err
	}
	if c.Rank() >= n {
		if g != nil {
			return fmt.Errorf("rank %d beyond a graph of %d got a communicator", c.Rank(), n)
		}
		return nil
	}
	defer g.Free()
	if g.Topo() != TopoGraph || g.Size() != n || g.Rank() != c.Rank() {
		return fmt.Errorf("GraphCreate: %v, size %d rank %d", g.Topo(), g.Size(), g.Rank())
	}
	gi, ge, err := g.GraphGet()
	if err != nil || !slices.Equal(gi, index) || !slices.Equal(ge, edges) {
		return fmt.Errorf("GraphGet = %v %v, %v", gi, ge, err)
	}
	lo := 0
	if g.Rank() > 0 {
		lo = index[g.Rank()-1]
	}
	want := edges[lo:index[g.Rank()]]
	s, d, err := g.Neighbors()
	if err != nil || !slices.Equal(s, want) || !slices.Equal(d, want) {
		return fmt.Errorf("graph Neighbors = %v %v, %v; want %v", s, d, err, want)
	}
	return exchangeNeighbors(g)
}

// distGraph gives every rank its sources and destinations in a random directed multigraph (consistent).
func distGraph(n int, seed int64, me int) (sources, dests []int) {
	rng := rand.New(rand.NewSource(seed))
	for i := range n {
		for j := range n {
			for k := rng.Intn(6); k >= 4; k-- {
				if i == me {
					dests = append(dests, j)
				}
				if j == me {
					sources = append(sources, i)
				}
			}
		}
	}
	// The order of each list is the rank's own business: shuffle them with a rank-specific seed.
	r := rand.New(rand.NewSource(seed + int64(me)))
	r.Shuffle(len(sources), func(a, b int) { sources[a], sources[b] = sources[b], sources[a] })
	r.Shuffle(len(dests), func(a, b int) { dests[a], dests[b] = dests[b], dests[a] })
	return sources, dests
}

func checkDistGraph(c *Comm, seed int64) error {
	src, dst := distGraph(c.Size(), seed, c.Rank())
	g, err := c.DistGraphCreateAdjacent(src, dst, false)
	if err != nil {
		return err
	}
	defer g.Free()
	if g.Topo() != TopoDistGraph || g.Size() != c.Size() || g.Rank() != c.Rank() {
		return fmt.Errorf("DistGraphCreateAdjacent: %v size %d rank %d", g.Topo(), g.Size(), g.Rank())
	}
	s, d, err := g.Neighbors()
	if err != nil || !slices.Equal(s, nilEmpty(src)) || !slices.Equal(d, nilEmpty(dst)) {
		return fmt.Errorf("dist graph Neighbors = %v %v, %v; want %v %v", s, d, err, src, dst)
	}
	return exchangeNeighbors(g)
}

// topologyErrors: bad arguments give the right class on every rank, including when only one rank is wrong
// (the others must not wait for it).
func topologyErrors(c *Comm) error {
	np, me := c.Size(), c.Rank()
	expect := func(what string, err error, class error) error {
		if !errors.Is(err, class) {
			return fmt.Errorf("rank %d: %s: %v, want %v", me, what, err, class)
		}
		return nil
	}
	checks := []struct {
		what  string
		class error
		call  func() error
	}{
		{"CartGet without a topology", ErrTopology, func() error { _, _, _, err := c.CartGet(); return err }},
		{"Neighbors without a topology", ErrTopology, func() error { _, _, err := c.Neighbors(); return err }},
		{"CartShift without a topology", ErrTopology, func() error { _, _, err := c.CartShift(0, 1); return err }},
		{"GraphGet without a topology", ErrTopology, func() error { _, _, err := c.GraphGet(); return err }},
		{"a grid larger than the communicator", ErrDims, func() error { _, err := c.CartCreate([]int{np + 1}, nil, false); return err }},
		{"a zero extent", ErrDims, func() error { _, err := c.CartCreate([]int{0, 1}, nil, false); return err }},
		{"periods of another length", ErrDims, func() error { _, err := c.CartCreate([]int{1}, []bool{true, true}, false); return err }},
		{"another rank's periods", ErrArg, func() error {
			if np == 1 {
				return ErrArg
			}
			_, err := c.CartCreate([]int{1}, []bool{me == 0}, false)
			return err
		}},
		{"a graph with an edge to nowhere", ErrRank, func() error { _, err := c.GraphCreate([]int{1}, []int{1}, false); return err }},
		{"a decreasing index", ErrArg, func() error { _, err := c.GraphCreate([]int{1, 0}, []int{0}, false); return err }},
		{"a graph larger than the communicator", ErrArg, func() error {
			_, err := c.GraphCreate(make([]int, np+1), nil, false)
			return err
		}},
		{"a dist graph source out of range", ErrRank, func() error {
			_, err := c.DistGraphCreateAdjacent([]int{np}, nil, false)
			return err
		}},
		{"inconsistent dist graph lists", ErrTopology, func() error {
			_, err := c.DistGraphCreateAdjacent(nil, []int{me}, false) // everybody sends to itself, nobody receives
			return err
		}},
	}
	for _, ch := range checks {
		if err := expect(ch.what, ch.call(), ch.class); err != nil {
			return err
		}
	}
	var cart *Comm
	// One rank's bad grid: it gets ErrDims, the others ErrArg naming it, and nobody waits.
	d := []int{1}
	if me == np-1 {
		d = []int{-1}
	}
	_, err := c.CartCreate(d, nil, false)
	class := ErrArg
	if me == np-1 {
		class = ErrDims
	}
	if err := expect("one rank's bad grid", err, class); err != nil {
		return err
	}
	cart, err = c.CartCreate([]int{np}, []bool{false}, false)
	if err != nil {
		return err
	}
	defer cart.Free()
	for _, ch := range []struct {
		what  string
		class error
		call  func() error
	}{
		{"CartShift of a dimension that is not there", ErrDims, func() error { _, _, err := cart.CartShift(1, 1); return err }},
		{"CartShift of a negative dimension", ErrDims, func() error { _, _, err := cart.CartShift(-1, 1); return err }},
		{"CartCoords of a rank out of range", ErrRank, func() error { _, err := cart.CartCoords(np); return err }},
		{"CartRank with too many coordinates", ErrDims, func() error { _, err := cart.CartRank([]int{0, 0}); return err }},
		{"CartRank past the edge", ErrRank, func() error { _, err := cart.CartRank([]int{-1}); return err }},
		{"CartSub with too many flags", ErrDims, func() error { _, err := cart.CartSub([]bool{true, false}); return err }},
		{"GraphGet of a grid", ErrTopology, func() error { _, _, err := cart.GraphGet(); return err }},
	} {
		if err := expect(ch.what, ch.call(), ch.class); err != nil {
			return err
		}
	}
	// Topologies are for intracommunicators: on an intercommunicator every constructor is ErrComm.
	if np >= 2 {
		color := me % 2
		local, err := c.Split(color, me)
		if err != nil {
			return err
		}
		ic, err := local.IntercommCreate(0, c, 1-color, 55)
		if err != nil {
			return err
		}
		for _, ch := range []struct {
			what string
			call func() error
		}{
			{"CartCreate", func() error { _, err := ic.CartCreate([]int{1}, nil, false); return err }},
			{"GraphCreate", func() error { _, err := ic.GraphCreate([]int{0}, nil, false); return err }},
			{"DistGraphCreateAdjacent", func() error { _, err := ic.DistGraphCreateAdjacent(nil, nil, false); return err }},
			{"NeighborAllgather", func() error { return ic.NeighborAllgather([]int{1}, make([]int, 1)) }},
		} {
			if err := expect(ch.what+" of an intercommunicator", ch.call(), ErrComm); err != nil {
				return err
			}
		}
		ic.Free()
		local.Free()
	}
	// After all that, the communicator still works.
	return c.Barrier()
}

func topologySuite(c *Comm) error {
	for _, g := range grids(c.Size()) {
		for _, reorder := range []bool{false, true} {
			if err := checkCart(c, g.dims, g.periods, reorder); err != nil {
				return fmt.Errorf("grid %v periods %v reorder %v: %w", g.dims, g.periods, reorder, err)
			}
		}
	}
	for seed := int64(1); seed <= 3; seed++ {
		for _, n := range []int{1, c.Size() - 1, c.Size()} {
			if n < 1 {
				continue
			}
			if err := checkGraph(c, n, seed); err != nil {
				return fmt.Errorf("graph of %d, seed %d: %w", n, seed, err)
			}
		}
		if err := checkDistGraph(c, seed); err != nil {
			return fmt.Errorf("dist graph, seed %d: %w", seed, err)
		}
	}
	return topologyErrors(c)
}

func TestModesTopology(t *testing.T) {
	for _, np := range []int{6, 12} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { harness.Run(t, np, topologySuite) })
	}
}

// TestCartReorderAcrossNodes: on node processes, reorder puts a block of the grid on each node (8x8 over 4 nodes
// of 16: each node's ranks form a 4x4 block, so a node's grid neighbours are mostly its own ranks).
func TestCartReorderAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("64 ranks on 4 node processes")
	}
	body := func(c *Comm) error {
		cc, err := c.CartCreate([]int{8, 8}, []bool{false, false}, true)
		if err != nil {
			return err
		}
		node, err := c.SplitNode()
		if err != nil {
			return err
		}
		// The lowest world rank on my node names it.
		lead := []int{c.Rank()}
		if err := node.Allreduce([]int{c.Rank()}, lead, Min); err != nil {
			return err
		}
		all := make([]int, 64)
		if err := cc.Allgather(lead, all); err != nil {
			return err
		}
		co, _ := cc.CartCoords(cc.Rank())
		block := func(r int) [2]int { c := refCoords([]int{8, 8}, r); return [2]int{c[0] / 4, c[1] / 4} }
		for r := range 64 {
			if (all[r] == lead[0]) != (block(r) == block(cc.Rank())) {
				return fmt.Errorf("grid point %v (rank %d) on node of %d, I (%v) am on node of %d", refCoords([]int{8, 8}, r), r, all[r], co, lead[0])
			}
		}
		return exchangeNeighbors(cc)
	}
	harness.Procs(t, harness.Spec{Ranks: 64, Nodes: 4}, body).Check(t)
}
