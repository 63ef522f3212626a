package gompj

import (
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// Op is a reduction operation: one of the predefined ones, or made by NewOp.
type Op = collectives.Op

// The predefined reduction operations. Sum and Prod apply to every numeric type (complex included); Min and Max
// to integers and floats; Land, Lor and Lxor to bool and integers (non-zero is true); Band, Bor and Bxor to
// integers; MaxLoc and MinLoc to slices of Loc pairs.
var (
	Sum    = collectives.Sum
	Prod   = collectives.Prod
	Min    = collectives.Min
	Max    = collectives.Max
	Land   = collectives.Land
	Lor    = collectives.Lor
	Lxor   = collectives.Lxor
	Band   = collectives.Band
	Bor    = collectives.Bor
	Bxor   = collectives.Bxor
	MaxLoc = collectives.MaxLoc
	MinLoc = collectives.MinLoc
)

// Loc is a value with the index (usually the rank) it came from, the element of MaxLoc and MinLoc reductions:
// reduce a []gompj.Loc[float64] and read back the extreme values and where they were. Ties keep the smaller index.
type Loc[T collectives.LocValue] = collectives.Loc[T]

// ValueIndex is the commonest Loc: a float64 and an int (MPI_DOUBLE_INT).
type ValueIndex = collectives.Loc[float64]

// NewOp makes a user-defined reduction over slices of T: fn sets inout[i] = in[i] op inout[i], where in holds the
// contribution of lower ranks. A non-commutative op is applied in rank order (it must be associative).
func NewOp[T any](fn func(in, inout []T), commutative bool) Op {
	return collectives.NewOp(fn, commutative)
}

// ReduceLocal combines in into inout with op on this rank alone (MPI_Reduce_local): inout[i] = in[i] op inout[i],
// in taking the place of a lower rank's contribution. Both hold the same number of elements of one type.
func ReduceLocal(in, inout any, op Op) error { return collectives.ReduceLocal(in, inout, op) }

// InPlace, passed as the send buffer of Allreduce, Reduce (root), Gather(v) (root), Allgather(v), Alltoall,
// ReduceScatter(Block), Scan and Exscan, or as the receive buffer of Scatter(v) (root), means the data is already
// in the other buffer (MPI_IN_PLACE).
var InPlace = collectives.InPlace

// Barrier blocks until every member of the communicator has called it.
func (c *Comm) Barrier() error { return collectives.Barrier(c.call(ranks.CallBarrier, 0)) }

// Bcast copies the root's buf into every member's buf: a slice of a primitive type, or a pointer to any other
// value (msgpack-encoded).
func (c *Comm) Bcast(buf any, root int) error {
	return collectives.Bcast(c.call(ranks.CallBcast, root), buf, root)
}

// Reduce combines every member's send with op into the root's recv (only significant at the root; may be nil
// elsewhere).
func (c *Comm) Reduce(send, recv any, op Op, root int) error {
	return collectives.Reduce(c.call(ranks.CallReduce, root), send, recv, op, root)
}

// Allreduce combines every member's send with op into every member's recv.
func (c *Comm) Allreduce(send, recv any, op Op) error {
	return collectives.Allreduce(c.call(ranks.CallAllreduce, 0), send, recv, op)
}

// Gather collects every member's send, in rank order, into the root's recv.
func (c *Comm) Gather(send, recv any, root int) error {
	return collectives.Gather(c.call(ranks.CallGather, root), send, recv, root)
}

// Gatherv collects counts[i] elements of rank i into the root's recv at displs[i] (nil displs: packed).
func (c *Comm) Gatherv(send, recv any, counts, displs []int, root int) error {
	return collectives.Gatherv(c.call(ranks.CallGather, root), send, recv, counts, displs, root)
}

// Scatter hands block i of the root's send to rank i.
func (c *Comm) Scatter(send, recv any, root int) error {
	return collectives.Scatter(c.call(ranks.CallScatter, root), send, recv, root)
}

// Scatterv hands counts[i] elements at displs[i] of the root's send to rank i (nil displs: packed).
func (c *Comm) Scatterv(send any, counts, displs []int, recv any, root int) error {
	return collectives.Scatterv(c.call(ranks.CallScatter, root), send, counts, displs, recv, root)
}

// Allgather collects every member's send, in rank order, into every member's recv.
func (c *Comm) Allgather(send, recv any) error {
	return collectives.Allgather(c.call(ranks.CallAllgather, 0), send, recv)
}

// Allgatherv collects counts[i] elements of rank i into every member's recv at displs[i] (nil displs: packed).
func (c *Comm) Allgatherv(send, recv any, counts, displs []int) error {
	return collectives.Allgatherv(c.call(ranks.CallAllgather, 0), send, recv, counts, displs)
}

// Alltoall sends block j of send to rank j, which stores it as block i (the sender's rank) of its recv.
func (c *Comm) Alltoall(send, recv any) error {
	return collectives.Alltoall(c.call(ranks.CallAlltoall, 0), send, recv)
}

// Alltoallv sends sendCounts[j] elements at sendDispls[j] to rank j, stored at its recvDispls[i] (nil
// displacements: packed).
func (c *Comm) Alltoallv(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) error {
	return collectives.Alltoallv(c.call(ranks.CallAlltoall, 0), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// ReduceScatter combines every member's send with op and leaves block i (counts[i] elements) in rank i's recv.
// InPlace as send: the whole vector is in recv, and the block is left at its start.
func (c *Comm) ReduceScatter(send, recv any, counts []int, op Op) error {
	return collectives.ReduceScatter(c.call(ranks.CallReduceScatter, 0), send, recv, counts, op)
}

// ReduceScatterBlock is ReduceScatter with blocks of len(recv) elements (InPlace as send: recv holds the whole
// vector, Size() blocks, and the block is left at its start).
func (c *Comm) ReduceScatterBlock(send, recv any, op Op) error {
	return collectives.ReduceScatterBlock(c.call(ranks.CallReduceScatter, 0), send, recv, op)
}

// Scan leaves in rank i's recv the combination of the sends of ranks 0..i.
func (c *Comm) Scan(send, recv any, op Op) error {
	return collectives.Scan(c.call(ranks.CallScan, 0), send, recv, op)
}

// Exscan leaves in rank i's recv the combination of the sends of ranks 0..i-1 (rank 0's recv is untouched).
func (c *Comm) Exscan(send, recv any, op Op) error {
	return collectives.Exscan(c.call(ranks.CallExscan, 0), send, recv, op)
}

// ForceAlgorithm makes this rank's later calls of collective coll on c use algorithm algo where it applies ("" to
// undo); every member must do the same. For benchmarks; see CollectiveTable for the names.
func (c *Comm) ForceAlgorithm(coll, algo string) error { return collectives.Force(c.rc(), coll, algo) }

// CollectiveTable describes the collective algorithm selection in force, for `gompj info`.
func CollectiveTable() string { return collectives.Describe() }

// NeighborAllgather sends send to each of the topology's destinations and receives from source j into block j of
// recv (blocks of len(send) elements). Cartesian sources and destinations are, per dimension, the -1 then the +1
// neighbour; a ProcNull neighbour sends nothing and its block of recv is left untouched.
func (c *Comm) NeighborAllgather(send, recv any) error {
	return collectives.NeighborAllgather(c.call(ranks.CallNeighborAllgather, 0), send, recv)
}

// NeighborAllgatherv is NeighborAllgather receiving counts[j] elements from source j at displs[j] of recv (nil
// displs: packed in source order).
func (c *Comm) NeighborAllgatherv(send, recv any, counts, displs []int) error {
	return collectives.NeighborAllgatherv(c.call(ranks.CallNeighborAllgather, 0), send, recv, counts, displs)
}

// NeighborAlltoall sends block k of send to destination k and receives block j of recv from source j; blocks are
// len(send)/outdegree elements. On a grid, what a rank sends to its -1 neighbour arrives there as the block from
// its +1 neighbour.
func (c *Comm) NeighborAlltoall(send, recv any) error {
	return collectives.NeighborAlltoall(c.call(ranks.CallNeighborAlltoall, 0), send, recv)
}

// NeighborAlltoallv sends sendCounts[k] elements at sendDispls[k] to destination k and receives recvCounts[j]
// elements from source j at recvDispls[j] (nil displacements: packed).
func (c *Comm) NeighborAlltoallv(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) error {
	return collectives.NeighborAlltoallv(c.call(ranks.CallNeighborAlltoall, 0), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}
