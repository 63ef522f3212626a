package gompj

import (
	"github.com/gompj/gompj/nbc"
	"github.com/gompj/gompj/ranks"
)

// Nonblocking collectives (MPI-3). Each starts the collective and returns its request at once; the collective then
// moves on by itself (on the node's worker pool, GOMPJ_WORKERS; GOMPJ_ASYNC_PROGRESS=0 leaves it to Test and
// Wait) while the caller computes. The buffers belong to the collective until its request completes: do not
// change a send buffer or read a receive buffer before Wait or Test says it is done. The arguments are those of the
// blocking collective, and a bad one fails here with the same error class. The requests mix with point-to-point
// ones in Wait, Test, Waitall, Waitany and Testall. Any number may be outstanding on a communicator, beside
// blocking collectives and point-to-point traffic; every member starts a communicator's collectives in the same
// order.

// Ibarrier starts a barrier: its request completes once every member has started it.
func (c *Comm) Ibarrier() (*Request, error) { return nbc.Ibarrier(c.call(ranks.CallBarrier, 0)) }

// Ibcast starts a bcast of the root's buf.
func (c *Comm) Ibcast(buf any, root int) (*Request, error) {
	return nbc.Ibcast(c.call(ranks.CallBcast, root), buf, root)
}

// Ireduce starts a reduce of every member's send into the root's recv.
func (c *Comm) Ireduce(send, recv any, op Op, root int) (*Request, error) {
	return nbc.Ireduce(c.call(ranks.CallReduce, root), send, recv, op, root)
}

// Iallreduce starts an allreduce.
func (c *Comm) Iallreduce(send, recv any, op Op) (*Request, error) {
	return nbc.Iallreduce(c.call(ranks.CallAllreduce, 0), send, recv, op)
}

// Igather starts a gather into the root's recv.
func (c *Comm) Igather(send, recv any, root int) (*Request, error) {
	return nbc.Igather(c.call(ranks.CallGather, root), send, recv, root)
}

// Igatherv starts a gatherv.
func (c *Comm) Igatherv(send, recv any, counts, displs []int, root int) (*Request, error) {
	return nbc.Igatherv(c.call(ranks.CallGather, root), send, recv, counts, displs, root)
}

// Iscatter starts a scatter from the root's send.
func (c *Comm) Iscatter(send, recv any, root int) (*Request, error) {
	return nbc.Iscatter(c.call(ranks.CallScatter, root), send, recv, root)
}

// Iscatterv starts a scatterv.
func (c *Comm) Iscatterv(send any, counts, displs []int, recv any, root int) (*Request, error) {
	return nbc.Iscatterv(c.call(ranks.CallScatter, root), send, counts, displs, recv, root)
}

// Iallgather starts an allgather.
func (c *Comm) Iallgather(send, recv any) (*Request, error) {
	return nbc.Iallgather(c.call(ranks.CallAllgather, 0), send, recv)
}

// Iallgatherv starts an allgatherv.
func (c *Comm) Iallgatherv(send, recv any, counts, displs []int) (*Request, error) {
	return nbc.Iallgatherv(c.call(ranks.CallAllgather, 0), send, recv, counts, displs)
}

// Ialltoall starts an alltoall.
func (c *Comm) Ialltoall(send, recv any) (*Request, error) {
	return nbc.Ialltoall(c.call(ranks.CallAlltoall, 0), send, recv)
}

// Ialltoallv starts an alltoallv.
func (c *Comm) Ialltoallv(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*Request, error) {
	return nbc.Ialltoallv(c.call(ranks.CallAlltoall, 0), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// IreduceScatter starts a reduce_scatter.
func (c *Comm) IreduceScatter(send, recv any, counts []int, op Op) (*Request, error) {
	return nbc.IreduceScatter(c.call(ranks.CallReduceScatter, 0), send, recv, counts, op)
}

// IreduceScatterBlock starts a reduce_scatter_block.
func (c *Comm) IreduceScatterBlock(send, recv any, op Op) (*Request, error) {
	return nbc.IreduceScatterBlock(c.call(ranks.CallReduceScatter, 0), send, recv, op)
}

// Iscan starts an inclusive scan.
func (c *Comm) Iscan(send, recv any, op Op) (*Request, error) {
	return nbc.Iscan(c.call(ranks.CallScan, 0), send, recv, op)
}

// Iexscan starts an exclusive scan.
func (c *Comm) Iexscan(send, recv any, op Op) (*Request, error) {
	return nbc.Iexscan(c.call(ranks.CallExscan, 0), send, recv, op)
}

// Persistent collectives (MPI-4): the same arguments as the nonblocking ones, bound once. Each Init call builds
// the collective (its algorithm, schedule, buffers, requests, shared-memory slot) and returns an inactive request;
// Start or Startall runs it once on the buffers given to Init, as they are then, without allocating (for slices of
// primitive types); Wait, Test and the other completion calls complete a run; Free releases it. Bad arguments fail
// at Init with the blocking collective's error class. Every member calls a communicator's Init calls in the same
// order.

// BarrierInit makes a persistent barrier.
func (c *Comm) BarrierInit() (*Request, error) { return nbc.BarrierInit(c.call(ranks.CallBarrier, 0)) }

// BcastInit makes a persistent bcast of the root's buf.
func (c *Comm) BcastInit(buf any, root int) (*Request, error) {
	return nbc.BcastInit(c.call(ranks.CallBcast, root), buf, root)
}

// ReduceInit makes a persistent reduce.
func (c *Comm) ReduceInit(send, recv any, op Op, root int) (*Request, error) {
	return nbc.ReduceInit(c.call(ranks.CallReduce, root), send, recv, op, root)
}

// AllreduceInit makes a persistent allreduce.
func (c *Comm) AllreduceInit(send, recv any, op Op) (*Request, error) {
	return nbc.AllreduceInit(c.call(ranks.CallAllreduce, 0), send, recv, op)
}

// GatherInit makes a persistent gather.
func (c *Comm) GatherInit(send, recv any, root int) (*Request, error) {
	return nbc.GatherInit(c.call(ranks.CallGather, root), send, recv, root)
}

// GathervInit makes a persistent gatherv.
func (c *Comm) GathervInit(send, recv any, counts, displs []int, root int) (*Request, error) {
	return nbc.GathervInit(c.call(ranks.CallGather, root), send, recv, counts, displs, root)
}

// ScatterInit makes a persistent scatter.
func (c *Comm) ScatterInit(send, recv any, root int) (*Request, error) {
	return nbc.ScatterInit(c.call(ranks.CallScatter, root), send, recv, root)
}

// ScattervInit makes a persistent scatterv.
func (c *Comm) ScattervInit(send any, counts, displs []int, recv any, root int) (*Request, error) {
	return nbc.ScattervInit(c.call(ranks.CallScatter, root), send, counts, displs, recv, root)
}

// AllgatherInit makes a persistent allgather.
func (c *Comm) AllgatherInit(send, recv any) (*Request, error) {
	return nbc.AllgatherInit(c.call(ranks.CallAllgather, 0), send, recv)
}

// AllgathervInit makes a persistent allgatherv.
func (c *Comm) AllgathervInit(send, recv any, counts, displs []int) (*Request, error) {
	return nbc.AllgathervInit(c.call(ranks.CallAllgather, 0), send, recv, counts, displs)
}

// AlltoallInit makes a persistent alltoall.
func (c *Comm) AlltoallInit(send, recv any) (*Request, error) {
	return nbc.AlltoallInit(c.call(ranks.CallAlltoall, 0), send, recv)
}

// AlltoallvInit makes a persistent alltoallv.
func (c *Comm) AlltoallvInit(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*Request, error) {
	return nbc.AlltoallvInit(c.call(ranks.CallAlltoall, 0), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// ReduceScatterInit makes a persistent reduce_scatter.
func (c *Comm) ReduceScatterInit(send, recv any, counts []int, op Op) (*Request, error) {
	return nbc.ReduceScatterInit(c.call(ranks.CallReduceScatter, 0), send, recv, counts, op)
}

// ReduceScatterBlockInit makes a persistent reduce_scatter_block.
func (c *Comm) ReduceScatterBlockInit(send, recv any, op Op) (*Request, error) {
	return nbc.ReduceScatterBlockInit(c.call(ranks.CallReduceScatter, 0), send, recv, op)
}

// ScanInit makes a persistent inclusive scan.
func (c *Comm) ScanInit(send, recv any, op Op) (*Request, error) {
	return nbc.ScanInit(c.call(ranks.CallScan, 0), send, recv, op)
}

// ExscanInit makes a persistent exclusive scan.
func (c *Comm) ExscanInit(send, recv any, op Op) (*Request, error) {
	return nbc.ExscanInit(c.call(ranks.CallExscan, 0), send, recv, op)
}

// IneighborAllgather starts a NeighborAllgather.
func (c *Comm) IneighborAllgather(send, recv any) (*Request, error) {
	return nbc.IneighborAllgather(c.call(ranks.CallNeighborAllgather, 0), send, recv)
}

// IneighborAllgatherv starts a NeighborAllgatherv.
func (c *Comm) IneighborAllgatherv(send, recv any, counts, displs []int) (*Request, error) {
	return nbc.IneighborAllgatherv(c.call(ranks.CallNeighborAllgather, 0), send, recv, counts, displs)
}

// IneighborAlltoall starts a NeighborAlltoall.
func (c *Comm) IneighborAlltoall(send, recv any) (*Request, error) {
	return nbc.IneighborAlltoall(c.call(ranks.CallNeighborAlltoall, 0), send, recv)
}

// IneighborAlltoallv starts a NeighborAlltoallv.
func (c *Comm) IneighborAlltoallv(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*Request, error) {
	return nbc.IneighborAlltoallv(c.call(ranks.CallNeighborAlltoall, 0), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// NeighborAllgatherInit makes a persistent NeighborAllgather, started with Start or Startall.
func (c *Comm) NeighborAllgatherInit(send, recv any) (*Request, error) {
	return nbc.NeighborAllgatherInit(c.call(ranks.CallNeighborAllgather, 0), send, recv)
}

// NeighborAllgathervInit makes a persistent NeighborAllgatherv.
func (c *Comm) NeighborAllgathervInit(send, recv any, counts, displs []int) (*Request, error) {
	return nbc.NeighborAllgathervInit(c.call(ranks.CallNeighborAllgather, 0), send, recv, counts, displs)
}

// NeighborAlltoallInit makes a persistent NeighborAlltoall: a halo exchange set up once, started every step.
func (c *Comm) NeighborAlltoallInit(send, recv any) (*Request, error) {
	return nbc.NeighborAlltoallInit(c.call(ranks.CallNeighborAlltoall, 0), send, recv)
}

// NeighborAlltoallvInit makes a persistent NeighborAlltoallv.
func (c *Comm) NeighborAlltoallvInit(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*Request, error) {
	return nbc.NeighborAlltoallvInit(c.call(ranks.CallNeighborAlltoall, 0), send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}
