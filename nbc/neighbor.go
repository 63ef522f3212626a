package nbc

import (
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// The nonblocking and persistent neighbourhood collectives (MPI-3 and MPI-4). Their arguments are checked as the
// blocking ones check them (collectives.ResolveNeighbor*), and the schedule is one round: a message per edge, each
// a block of the send or receive buffer as typed memory (a View's window moves in pieces where the path allows),
// posted in the order that pairs the two ends of every edge (collectives/neighbor.go), under the operation's id. So
// they progress on their own like any nonblocking collective (child requests kick the op, the node's pool runs it),
// and a persistent one makes its requests once at Init and allocates nothing per Start. ProcNull neighbours send
// nothing and their blocks stay untouched. The blocking forms' shared-memory path for neighbours on the node is
// not used here: a message between ranks of one node is already a single copy, and needs no one to wait for the
// other's arrival.

// IneighborAllgather starts a NeighborAllgather.
func IneighborAllgather(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAllgather(c, send, recv)
	return startNeighbor(c, &a, err)
}

// IneighborAllgatherv starts a NeighborAllgatherv.
func IneighborAllgatherv(c *ranks.Comm, send, recv any, counts, displs []int) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAllgatherv(c, send, recv, counts, displs)
	return startNeighbor(c, &a, err)
}

// IneighborAlltoall starts a NeighborAlltoall.
func IneighborAlltoall(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAlltoall(c, send, recv)
	return startNeighbor(c, &a, err)
}

// IneighborAlltoallv starts a NeighborAlltoallv.
func IneighborAlltoallv(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	return startNeighbor(c, &a, err)
}

// NeighborAllgatherInit makes a persistent NeighborAllgather.
func NeighborAllgatherInit(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAllgather(c, send, recv)
	return initNeighbor(c, &a, err)
}

// NeighborAllgathervInit makes a persistent NeighborAllgatherv.
func NeighborAllgathervInit(c *ranks.Comm, send, recv any, counts, displs []int) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAllgatherv(c, send, recv, counts, displs)
	return initNeighbor(c, &a, err)
}

// NeighborAlltoallInit makes a persistent NeighborAlltoall.
func NeighborAlltoallInit(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAlltoall(c, send, recv)
	return initNeighbor(c, &a, err)
}

// NeighborAlltoallvInit makes a persistent NeighborAlltoallv.
func NeighborAlltoallvInit(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*ranks.Request, error) {
	a, err := collectives.ResolveNeighborAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	return initNeighbor(c, &a, err)
}

func startNeighbor(c *ranks.Comm, a *collectives.NbrCall, err error) (*ranks.Request, error) {
	if err != nil {
		return nil, err
	}
	collectives.Started(c, a.CallKind(), 0)
	gen := ranks.EnterOps(c) // as a starting call (api.go)
	defer ranks.LeaveOps(c, gen)
	o := buildNeighbor(c, a, collectives.NextOp(c)) // not kept for reuse (cache.go): its steps carry whole tags
	o.setReq(c.OpRequest(o))
	ranks.Launch(o.req)
	o.launch(false)
	return o.req, nil
}

func initNeighbor(c *ranks.Comm, a *collectives.NbrCall, err error) (*ranks.Request, error) {
	if err != nil {
		return nil, err
	}
	collectives.Started(c, a.CallKind(), 0)
	o := buildNeighbor(c, a, collectives.NextPersistent(c))
	if err := o.tr.makePersistent(o.m.s); err != nil {
		return nil, err
	}
	o.setReq(c.PersistentOpRequest(o))
	return o.req, nil
}

// buildNeighbor makes the op of a neighbourhood call: one round, receives then sends, in pairing order.
func buildNeighbor(c *ranks.Comm, a *collectives.NbrCall, id collectives.OpID) *op {
	tag := collectives.NeighborTag(id)
	s := &Schedule{}
	for _, e := range a.Recvs {
		s.RecvMem(e.Mem, e.Peer, tag)
	}
	for _, e := range a.Sends {
		s.SendMem(e.Mem, e.Peer, tag)
	}
	o := newOp(c)
	o.m = Machine{s: s}
	o.m.Reset()
	o.tr = newTransport(o, c, len(s.Steps))
	o.onNode = o.messagesOnNode()
	return o
}
