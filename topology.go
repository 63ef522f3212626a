package gompj

import "github.com/gompj/gompj/ranks"

// Topo is the kind of a communicator's virtual topology (MPI_Topo_test).
type Topo = ranks.Topo

// Topology kinds.
const (
	TopoNone      = ranks.TopoNone
	TopoCart      = ranks.TopoCart
	TopoGraph     = ranks.TopoGraph
	TopoDistGraph = ranks.TopoDistGraph
)

// DimsCreate returns dims with its zeros filled so that the product of all entries is nnodes, the filled entries
// as close to each other as possible and non-increasing (MPI_Dims_create); non-zero entries are kept and dims is
// not modified. ErrDims when the non-zero entries' product does not divide nnodes or an entry is negative.
func DimsCreate(nnodes int, dims []int) ([]int, error) { return ranks.DimsCreate(nnodes, dims) }

// CartCreate makes a communicator whose members form a Cartesian grid of extents dims, periodic where periods says
// (nil: nowhere), ranked row-major. The first prod(dims) ranks take part; the others get nil, nil. With reorder,
// gompj renumbers the ranks into one block of the grid per node when every node holds as many of them and that
// joins fewer grid neighbours across nodes than the row-major order; otherwise the order is kept. Collective.
func (c *Comm) CartCreate(dims []int, periods []bool, reorder bool) (*Comm, error) {
	n, err := c.call(ranks.CallComm, 0).CartCreate(dims, periods, reorder)
	return wrap(n), err
}

// CartGet returns the grid's extents and periodicity and this rank's coordinates (MPI_Cart_get).
func (c *Comm) CartGet() (dims []int, periods []bool, coords []int, err error) {
	return c.rc().CartGet()
}

// CartCoords returns the coordinates of rank (row-major order, as MPI).
func (c *Comm) CartCoords(rank int) ([]int, error) { return c.rc().CartCoords(rank) }

// CartRank returns the rank at coords; periodic dimensions wrap, past a non-periodic edge it is ErrRank.
func (c *Comm) CartRank(coords []int) (int, error) { return c.rc().CartRank(coords) }

// CartShift returns the ranks disp steps down (source) and up (dest) dimension dim; ProcNull past a non-periodic
// edge. Send to dest and receive from source to shift data up the dimension.
func (c *Comm) CartShift(dim, disp int) (source, dest int, err error) {
	return c.rc().CartShift(dim, disp)
}

// CartSub splits the grid into the sub-grids spanned by the dimensions remain keeps (MPI_Cart_sub). Collective.
func (c *Comm) CartSub(remain []bool) (*Comm, error) {
	n, err := c.call(ranks.CallComm, 0).CartSub(remain)
	return wrap(n), err
}

// GraphCreate makes a communicator with a graph topology: node i's neighbours are edges[index[i-1]:index[i]]
// (MPI_Graph_create). The first len(index) ranks take part; the others get nil, nil. reorder has no effect.
// Collective.
func (c *Comm) GraphCreate(index, edges []int, reorder bool) (*Comm, error) {
	n, err := c.call(ranks.CallComm, 0).GraphCreate(index, edges, reorder)
	return wrap(n), err
}

// GraphGet returns a graph communicator's graph as GraphCreate took it (MPI_Graph_get).
func (c *Comm) GraphGet() (index, edges []int, err error) { return c.rc().GraphGet() }

// DistGraphCreateAdjacent makes a communicator of the same group in which each rank receives from sources and
// sends to destinations (MPI_Dist_graph_create_adjacent). The ranks' lists must agree (checked: ErrTopology).
// reorder has no effect. Collective.
func (c *Comm) DistGraphCreateAdjacent(sources, destinations []int, reorder bool) (*Comm, error) {
	n, err := c.call(ranks.CallComm, 0).DistGraphCreateAdjacent(sources, destinations, reorder)
	return wrap(n), err
}

// Neighbors returns the ranks this rank receives from and sends to in the neighbourhood collectives, in order.
// Cartesian: per dimension, the -1 then the +1 neighbour (ProcNull past a non-periodic edge), for both.
func (c *Comm) Neighbors() (sources, destinations []int, err error) { return c.rc().Neighbors() }

// Topo returns the kind of the communicator's topology.
func (c *Comm) Topo() Topo { return c.rc().Topo() }
