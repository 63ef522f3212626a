package nbc

import (
	"reflect"
	"slices"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// The nonblocking collectives. Each resolves its arguments as the blocking one does (collectives.Resolve*), so a
// bad argument fails here, at the start, with the same error class; then it builds the operation's schedule, posts
// its first round and returns the request. Buffers belong to the operation until the request completes: the send
// buffer must not change, the receive buffer must not be read.

// Ibarrier starts a barrier.
func Ibarrier(c *ranks.Comm) (*ranks.Request, error) {
	k := callKey{kind: kindBarrier, ok: true}
	if r := again(c, &k); r != nil {
		return r, nil
	}
	a, err := collectives.ResolveBarrier(c)
	return start(c, &a, err, nil, &k)
}

// Ibcast starts a bcast of the root's buf (a primitive or Loc slice, or a pointer to any value).
func Ibcast(c *ranks.Comm, buf any, root int) (*ranks.Request, error) {
	k := keyOf(kindBcast, buf, nil, collectives.Op{}, root)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, _, buf := collectives.PackViews(nil, buf)
	a, err := collectives.ResolveBcast(c, buf, root)
	return start(c, &a, err, va, &k)
}

// Ireduce starts a reduce into the root's recv.
func Ireduce(c *ranks.Comm, send, recv any, op collectives.Op, root int) (*ranks.Request, error) {
	k := keyOf(kindReduce, send, recv, op, root)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveReduce(c, send, recv, op, root)
	return start(c, &a, err, va, &k)
}

// Iallreduce starts an allreduce.
func Iallreduce(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	k := keyOf(kindAllreduce, send, recv, op, 0)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAllreduce(c, send, recv, op)
	return start(c, &a, err, va, &k)
}

// Igather starts a gather into the root's recv. Its arguments do not escape, only their content (see heapObjects).
func Igather(c *ranks.Comm, sendArg, recvArg any, root int) (*ranks.Request, error) {
	send, recv := collectives.HideArg(&sendArg), collectives.HideArg(&recvArg)
	k := keyOf(kindGather, send, recv, collectives.Op{}, root)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveGather(c, send, recv, root)
	if err == nil && a.Object {
		err = heapObjects(&a, c.Size(), c.Rank() == root)
	}
	return start(c, &a, err, va, &k)
}

// Igatherv starts a gatherv.
func Igatherv(c *ranks.Comm, send, recv any, counts, displs []int, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveGatherv(c, send, recv, counts, displs, root)
	return start(c, &a, err, va, nil)
}

// Iscatter starts a scatter from the root's send.
func Iscatter(c *ranks.Comm, send, recv any, root int) (*ranks.Request, error) {
	k := keyOf(kindScatter, send, recv, collectives.Op{}, root)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScatter(c, send, recv, root)
	return start(c, &a, err, va, &k)
}

// Iscatterv starts a scatterv.
func Iscatterv(c *ranks.Comm, send any, counts, displs []int, recv any, root int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScatterv(c, send, counts, displs, recv, root)
	return start(c, &a, err, va, nil)
}

// Iallgather starts an allgather. Its arguments do not escape, only their content (see heapObjects).
func Iallgather(c *ranks.Comm, sendArg, recvArg any) (*ranks.Request, error) {
	send, recv := collectives.HideArg(&sendArg), collectives.HideArg(&recvArg)
	k := keyOf(kindAllgather, send, recv, collectives.Op{}, 0)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAllgather(c, send, recv)
	if err == nil && a.Object {
		err = heapObjects(&a, c.Size(), true)
	}
	return start(c, &a, err, va, &k)
}

// Arguments and escape analysis. A nonblocking collective keeps what it is given until its request completes, so
// its any parameters escape, and every slice a caller passes is boxed on the heap: two allocations of 24 bytes per
// Iallgather, which took 0.32 us where Allgather took 0.24 (2 ranks, one process interleaving the two forms, 3
// runs), and 0.25 with its arguments converted to any once, outside the loop. What must outlive the call is only
// ever their content (a slice's elements, a View's description: collectives.PackViews), except where the argument
// is an object that the operation writes later: a bcast's or scatter's target, and a gather's or allgather's
// pointer to the slice it fills. A gather's and an allgather's slice is sized at the start, as the blocking calls
// size it, so those two take their arguments as the blocking collectives do (collectives.HideArg: only the content
// escapes) and keep heap copies of their objects instead (heapObjects). Ibcast and Iscatter, whose object targets
// are written when the operation receives them, let their arguments escape.

// heapObjects replaces the object arguments of gather or allgather call a, on n members, which came hidden from
// escape analysis and may be on the caller's stack, by heap values that the operation may keep: a heap copy of the
// value sent (ranks.HeapCopy), and, where the member receives (target), a heap pointer to the slice that recv
// points to, sized for n now (collectives.SliceTarget) so that the operation writes only its elements, which are on
// the heap (keepArray). The call has not started yet: an error fails it as Resolve's do.
func heapObjects(a *collectives.Call, n int, target bool) error {
	s, err := ranks.HeapCopy(a.ObjSend)
	if err != nil {
		return err
	}
	a.ObjSend = s
	if !target {
		a.ObjRecv = nil
		return nil
	}
	sl, err := collectives.SliceTarget(a.Coll, a.ObjRecv, n)
	if err != nil {
		return err
	}
	p := reflect.New(sl.Type())
	p.Elem().Set(sl)
	a.ObjRecv = p.Interface()
	return nil
}

// Iallgatherv starts an allgatherv.
func Iallgatherv(c *ranks.Comm, send, recv any, counts, displs []int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAllgatherv(c, send, recv, counts, displs)
	return start(c, &a, err, va, nil)
}

// Ialltoall starts an alltoall.
func Ialltoall(c *ranks.Comm, send, recv any) (*ranks.Request, error) {
	k := keyOf(kindAlltoall, send, recv, collectives.Op{}, 0)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAlltoall(c, send, recv)
	return start(c, &a, err, va, &k)
}

// Ialltoallv starts an alltoallv.
func Ialltoallv(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (*ranks.Request, error) {
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	return start(c, &a, err, va, nil)
}

// IreduceScatter starts a reduce_scatter.
func IreduceScatter(c *ranks.Comm, send, recv any, counts []int, op collectives.Op) (*ranks.Request, error) {
	k := keyOf(kindReduceScatter, send, recv, op, 0)
	if r := againWith(c, &k, counts); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveReduceScatter(c, send, recv, counts, op)
	return start(c, &a, err, va, &k)
}

// IreduceScatterBlock starts a reduce_scatter_block.
func IreduceScatterBlock(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	k := keyOf(kindReduceScatterBlock, send, recv, op, 0)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := resolveReduceScatterBlock(c, send, recv, op)
	return start(c, &a, err, va, &k)
}

func resolveReduceScatterBlock(c *ranks.Comm, send, recv any, op collectives.Op) (collectives.Call, error) {
	if c == nil {
		return collectives.ResolveBarrier(c) // the nil-communicator error
	}
	return collectives.ResolveReduceScatterBlock(c, send, recv, op, make([]int, c.Size()))
}

// Iscan starts an inclusive scan.
func Iscan(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	k := keyOf(kindScan, send, recv, op, 0)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScan(c, send, recv, op, false)
	return start(c, &a, err, va, &k)
}

// Iexscan starts an exclusive scan.
func Iexscan(c *ranks.Comm, send, recv any, op collectives.Op) (*ranks.Request, error) {
	k := keyOf(kindExscan, send, recv, op, 0)
	if r := again(c, &k); r != nil {
		return r, nil
	}
	va, send, recv := collectives.PackViews(send, recv)
	a, err := collectives.ResolveScan(c, send, recv, op, true)
	return start(c, &a, err, va, &k)
}

// start runs the resolved call a: an operation kept from the same call before (cache.go), or a new one. It posts
// the first round and returns the request. va holds the packed copies of View arguments (collectives.PackViews):
// the operation then works on them, and is not kept (its copies are its own).
func start(c *ranks.Comm, a *collectives.Call, err error, va *collectives.ViewArgs, k *callKey) (*ranks.Request, error) {
	if err != nil {
		return nil, err
	}
	collectives.Started(c, a.CallKind(), a.Root) // the arguments passed: the call takes place (ranks, callcheck.go)
	var forces uint32
	if k != nil && k.ok {
		forces = collectives.Forces(c)
	}
	algo, err := chooseFor(c, a)
	if err != nil {
		return nil, err
	}
	if algo == "shm" && a.Coll == "barrier" && c.HasRank() && collectives.BarrierGate(c) != nil {
		cc := cacheOf(c)
		if k != nil && k.ok {
			cc.memo[k.kind] = memo{key: *k, gate: true, forces: forces}
		}
		return gateBarrier(c, cc), nil
	}
	if algo == "hier" && a.Coll == "barrier" && c.HasRank() {
		cc := cacheOf(c)
		hg, err := hierGateOf(c, cc)
		if err != nil {
			return nil, err
		}
		if hg != nil && (!hg.leader || hg.lead != nil) { // else the leader's op builds below (hier.go: gatedBarrier)
			if k != nil && k.ok {
				cc.memo[k.kind] = memo{key: *k, hgate: true, forces: forces}
			}
			return hg.start(c), nil
		}
	}
	if algo == "shm" && va == nil && smallOK(c, a) {
		ac := new(collectives.Call) // the members' entries point at it until the use is over; the memo keeps it
		*ac = *a
		ac.Counts = slices.Clone(a.Counts) // its own (see againWith): the runner reads it
		cc := cacheOf(c)
		if k != nil && k.ok {
			cc.memo[k.kind] = memo{key: *k, tiny: ac, forces: forces}
		}
		return startTiny(c, cc, ac), nil
	}
	gen := ranks.EnterOps(c) // this call runs the rank's operations: their signals meanwhile are its own
	defer ranks.LeaveOps(c, gen)
	if va == nil {
		if o := reuse(c, a, algo); o != nil {
			remember(c, k, o, forces)
			return o.req, nil
		}
	}
	ac := new(collectives.Call) // the op keeps it: the caller's is on its stack
	*ac = *a
	o, err := build(c, ac, algo, false)
	if err != nil {
		return nil, err
	}
	if va != nil { // View arguments: the op works on packed copies (collectives.PackViews)
		va.Pack()
		o.finish = va.Unpack
	}
	if va == nil {
		keep(c, o, a, algo)
		remember(c, k, o, forces)
	}
	o.setReq(o.request(c))
	ranks.Launch(o.req)
	o.lend = o.key == nil // not kept for reuse: its scratch buffers go back when it finishes
	o.launch(false)
	return o.req, nil
}

// chooseFor returns the algorithm of call a on c ("" where there is no choice: objects, one member).
func chooseFor(c *ranks.Comm, a *collectives.Call) (string, error) {
	if a.Object || c.Size() == 1 {
		return "", nil
	}
	return collectives.ChooseNonblocking(c, a)
}

// build makes the op of call a on c with algorithm algo: the operation's id, its schedule.
func build(c *ranks.Comm, a *collectives.Call, algo string, persistent bool) (*op, error) {
	var id collectives.OpID
	if persistent {
		id = collectives.NextPersistent(c)
	} else {
		id = collectives.NextOp(c)
	}
	o := newOp(c)
	s := &Schedule{}
	sp := &spec{algo: algo, rank: c.Rank(), n: c.Size(), id: id, a: a}
	var err error
	switch algo {
	case "shm":
		err = buildShm(s, sp, c, o, persistent)
	case "hier":
		err = buildHier(s, sp, c, o, persistent)
	default:
		err = buildP2P(s, sp)
	}
	if err != nil {
		return nil, err
	}
	o.m = Machine{s: s}
	o.m.Reset()
	o.tr = newTransport(o, c, len(s.Steps))
	o.onNode = o.messagesOnNode()
	o.small = len(a.Send)+len(a.Recv) <= soonBytes
	return o, nil
}
