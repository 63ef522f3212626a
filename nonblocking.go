package gompj

import "github.com/gompj/gompj/nbc"

// Nonblocking collectives (MPI-3). Each starts the collective and returns its request at once; the collective then
// moves on by itself (on the node's worker pool, GOMPJ_WORKERS; GOMPJ_ASYNC_PROGRESS=0 leaves it to Test and
// Wait) while the caller computes. The buffers belong to the collective until its request completes: do not
// change a send buffer or read a receive buffer before Wait or Test says it is done. The arguments are those of the
// blocking collective, and a bad one fails here with the same error class. The requests mix with point-to-point
// ones in Wait, Test, Waitall, Waitany and Testall. Any number may be outstanding on a communicator, beside
// blocking collectives and point-to-point traffic; every member starts a communicator's collectives in the same
// order.

// Ibarrier starts a barrier: its request completes once every member has started it.
func (c *Comm) Ibarrier() (*Request, error) { return nbc.Ibarrier(c.c) }

// Ibcast starts a bcast of the root's buf.
func (c *Comm) Ibcast(buf any, root int) (*Request, error) { return nbc.Ibcast(c.c, buf, root) }

// Ireduce starts a reduce of every member's send into the root's recv.
func (c *Comm) Ireduce(send, recv any, op Op, root int) (*Request, error) {
	return nbc.Ireduce(c.c, send, recv, op, root)
}

// Iallreduce starts an allreduce.
func (c *Comm) Iallreduce(send, recv any, op Op) (*Request, error) {
	return nbc.Iallreduce(c.c, send, recv, op)
}

// Igather starts a gather into the root's recv.
func (c *Comm) Igather(send, recv any, root int) (*Request, error) {
	return nbc.Igather(c.c, send, recv, root)
}

// Igatherv starts a gatherv.
func (c *Comm) Igatherv(send, recv any, counts, displs []int, root int) (*Request, error) {
	return nbc.Igatherv(c.c, send, recv, counts, displs, root)
}

// Iscatter starts a scatter from the root's send.
func (c *Comm) Iscatter(send, recv any, root int) (*Request, error) {
	return nbc.Iscatter(c.c, send, recv, root)
}

// Iscatterv starts a scatterv.
func (c *Comm) Iscatterv(send any, counts, displs []int, recv any, root int) (*Request, error) {
	return nbc.Iscatterv(c.c, send, counts, displs, recv, root)
}

// Iallgather starts an allgather.
func (c *Comm) Iallgather(send, recv any) (*Request, error) { return nbc.Iallgather(c.c, send, recv) }

// Iallgatherv starts an allgatherv.
func (c *Comm) Iallgatherv(send, recv any, counts, displs []int) (*Request, error) {
	return nbc.Iallgatherv(c.c, send, recv, counts, displs)
}

// Ialltoall starts an alltoall.
func (c *Comm) Ialltoall(send, recv any) (*Request, error) { return nbc.Ialltoall(c.c, send, recv) }

// Ialltoallv starts an alltoallv.
func (c *Comm) Ialltoallv(send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*Request, error) {
	return nbc.Ialltoallv(c.c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// IreduceScatter starts a reduce_scatter.
func (c *Comm) IreduceScatter(send, recv any, counts []int, op Op) (*Request, error) {
	return nbc.IreduceScatter(c.c, send, recv, counts, op)
}

// IreduceScatterBlock starts a reduce_scatter_block.
func (c *Comm) IreduceScatterBlock(send, recv any, op Op) (*Request, error) {
	return nbc.IreduceScatterBlock(c.c, send, recv, op)
}

// Iscan starts an inclusive scan.
func (c *Comm) Iscan(send, recv any, op Op) (*Request, error) { return nbc.Iscan(c.c, send, recv, op) }

// Iexscan starts an exclusive scan.
func (c *Comm) Iexscan(send, recv any, op Op) (*Request, error) {
	return nbc.Iexscan(c.c, send, recv, op)
}
