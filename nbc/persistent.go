package nbc

import (
	"slices"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// The persistent collectives (MPI-4): the same arguments as the nonblocking ones, checked the same way, at Init.
// Init builds the operation once: its schedule (algorithm from the same table, GOMPJ_COLL_I<NAME> included), its
// scratch buffers, its point-to-point requests (persistent ones, started again at each run), its shared-memory slot
// (a slot of its own, not one of the communicator's ring). The request it returns is inactive; each Start (or
// Startall) runs the collective once on the buffers given to Init, reading the send buffers as they are then, and
// allocates nothing for primitive slices. Every member must Init a communicator's persistent collectives in the
// same order, as for any collective; they may Start them in any order. Free releases what Init made.

// BarrierInit makes a persistent barrier.
func BarrierInit(c *ranks.Comm) (*ranks.Request, error) {
	a, err := collectives.ResolveBarrier(c)
	return initOp(c, &a, err, nil)
}

// BcastInit makes a persistent bcast.
func BcastInit(c *ranks.Comm, buf any, root int) (*ranks.Request, error) {
	va, _, buf := collectives.PackViews(nil, buf)
	a, err := collectives.ResolveBcast(c, buf, root)
	return initOp(c, &a, err, va)
}

// ReduceInit makes a persistent reduce.
func ReduceInit(c *ranks.Comm, send, recv any, op collectives.Op, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveReduce(c, send, recv, op, root)
	return initOp(c, &a, err, va)
}

// AllreduceInit makes a persistent allreduce.
func AllreduceInit(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAllreduce(c, send, recv, op)
	return initOp(c, &a, err, va)
}

// GatherInit makes a persistent gather.
func GatherInit(c *ranks.Comm, send, recv any, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveGather(c, send, recv, root)
	return initOp(c, &a, err, va)
}

// GathervInit makes a persistent gatherv.
func GathervInit(c *ranks.Comm, send, recv any, counts, displs []int, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveGatherv(c, send, recv, counts, displs, root)
	return initOp(c, &a, err, va)
}

// ScatterInit makes a persistent scatter.
func ScatterInit(c *ranks.Comm, send, recv any, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScatter(c, send, recv, root)
	return initOp(c, &a, err, va)
}

// ScattervInit makes a persistent scatterv.
func ScattervInit(c *ranks.Comm, send any, counts, displs []int, recv any, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScatterv(c, send, counts, displs, recv, root)
	return initOp(c, &a, err, va)
}

// AllgatherInit makes a persistent allgather.
func AllgatherInit(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAllgather(c, send, recv)
	return initOp(c, &a, err, va)
}

// AllgathervInit makes a persistent allgatherv.
func AllgathervInit(c *ranks.Comm, send, recv any, counts, displs []int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAllgatherv(c, send, recv, counts, displs)
	return initOp(c, &a, err, va)
}

// AlltoallInit makes a persistent alltoall.
func AlltoallInit(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAlltoall(c, send, recv)
	return initOp(c, &a, err, va)
}

// AlltoallvInit makes a persistent alltoallv.
func AlltoallvInit(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	return initOp(c, &a, err, va)
}

// ReduceScatterInit makes a persistent reduce_scatter.
func ReduceScatterInit(c *ranks.Comm, send, recv any, counts []int, op collectives.Op) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveReduceScatter(c, send, recv, counts, op)
	return initOp(c, &a, err, va)
}

// ReduceScatterBlockInit makes a persistent reduce_scatter_block.
func ReduceScatterBlockInit(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := resolveReduceScatterBlock(c, send, recv, op)
	return initOp(c, &a, err, va)
}

// ScanInit makes a persistent inclusive scan.
func ScanInit(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScan(c, send, recv, op, false)
	return initOp(c, &a, err, va)
}

// ExscanInit makes a persistent exclusive scan.
func ExscanInit(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScan(c, send, recv, op, true)
	return initOp(c, &a, err, va)
}

// initOp builds the persistent operation of the resolved call a and returns its inactive request.
func initOp(c *ranks.Comm, a *collectives.Call, err error, va *collectives.ViewArgs) (*ranks.Request, error) {
	if err != nil {
		return nil, err
	}
	collectives.Started(c, a.CallKind(), a.Root)
	if a.Coll == "barrier" {
		if r, err := persistentGate(c, a); r != nil || err != nil {
			return r, err
		}
	}
	if va == nil && c.Size() > 1 && smallOK(c, a) {
		if algo, err := chooseFor(c, a); err != nil {
			return nil, err
		} else if algo == "shm" {
			ac := new(collectives.Call)
			*ac = *a
			ac.Counts = slices.Clone(a.Counts) // a reduce_scatter's: its runner reads them at every Start
			return persistentTiny(c, ac), nil
		}
	}
	o, err := persistentOp(c, a, err, va)
	if err != nil {
		return nil, err
	}
	return o.req, nil
}

// persistentOp is initOp's op.
func persistentOp(c *ranks.Comm, a *collectives.Call, err error, va *collectives.ViewArgs) (*op, error) {
	if err != nil {
		return nil, err
	}
	algo, err := chooseFor(c, a)
	if err != nil {
		return nil, err
	}
	ac := new(collectives.Call)
	*ac = *a
	o, err := build(c, ac, algo, true)
	if err != nil {
		return nil, err
	}
	if err := o.tr.makePersistent(o.m.s); err != nil {
		return nil, err
	}
	if va != nil { // View arguments: each run packs them first and unpacks the result last
		o.onStart = append(o.onStart, va.Pack)
		o.finish = va.Unpack
	}
	o.setReq(c.PersistentOpRequest(o))
	return o, nil
}
