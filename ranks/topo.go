package ranks

import (
	"fmt"
	"math/bits"
	"slices"
)

// Virtual topologies (MPI chapter 8): a Cartesian grid, a graph, or a distributed graph attached to a communicator.
// The topology is built once, when its communicator is made, and never changes; every query answers from it
// without communication, and the neighbourhood collectives build their plans from its neighbour lists.

// Topo is the kind of a communicator's topology (MPI_Topo_test).
type Topo uint8

const (
	TopoNone      Topo = iota // no topology (MPI_UNDEFINED)
	TopoCart                  // Cartesian grid (MPI_CART)
	TopoGraph                 // graph (MPI_GRAPH)
	TopoDistGraph             // distributed graph (MPI_DIST_GRAPH)
)

func (t Topo) String() string {
	switch t {
	case TopoCart:
		return "cartesian"
	case TopoGraph:
		return "graph"
	case TopoDistGraph:
		return "distributed graph"
	}
	return "none"
}

// topology is what a communicator knows of its topology. It is shared, read-only, by the communicators made from
// it by Dup.
type topology struct {
	kind Topo
	// Cartesian
	dims    []int
	periods []bool
	coords  []int // this rank's coordinates
	// graph: the whole graph, as given to GraphCreate
	index, edges []int
	// every kind: this rank's neighbours in the order the neighbourhood collectives use (Cartesian: per dimension,
	// the -1 then the +1 neighbour, ProcNull past a non-periodic edge)
	sources, dests []int
}

// Topo returns the kind of the communicator's topology (MPI_Topo_test).
func (c *Comm) Topo() Topo {
	if c == nil || c.topo == nil {
		return TopoNone
	}
	return c.topo.kind
}

func (c *Comm) topoOf(k Topo, what string) (*topology, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.topo == nil || c.topo.kind != k {
		return nil, fmt.Errorf("%w: %s needs a %s topology; the communicator has %s", ErrTopology, what, k, c.Topo())
	}
	return c.topo, nil
}

// DimsCreate returns dims with its zero entries replaced so that the product of all entries is nnodes
// (MPI_Dims_create). Non-zero entries are kept. The filled ones are as close to each other as possible (the
// largest as small as it can be, then the next, and so on) and in non-increasing order. dims itself is not
// modified. Errors: ErrArg for nnodes < 1, ErrDims for a negative entry or when the fixed entries' product does not
// divide nnodes.
func DimsCreate(nnodes int, dims []int) ([]int, error) {
	if nnodes < 1 {
		return nil, fmt.Errorf("%w: DimsCreate of %d nodes", ErrArg, nnodes)
	}
	out := slices.Clone(dims)
	if out == nil {
		out = []int{}
	}
	fixed, free := 1, 0
	for i, d := range dims {
		switch {
		case d < 0:
			return nil, fmt.Errorf("%w: DimsCreate: dims[%d] = %d", ErrDims, i, d)
		case d == 0:
			free++
		default:
			if fixed > nnodes/d {
				return nil, fmt.Errorf("%w: DimsCreate: the fixed dims %v multiply past %d nodes", ErrDims, dims, nnodes)
			}
			fixed *= d
		}
	}
	if nnodes%fixed != 0 || (free == 0 && fixed != nnodes) {
		return nil, fmt.Errorf("%w: DimsCreate: %d nodes do not fit dims %v", ErrDims, nnodes, dims)
	}
	fill := balanced(nnodes/fixed, free)
	j := 0
	for i, d := range out {
		if d == 0 {
			out[i] = fill[j]
			j++
		}
	}
	return out, nil
}

// balanced factors m into k factors, in non-increasing order, minimising the first (largest) factor, then the
// second, and so on: the lexicographically smallest such tuple.
func balanced(m, k int) []int {
	if k == 0 {
		return nil
	}
	divs := divisors(m)
	out := make([]int, k)
	if !factorInto(m, k, m, divs, out) {
		panic("gompj: balanced factorisation failed") // m = m·1·…·1 always works
	}
	return out
}

// factorInto writes into out (len k) the lexicographically smallest non-increasing factors of m, each at most
// limit; it reports false when there are none. divs lists the divisors of an multiple of m, ascending.
func factorInto(m, k, limit int, divs []int, out []int) bool {
	if k == 1 {
		if m > limit {
			return false
		}
		out[0] = m
		return true
	}
	for _, f := range divs {
		if f > limit || f > m {
			break
		}
		if m%f != 0 || !atLeastRoot(f, m, k) {
			continue // the largest of k factors of m is at least m's k-th root
		}
		if factorInto(m/f, k-1, f, divs, out[1:]) {
			out[0] = f
			return true
		}
	}
	return false
}

// atLeastRoot reports whether f^k >= m.
func atLeastRoot(f, m, k int) bool {
	p := 1
	for range k {
		if p >= (m+f-1)/f {
			return true
		}
		p *= f
	}
	return p >= m
}

// divisors returns the divisors of m in ascending order, made from m's prime factors (primeFactors). It used to try
// every d up to the square root of m, with the bound d*d <= m, which overflows near math.MaxInt:
// DimsCreate(math.MaxInt, []int{0, 0}) never returned; then trial division up to the square root of what was left,
// under which a prime near 2^62 still took about 3 s.
func divisors(m int) []int {
	fs := primeFactors(uint64(m))
	slices.Sort(fs)
	divs := []int{1}
	for i := 0; i < len(fs); {
		j := i
		for j < len(fs) && fs[j] == fs[i] {
			j++
		}
		divs = withPowers(divs, int(fs[i]), j-i)
		i = j
	}
	slices.Sort(divs)
	return divs
}

// primeFactors returns the prime factors of m (m >= 1), with multiplicity, in no order: small ones by trial
// division, then Miller-Rabin to recognise a prime and Pollard's rho (Brent's variant) to split a composite, so
// that a 62-bit prime or a product of two 31-bit primes takes microseconds rather than 2^31 divisions.
func primeFactors(m uint64) []uint64 {
	var fs []uint64
	for p := uint64(2); p < 1000 && p*p <= m; p++ {
		for m%p == 0 {
			fs = append(fs, p)
			m /= p
		}
	}
	return splitFactors(m, fs)
}

// splitFactors appends the prime factors of m, which has none below 1000, to fs.
func splitFactors(m uint64, fs []uint64) []uint64 {
	switch {
	case m == 1:
		return fs
	case m < 1000*1000 || isPrime(m):
		return append(fs, m) // no factor below 1000: a number under 1000² is prime
	}
	d := rho(m)
	return splitFactors(m/d, splitFactors(d, fs))
}

// mulMod is a*b mod m for a, b < m, without overflow.
func mulMod(a, b, m uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi, lo, m) // hi < m, since a*b < m*m
	return r
}

func powMod(b, e, m uint64) uint64 {
	r := uint64(1) % m
	for b %= m; e > 0; e >>= 1 {
		if e&1 != 0 {
			r = mulMod(r, b, m)
		}
		b = mulMod(b, b, m)
	}
	return r
}

// isPrime is Miller-Rabin with bases that decide every n below 2^64 (Jim Sinclair's seven); n is odd, > 3.
func isPrime(n uint64) bool {
	d, s := n-1, 0
	for d&1 == 0 {
		d >>= 1
		s++
	}
witness:
	for _, a := range [...]uint64{2, 325, 9375, 28178, 450775, 9780504, 1795265022} {
		a %= n
		if a == 0 {
			continue
		}
		x := powMod(a, d, n)
		if x == 1 || x == n-1 {
			continue
		}
		for range s - 1 {
			if x = mulMod(x, x, n); x == n-1 {
				continue witness
			}
		}
		return false
	}
	return true
}

// rho returns a non-trivial factor of the odd composite n (Pollard's rho, Brent's cycle finding, with the gcds
// taken over batches of products), trying further constants c when a walk closes without one.
func rho(n uint64) uint64 {
	const batch = 128
	for c := uint64(1); ; c++ {
		f := func(x uint64) uint64 { // x² + c mod n, without overflow for n near 2^64
			s, carry := bits.Add64(mulMod(x, x, n), c, 0)
			if carry != 0 || s >= n {
				s -= n
			}
			return s
		}
		y, x, ys := uint64(2), uint64(2), uint64(2)
		g, q := uint64(1), uint64(1)
		for r := 1; g == 1; r *= 2 {
			x = y
			for range r {
				y = f(y)
			}
			for k := 0; k < r && g == 1; k += batch {
				ys = y
				for range min(batch, r-k) {
					y = f(y)
					q = mulMod(q, absDiff(x, y), n)
				}
				g = gcd(q, n)
			}
		}
		if g == n { // the batch overshot: walk it again one step at a time
			for g = 1; g == 1; {
				ys = f(ys)
				g = gcd(absDiff(x, ys), n)
			}
		}
		if g != n {
			return g
		}
	}
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// withPowers extends divs, the divisors found so far, by the prime power p^e.
func withPowers(divs []int, p, e int) []int {
	n, pk := len(divs), 1
	for range e {
		pk *= p
		for _, d := range divs[:n] {
			divs = append(divs, d*pk)
		}
	}
	return divs
}

// argsHash folds a call's arguments into one value, to check that every member passed the same.
type argsHash uint64

func newArgsHash() argsHash { return 14695981039346656037 }

func (h argsHash) add(v int) argsHash {
	x := uint64(h)
	for i := range 8 {
		x ^= uint64(byte(uint64(v) >> (8 * i)))
		x *= 1099511628211
	}
	return argsHash(x)
}

func (h argsHash) ints(vs []int) argsHash {
	h = h.add(len(vs))
	for _, v := range vs {
		h = h.add(v)
	}
	return h
}

func (h argsHash) bools(vs []bool) argsHash {
	h = h.add(len(vs))
	for _, v := range vs {
		b := 0
		if v {
			b = 1
		}
		h = h.add(b)
	}
	return h
}

// sameArgs is a split verifier: every member's extras must equal the first member's.
func sameArgs(what string) func(all []int64, stride int) error {
	return func(all []int64, stride int) error {
		for i := stride; i < len(all); i += stride {
			if !slices.Equal(all[:stride], all[i:i+stride]) {
				return fmt.Errorf("%w: %s: rank %d passed other arguments than rank 0 (every member must pass the same)", ErrArg, what, i/stride)
			}
		}
		return nil
	}
}

// topoSplit runs split for a topology constructor. A member whose own arguments are invalid (bad) still takes
// part, so that every member fails (the others with ErrArg naming it) instead of waiting for it; verify then checks
// the valid members' extras against each other.
func (c *Comm) topoSplit(what string, color, key int, bad error, extra []int64, verify func(all []int64, stride int) error) (*Comm, error) {
	if err := c.intraOnly(what); err != nil {
		return nil, err
	}
	ok := int64(1)
	if bad != nil {
		ok, color, key = 0, Undefined, 0
		extra = make([]int64, len(extra))
	}
	return c.split(color, key, append([]int64{ok}, extra...), func(all []int64, stride int) error {
		for i := 0; i < len(all); i += stride {
			if all[i] == 0 {
				if bad != nil {
					return bad
				}
				return fmt.Errorf("%w: %s: rank %d passed invalid arguments", ErrArg, what, i/stride)
			}
		}
		if verify == nil || stride == 1 {
			return nil
		}
		rest := make([]int64, 0, len(all)/stride*(stride-1))
		for i := 0; i < len(all); i += stride {
			rest = append(rest, all[i+1:i+stride]...)
		}
		return verify(rest, stride-1)
	})
}

// --- Cartesian ---

// cartSize checks dims and periods and returns the number of grid points.
func cartSize(what string, dims []int, periods []bool, limit int) (int, error) {
	if periods != nil && len(periods) != len(dims) {
		return 0, fmt.Errorf("%w: %s: %d periods for %d dims", ErrDims, what, len(periods), len(dims))
	}
	n := 1
	for i, d := range dims {
		if d < 1 {
			return 0, fmt.Errorf("%w: %s: dims[%d] = %d (each must be at least 1)", ErrDims, what, i, d)
		}
		if n > limit/d {
			return 0, fmt.Errorf("%w: %s: a grid of %v needs more than the communicator's %d ranks", ErrDims, what, dims, limit)
		}
		n *= d
	}
	return n, nil
}

// CartCreate makes a communicator whose members form the Cartesian grid dims (row-major rank order), periodic
// where periods says (nil: nowhere). The first prod(dims) ranks of c are the grid; the others get nil, nil. With
// reorder, ranks may be renumbered so that grid neighbours share a node (see cartOrder). Collective over c: every
// member must pass the same arguments (checked: ErrArg otherwise, on every member).
func (c *Comm) CartCreate(dims []int, periods []bool, reorder bool) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	c.StartCall() // bad arguments too: the members split alike and all fail (topoSplit)
	p, bad := cartSize("CartCreate", dims, periods, c.size)
	pers := make([]bool, len(dims))
	copy(pers, periods)
	dims = slices.Clone(dims)
	color, key := Undefined, 0
	if bad == nil && c.rank < p {
		color, key = 0, c.rank
		if reorder {
			nodes := make([]int, p)
			for i := range nodes {
				nodes[i] = c.w.NodeOf(c.WorldRank(i))
			}
			key = cartOrder(dims, pers, nodes)[c.rank]
		}
	}
	h := newArgsHash().ints(dims).bools(pers).bools([]bool{reorder})
	nc, err := c.topoSplit("CartCreate", color, key, bad, []int64{int64(h)}, sameArgs("CartCreate"))
	if err != nil || nc == nil {
		return nil, err
	}
	nc.topo = newCart(dims, pers, nc.rank)
	return nc, nil
}

func newCart(dims []int, periods []bool, rank int) *topology {
	t := &topology{kind: TopoCart, dims: dims, periods: periods}
	t.coords = cartCoords(dims, rank)
	nd := len(dims)
	t.sources = make([]int, 2*nd)
	for d := range nd {
		t.sources[2*d], t.sources[2*d+1] = t.shift(d, 1)
	}
	t.dests = t.sources
	return t
}

func cartCoords(dims []int, rank int) []int {
	coords := make([]int, len(dims))
	for i := len(dims) - 1; i >= 0; i-- {
		coords[i] = rank % dims[i]
		rank /= dims[i]
	}
	return coords
}

// rankAt returns the rank at coords, wrapping periodic dimensions; ok is false past a non-periodic edge.
func (t *topology) rankAt(coords []int) (int, bool) {
	r := 0
	for i, x := range coords {
		d := t.dims[i]
		if x < 0 || x >= d {
			if !t.periods[i] {
				return 0, false
			}
			x = ((x % d) + d) % d
		}
		r = r*d + x
	}
	return r, true
}

// shift returns the ranks disp steps down and up dimension dim from this rank (ProcNull past a non-periodic edge).
func (t *topology) shift(dim, disp int) (source, dest int) {
	at := func(delta int) int {
		cs := slices.Clone(t.coords)
		cs[dim] += delta
		r, ok := t.rankAt(cs)
		if !ok {
			return ProcNull
		}
		return r
	}
	return at(-disp), at(disp)
}

// CartGet returns the grid's dimensions and periodicity, and this rank's coordinates (MPI_Cart_get). The slices
// are the caller's.
func (c *Comm) CartGet() (dims []int, periods []bool, coords []int, err error) {
	t, err := c.topoOf(TopoCart, "CartGet")
	if err != nil {
		return nil, nil, nil, err
	}
	return slices.Clone(t.dims), slices.Clone(t.periods), slices.Clone(t.coords), nil
}

// CartCoords returns the coordinates of rank in the grid (row-major, as MPI).
func (c *Comm) CartCoords(rank int) ([]int, error) {
	t, err := c.topoOf(TopoCart, "CartCoords")
	if err != nil {
		return nil, err
	}
	if rank < 0 || rank >= c.size {
		return nil, errRank(rank, c.size)
	}
	return cartCoords(t.dims, rank), nil
}

// CartRank returns the rank at coords. Periodic dimensions wrap; a coordinate past a non-periodic edge is ErrRank.
func (c *Comm) CartRank(coords []int) (int, error) {
	t, err := c.topoOf(TopoCart, "CartRank")
	if err != nil {
		return 0, err
	}
	if len(coords) != len(t.dims) {
		return 0, fmt.Errorf("%w: CartRank: %d coordinates for %d dims", ErrDims, len(coords), len(t.dims))
	}
	r, ok := t.rankAt(coords)
	if !ok {
		return 0, fmt.Errorf("%w: CartRank: coordinates %v are outside the non-periodic grid %v", ErrRank, coords, t.dims)
	}
	return r, nil
}

// CartShift returns the ranks to receive from (disp steps down dimension dim) and to send to (disp steps up), as
// for a shift of data along dim: ProcNull past a non-periodic edge.
func (c *Comm) CartShift(dim, disp int) (source, dest int, err error) {
	t, err := c.topoOf(TopoCart, "CartShift")
	if err != nil {
		return 0, 0, err
	}
	if dim < 0 || dim >= len(t.dims) {
		return 0, 0, fmt.Errorf("%w: CartShift along dimension %d of a %d-dimensional grid", ErrDims, dim, len(t.dims))
	}
	source, dest = t.shift(dim, disp)
	return source, dest, nil
}

// CartSub partitions the grid into sub-grids of the dimensions remain keeps, one communicator for each, with
// those dimensions' extents and periodicity (MPI_Cart_sub). Keeping none gives each rank a grid of its own
// (zero dimensions, one rank). Collective over c.
func (c *Comm) CartSub(remain []bool) (*Comm, error) {
	t, err := c.topoOf(TopoCart, "CartSub")
	if err != nil {
		return nil, err
	}
	c.StartCall()
	var bad error
	if len(remain) != len(t.dims) {
		bad = fmt.Errorf("%w: CartSub: %d flags for %d dims", ErrDims, len(remain), len(t.dims))
		remain = nil
	}
	color, key := 0, 0
	var dims []int
	var pers []bool
	for i, keep := range remain {
		if keep {
			key = key*t.dims[i] + t.coords[i]
			dims = append(dims, t.dims[i])
			pers = append(pers, t.periods[i])
		} else {
			color = color*t.dims[i] + t.coords[i]
		}
	}
	if dims == nil {
		dims, pers = []int{}, []bool{}
	}
	h := newArgsHash().bools(remain)
	nc, err := c.topoSplit("CartSub", color, key, bad, []int64{int64(h)}, sameArgs("CartSub"))
	if err != nil {
		return nil, err
	}
	nc.topo = newCart(dims, pers, nc.rank)
	return nc, nil
}

// cartOrder chooses the new rank of each of a grid's ranks (node[i] is the node of rank i) for CartCreate with
// reorder. gompj renumbers only when that puts more grid neighbours on the same node: when every node holds the
// same number of the grid's ranks and the grid can be cut into equal blocks, one per node, so that fewer grid edges
// join two nodes than in the row-major order. Block b (row-major over the blocks) goes to the node of the b-th
// distinct node in rank order, and its points to that node's ranks in rank order, row-major inside the block.
// Otherwise, and whenever the row-major order is as good, the ranks keep their order: it is what the program
// would get without reorder, and what its author most likely reasons about. The choice depends only on the
// arguments and the layout, so every member makes the same one without talking.
func cartOrder(dims []int, periods []bool, node []int) []int {
	p := len(node)
	ident := make([]int, p)
	for i := range ident {
		ident[i] = i
	}
	var order []int
	members := map[int][]int{}
	for i, n := range node {
		if _, ok := members[n]; !ok {
			order = append(order, n)
		}
		members[n] = append(members[n], i)
	}
	q := len(order)
	if q <= 1 || q == p || p%q != 0 {
		return ident
	}
	for _, n := range order {
		if len(members[n]) != p/q {
			return ident
		}
	}
	bestCut := cutEdges(dims, periods, func(cell int) int { return node[cell] })
	var best []int
	for _, g := range blockGrids(q, dims) {
		newRank, cellNode := blockOrder(dims, g, order, members)
		if cut := cutEdges(dims, periods, func(cell int) int { return cellNode[cell] }); cut < bestCut {
			bestCut, best = cut, newRank
		}
	}
	if best == nil {
		return ident
	}
	return best
}

// cutEdges counts the grid edges (each point to its +1 neighbour in each dimension) whose ends are on two nodes.
func cutEdges(dims []int, periods []bool, nodeOf func(cell int) int) int {
	p := 1
	for _, d := range dims {
		p *= d
	}
	t := &topology{dims: dims, periods: periods}
	cut := 0
	for cell := range p {
		coords := cartCoords(dims, cell)
		for d := range dims {
			coords[d]++
			if nb, ok := t.rankAt(coords); ok && nodeOf(nb) != nodeOf(cell) {
				cut++
			}
			coords[d]--
		}
	}
	return cut
}

// blockGrids lists the ways to cut a grid into q equal blocks: per dimension, a number of blocks dividing it, with
// product q.
func blockGrids(q int, dims []int) [][]int {
	var out [][]int
	g := make([]int, len(dims))
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == len(dims) {
			if left == 1 {
				out = append(out, slices.Clone(g))
			}
			return
		}
		for f := 1; f <= left; f++ {
			if left%f == 0 && dims[i]%f == 0 {
				g[i] = f
				rec(i+1, left/f)
			}
		}
	}
	rec(0, q)
	return out
}

// blockOrder maps the grid's ranks onto the blocks of grid g (see cartOrder): newRank[old rank] and the node of
// every grid point.
func blockOrder(dims, g, order []int, members map[int][]int) (newRank, cellNode []int) {
	p := 1
	for _, d := range dims {
		p *= d
	}
	nd := len(dims)
	b := make([]int, nd)
	for i := range dims {
		b[i] = dims[i] / g[i]
	}
	newRank, cellNode = make([]int, p), make([]int, p)
	for cell := range p {
		coords := cartCoords(dims, cell)
		blk, in := 0, 0
		for i := range nd {
			blk = blk*g[i] + coords[i]/b[i]
			in = in*b[i] + coords[i]%b[i]
		}
		n := order[blk]
		cellNode[cell] = n
		newRank[members[n][in]] = cell
	}
	return newRank, cellNode
}

// --- graphs ---

// GraphCreate makes a communicator with the graph topology given by index and edges (MPI_Graph_create): node i's
// neighbours are edges[index[i-1]:index[i]] (index[-1] = 0). The first len(index) ranks of c are the graph's
// nodes; the others get nil, nil. gompj keeps the ranks' order (reorder is accepted and has no effect: placing a
// general graph well is a partitioning problem, and the identity is what Open MPI's default does too). Collective:
// every member must pass the same graph (checked: ErrArg otherwise).
func (c *Comm) GraphCreate(index, edges []int, reorder bool) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	c.StartCall()
	n := len(index)
	bad := checkGraph(index, edges, c.size)
	color := Undefined
	if c.rank < n {
		color = 0
	}
	h := newArgsHash().ints(index).ints(edges).bools([]bool{reorder})
	nc, err := c.topoSplit("GraphCreate", color, c.rank, bad, []int64{int64(h)}, sameArgs("GraphCreate"))
	if err != nil || nc == nil {
		return nil, err
	}
	t := &topology{kind: TopoGraph, index: slices.Clone(index), edges: slices.Clone(edges)}
	t.sources = t.adjacent(nc.rank)
	t.dests = t.sources
	nc.topo = t
	return nc, nil
}

func checkGraph(index, edges []int, size int) error {
	n := len(index)
	if n > size {
		return fmt.Errorf("%w: GraphCreate: a graph of %d nodes on %d ranks", ErrArg, n, size)
	}
	prev := 0
	for i, x := range index {
		if x < prev {
			return fmt.Errorf("%w: GraphCreate: index[%d] = %d after %d (it must not decrease)", ErrArg, i, x, prev)
		}
		prev = x
	}
	if prev != len(edges) {
		return fmt.Errorf("%w: GraphCreate: index ends at %d, with %d edges", ErrArg, prev, len(edges))
	}
	for i, e := range edges {
		if e < 0 || e >= n {
			return fmt.Errorf("%w: GraphCreate: edges[%d] = %d in a graph of %d nodes", ErrRank, i, e, n)
		}
	}
	return nil
}

func (t *topology) adjacent(rank int) []int {
	lo := 0
	if rank > 0 {
		lo = t.index[rank-1]
	}
	return slices.Clone(t.edges[lo:t.index[rank]])
}

// GraphGet returns the graph of a graph communicator as GraphCreate took it (MPI_Graph_get).
func (c *Comm) GraphGet() (index, edges []int, err error) {
	t, err := c.topoOf(TopoGraph, "GraphGet")
	if err != nil {
		return nil, nil, err
	}
	return slices.Clone(t.index), slices.Clone(t.edges), nil
}

// GraphSymmetric reports whether every edge of a graph communicator's graph has its reverse, as often (the
// neighbourhood collectives need it: on a graph, a rank's neighbours are both its sources and its destinations).
func (c *Comm) GraphSymmetric() bool {
	t := c.topo
	if t == nil || t.kind != TopoGraph {
		return false
	}
	type edge struct{ a, b int }
	count := map[edge]int{}
	lo := 0
	for i, hi := range t.index {
		for _, j := range t.edges[lo:hi] {
			count[edge{i, j}]++
			count[edge{j, i}]--
		}
		lo = hi
	}
	for _, v := range count {
		if v != 0 {
			return false
		}
	}
	return true
}

// edgeHash maps an edge to a pseudo-random value (splitmix64's finaliser): the sums over all members of the
// hashes of the edges they send on and receive on agree when the edge lists are consistent, and, with
// overwhelming probability, only then.
func edgeHash(from, to int) uint64 {
	x := uint64(uint32(from))<<32 | uint64(uint32(to))
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// DistGraphCreateAdjacent makes a communicator of c's group with a distributed graph topology (MPI_Dist_graph_
// create_adjacent): each rank names the ranks it receives from (sources) and sends to (destinations), in the order
// its neighbourhood collectives use them; an edge may repeat. The lists must agree: j among i's destinations as
// often as i among j's sources. That is checked (ErrTopology on every member otherwise), so that a neighbourhood
// collective can never wait for a message nobody sends. gompj keeps the ranks' order (reorder has no effect, as
// for GraphCreate). Collective over c.
func (c *Comm) DistGraphCreateAdjacent(sources, destinations []int, reorder bool) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	c.StartCall()
	var out, in uint64
	var bad error
	for i, s := range sources {
		if s < 0 || s >= c.size {
			bad = fmt.Errorf("%w: DistGraphCreateAdjacent: sources[%d] = %d", ErrRank, i, s)
		}
		in += edgeHash(s, c.rank)
	}
	for i, d := range destinations {
		if d < 0 || d >= c.size {
			bad = fmt.Errorf("%w: DistGraphCreateAdjacent: destinations[%d] = %d", ErrRank, i, d)
		}
		out += edgeHash(c.rank, d)
	}
	r := int64(0)
	if reorder {
		r = 1
	}
	nc, err := c.topoSplit("DistGraphCreateAdjacent", 0, c.rank, bad, []int64{int64(out), int64(in), r}, func(all []int64, stride int) error {
		var so, si uint64
		for i := 0; i < len(all); i += stride {
			so += uint64(all[i])
			si += uint64(all[i+1])
			if all[i+2] != all[2] {
				return fmt.Errorf("%w: DistGraphCreateAdjacent: rank %d passed another reorder than rank 0", ErrArg, i/stride)
			}
		}
		if so != si {
			return fmt.Errorf("%w: DistGraphCreateAdjacent: the sources and destinations the ranks passed do not match (some rank sends to one that does not list it among its sources, or as often)", ErrTopology)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	nc.topo = &topology{kind: TopoDistGraph, sources: slices.Clone(sources), dests: slices.Clone(destinations)}
	if nc.topo.sources == nil {
		nc.topo.sources = []int{}
	}
	if nc.topo.dests == nil {
		nc.topo.dests = []int{}
	}
	return nc, nil
}

// Neighbors returns the ranks this rank receives from and sends to in neighbourhood collectives, in their order.
// Cartesian: per dimension, the -1 then the +1 neighbour, ProcNull past a non-periodic edge, for both. Graph:
// the rank's adjacency list, for both. Distributed graph: the lists it was created with. The slices are the
// caller's.
func (c *Comm) Neighbors() (sources, destinations []int, err error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	if c.topo == nil {
		return nil, nil, fmt.Errorf("%w: Neighbors of a communicator without a topology", ErrTopology)
	}
	return slices.Clone(c.topo.sources), slices.Clone(c.topo.dests), nil
}
