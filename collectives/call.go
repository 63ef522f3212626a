package collectives

import (
	"math"
	"slices"

	"github.com/gompj/gompj/ranks"
)

// Call is a collective call's arguments checked and resolved on the calling rank: what the algorithms work on.
// The blocking collectives (api.go) and the nonblocking and persistent ones (package nbc) resolve their arguments
// with the same functions (Resolve*), so a bad argument fails with the same error class either way.
//
// Buffers are memory: Send and Recv are the bytes of the send and receive buffers where they are significant on
// this rank, nil otherwise. In place, a reduction's Send is its Recv (the contribution is there), and Send is nil
// where this rank's block already sits in Recv (gather, allgather, alltoall), Recv nil at a scatter's root. Counts
// and displacements are in elements of Sz bytes. Object calls (values that are not primitive slices,
// msgpack-encoded) have Object set and keep the caller's values in ObjSend and ObjRecv.
type Call struct {
	Coll        string // the collective's name in the selection table
	Root        int
	InPlace     bool
	Object      bool
	ObjSend     any
	ObjRecv     any
	Send, Recv  []byte
	Sz          int // bytes per element, at least 1
	Blk         int // gather, scatter, allgather, alltoall: one rank's block in bytes
	Counts      []int
	Displs      []int
	RCounts     []int // alltoallv: the receive side
	RDispls     []int
	Kernel      func(inout, in []byte) // reductions: inout = in op inout
	Commutative bool

	sv, rv vec
	k      kernel
	op     Op
}

// Same reports whether a and b are the same call: the same collective, root, buffers (the same memory), counts and
// displacements (the same values), op. Package nbc reuses the operation it built for a call when the same call
// comes again (OSU's loops, an application's time steps). Object calls are never the same.
func (a *Call) Same(b *Call) bool {
	same := func(x, y []byte) bool {
		return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0]) && cap(x) == cap(y)
	}
	return a.Coll == b.Coll && a.Root == b.Root && a.InPlace == b.InPlace && !a.Object && !b.Object &&
		same(a.Send, b.Send) && same(a.Recv, b.Recv) && a.Sz == b.Sz && a.Blk == b.Blk && a.op == b.op &&
		a.Commutative == b.Commutative && slices.Equal(a.Counts, b.Counts) && slices.Equal(a.Displs, b.Displs) &&
		slices.Equal(a.RCounts, b.RCounts) && slices.Equal(a.RDispls, b.RDispls) &&
		(a.Counts == nil) == (b.Counts == nil) && (a.Displs == nil) == (b.Displs == nil) &&
		(a.RDispls == nil) == (b.RDispls == nil)
}

// Bytes is the message size the selection table sees for this call (see table.go).
func (a *Call) Bytes() int {
	switch a.Coll {
	case "bcast":
		return len(a.Recv)
	case "reduce", "allreduce", "scan", "exscan", "reduce_scatter":
		return len(a.Send)
	case "gather", "scatter", "allgather", "alltoall":
		return a.Blk
	}
	return 0
}

func (a *Call) fill() {
	a.Send, a.Recv = a.sv.b, a.rv.b
	a.Sz = max(a.sv.sz, a.rv.sz, 1)
	if a.k != nil {
		a.Kernel = a.k
		a.Commutative = a.op.Commutative()
	}
}

// ResolveBarrier checks a barrier call.
func ResolveBarrier(c *ranks.Comm) (Call, error) {
	_, err := start(c)
	return Call{Coll: "barrier"}, err
}

// ResolveBcast checks a bcast call. buf is a primitive (or Loc) slice, or a pointer to any other value (Object).
func ResolveBcast(c *ranks.Comm, buf any, root int) (Call, error) {
	a := Call{Coll: "bcast", Root: root}
	if _, err := start(c); err != nil {
		return a, err
	}
	if err := checkRoot(c, root); err != nil {
		return a, err
	}
	if isInPlace(buf) { // used to pass as an object: the root sent it and succeeded, the others failed
		return a, errArg("bcast: InPlace is not a buffer (bcast has no in-place form)")
	}
	v, err := viewOf(buf, "bcast")
	if err != nil {
		if buf == nil || isView(buf) {
			return a, err
		}
		if err := ObjectPointer("bcast", buf); err != nil {
			return a, err
		}
		a.Object, a.ObjRecv = true, buf
		return a, nil
	}
	a.rv = v
	a.fill()
	return a, nil
}

// reduceArgs resolves send/recv of a reduction: src and dst views (dst only where significant).
func reduceArgs(what string, send, recv any, needRecv bool) (src, dst vec, err error) {
	if isInPlace(send) {
		if !needRecv {
			return src, dst, errArg("%s: InPlace is only for the rank that receives the result", what)
		}
		if dst, err = viewOfRole(recv, what, " receive"); err != nil {
			return
		}
		return dst, dst, nil
	}
	if src, err = viewOfRole(send, what, " send"); err != nil {
		return
	}
	if needRecv {
		if dst, err = viewOfRole(recv, what, " receive"); err != nil {
			return
		}
		if err = sameKind(src, dst); err != nil {
			return
		}
		if len(dst.b) < len(src.b) {
			err = errTrunc("%s: %d elements into a buffer of %d", what, src.n, dst.n)
		}
	}
	return
}

// ResolveReduce checks a reduce call. Send is this rank's contribution (the root's Recv, in place); Recv is
// significant at the root only.
func ResolveReduce(c *ranks.Comm, send, recv any, op Op, root int) (Call, error) {
	a := Call{Coll: "reduce", Root: root, op: op}
	if _, err := start(c); err != nil {
		return a, err
	}
	if err := checkRoot(c, root); err != nil {
		return a, err
	}
	var err error
	if a.sv, a.rv, err = reduceArgs("reduce", send, recv, c.Rank() == root); err != nil {
		return a, err
	}
	if a.k, err = kernelFor(op, a.sv.k); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	a.fill()
	return a, nil
}

// ResolveAllreduce checks an allreduce call. Send is this rank's contribution (Recv, in place).
func ResolveAllreduce(c *ranks.Comm, send, recv any, op Op) (Call, error) {
	a := Call{Coll: "allreduce", op: op}
	if _, err := start(c); err != nil {
		return a, err
	}
	var err error
	if a.sv, a.rv, err = reduceArgs("allreduce", send, recv, true); err != nil {
		return a, err
	}
	if a.k, err = kernelFor(op, a.sv.k); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	a.fill()
	return a, nil
}

// ResolveGather checks a gather call. Blk is one rank's block; Send is this rank's block (nil at an in-place
// root, where it sits in Recv already); Recv is significant at the root only.
func ResolveGather(c *ranks.Comm, send, recv any, root int) (Call, error) {
	a := Call{Coll: "gather", Root: root}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if err := checkRoot(c, root); err != nil {
		return a, err
	}
	n := st.size
	if isObject(send) {
		if st.rank == root {
			if err := objectSlice("gather", recv, send); err != nil {
				return a, err
			}
		}
		a.Object, a.ObjSend, a.ObjRecv = true, send, recv
		return a, nil
	}
	a.InPlace = isInPlace(send)
	if a.InPlace {
		if st.rank != root {
			return a, errArg("gather: InPlace is only for the root")
		}
		if a.rv, err = viewOf(recv, "gather receive"); err != nil {
			return a, err
		}
		if a.rv.n%n != 0 {
			return a, errArg("gather: in place with a receive buffer of %d elements for %d ranks", a.rv.n, n)
		}
		a.Blk = len(a.rv.b) / n
		a.sv = vec{k: a.rv.k, sz: a.rv.sz}
	} else {
		if a.sv, err = viewOf(send, "gather send"); err != nil {
			return a, err
		}
		a.Blk = len(a.sv.b)
		if st.rank == root {
			if a.rv, err = viewOf(recv, "gather receive"); err != nil {
				return a, err
			}
			if err := sameKind(a.sv, a.rv); err != nil {
				return a, err
			}
			if len(a.rv.b) < n*a.Blk {
				return a, errTrunc("gather: %d blocks of %d elements into a buffer of %d", n, a.sv.n, a.rv.n)
			}
		}
	}
	a.fill()
	return a, nil
}

// ResolveGatherv checks a gatherv call (counts, displs and recv significant at the root only).
func ResolveGatherv(c *ranks.Comm, send, recv any, counts, displs []int, root int) (Call, error) {
	a := Call{Coll: "gatherv", Root: root}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if err := checkRoot(c, root); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	if a.InPlace && st.rank != root {
		return a, errArg("gatherv: InPlace is only for the root")
	}
	if !a.InPlace {
		if a.sv, err = viewOf(send, "gatherv send"); err != nil {
			return a, err
		}
	}
	if st.rank == root {
		if a.rv, err = viewOf(recv, "gatherv receive"); err != nil {
			return a, err
		}
		if !a.InPlace {
			if err := sameKind(a.sv, a.rv); err != nil {
				return a, err
			}
		} else {
			a.sv = vec{k: a.rv.k, sz: a.rv.sz}
		}
		if err := checkCounts("gatherv", counts, displs, st.size, a.rv.sz, len(a.rv.b)); err != nil {
			return a, err
		}
		a.Counts, a.Displs = counts, displs
	}
	a.fill()
	a.Sz = max(a.sv.sz, 1)
	return a, nil
}

// ResolveScatter checks a scatter call (send significant at the root only; InPlace as recv at the root). Blk is
// one rank's block in bytes.
func ResolveScatter(c *ranks.Comm, send, recv any, root int) (Call, error) {
	a := Call{Coll: "scatter", Root: root}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if err := checkRoot(c, root); err != nil {
		return a, err
	}
	n := st.size
	if isObject(recv) {
		if err := ObjectPointer("scatter", recv); err != nil {
			return a, err
		}
		if st.rank == root {
			if _, err := ScatterSource(send, recv, n); err != nil {
				return a, err
			}
		}
		a.Object, a.ObjSend, a.ObjRecv = true, send, recv
		return a, nil
	}
	a.InPlace = isInPlace(recv)
	if a.InPlace && st.rank != root {
		return a, errArg("scatter: InPlace is only for the root")
	}
	if !a.InPlace {
		if a.rv, err = viewOf(recv, "scatter receive"); err != nil {
			return a, err
		}
		a.Blk = len(a.rv.b)
	}
	if st.rank == root {
		if a.sv, err = viewOf(send, "scatter send"); err != nil {
			return a, err
		}
		if a.sv.n%n != 0 {
			return a, errArg("scatter: a send buffer of %d elements for %d ranks", a.sv.n, n)
		}
		a.Blk = len(a.sv.b) / n
		if !a.InPlace {
			if err := sameKind(a.sv, a.rv); err != nil {
				return a, err
			}
			if len(a.rv.b) < a.Blk {
				return a, errTrunc("scatter: blocks of %d elements into a buffer of %d", a.sv.n/n, a.rv.n)
			}
		}
	}
	a.fill()
	return a, nil
}

// ResolveScatterv checks a scatterv call (send, counts and displs significant at the root only; InPlace as recv at
// the root).
func ResolveScatterv(c *ranks.Comm, send any, counts, displs []int, recv any, root int) (Call, error) {
	a := Call{Coll: "scatterv", Root: root}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if err := checkRoot(c, root); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(recv)
	if a.InPlace && st.rank != root {
		return a, errArg("scatterv: InPlace is only for the root")
	}
	if !a.InPlace {
		if a.rv, err = viewOf(recv, "scatterv receive"); err != nil {
			return a, err
		}
	}
	if st.rank == root {
		if a.sv, err = viewOf(send, "scatterv send"); err != nil {
			return a, err
		}
		if !a.InPlace {
			if err := sameKind(a.sv, a.rv); err != nil {
				return a, err
			}
		}
		if err := checkCounts("scatterv", counts, displs, st.size, a.sv.sz, len(a.sv.b)); err != nil {
			return a, err
		}
		a.Counts, a.Displs = counts, displs
	}
	a.fill()
	return a, nil
}

// ResolveAllgather checks an allgather call (InPlace as send: each rank's block is in place in recv). Blk is one
// rank's block in bytes.
func ResolveAllgather(c *ranks.Comm, send, recv any) (Call, error) {
	a := Call{Coll: "allgather"}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	n := st.size
	if isObject(send) {
		if err := objectSlice("allgather", recv, send); err != nil {
			return a, err
		}
		a.Object, a.ObjSend, a.ObjRecv = true, send, recv
		return a, nil
	}
	if a.rv, err = viewOf(recv, "allgather receive"); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	if a.InPlace {
		if a.rv.n%n != 0 {
			return a, errArg("allgather: in place with a receive buffer of %d elements for %d ranks", a.rv.n, n)
		}
		a.Blk = len(a.rv.b) / n
	} else {
		if a.sv, err = viewOf(send, "allgather send"); err != nil {
			return a, err
		}
		if err := sameKind(a.sv, a.rv); err != nil {
			return a, err
		}
		a.Blk = len(a.sv.b)
		if len(a.rv.b) < n*a.Blk {
			return a, errTrunc("allgather: %d blocks of %d elements into a buffer of %d", n, a.sv.n, a.rv.n)
		}
	}
	a.fill()
	return a, nil
}

// ResolveAllgatherv checks an allgatherv call (InPlace as send).
func ResolveAllgatherv(c *ranks.Comm, send, recv any, counts, displs []int) (Call, error) {
	a := Call{Coll: "allgatherv", Counts: counts, Displs: displs}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if a.rv, err = viewOf(recv, "allgatherv receive"); err != nil {
		return a, err
	}
	if err := checkCounts("allgatherv", counts, displs, st.size, a.rv.sz, len(a.rv.b)); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	if !a.InPlace {
		if a.sv, err = viewOf(send, "allgatherv send"); err != nil {
			return a, err
		}
		if err := sameKind(a.sv, a.rv); err != nil {
			return a, err
		}
		if own := blockOf(a.rv.b, counts, displs, a.rv.sz, st.rank, 0); len(a.sv.b) > len(own) {
			return a, errTrunc("allgatherv: %d elements sent into a block of %d", a.sv.n, counts[st.rank])
		}
	}
	a.fill()
	a.Sz = a.rv.sz
	return a, nil
}

// ResolveAlltoall checks an alltoall call (InPlace as send: the blocks to send are in recv). Blk is one block.
func ResolveAlltoall(c *ranks.Comm, send, recv any) (Call, error) {
	a := Call{Coll: "alltoall"}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	n := st.size
	if a.rv, err = viewOf(recv, "alltoall receive"); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	if a.InPlace {
		if a.rv.n%n != 0 {
			return a, errArg("alltoall: in place with a buffer of %d elements for %d ranks", a.rv.n, n)
		}
		a.Blk = len(a.rv.b) / n
	} else {
		if a.sv, err = viewOf(send, "alltoall send"); err != nil {
			return a, err
		}
		if err := sameKind(a.sv, a.rv); err != nil {
			return a, err
		}
		if a.sv.n%n != 0 {
			return a, errArg("alltoall: a send buffer of %d elements for %d ranks", a.sv.n, n)
		}
		a.Blk = len(a.sv.b) / n
		if len(a.rv.b) < len(a.sv.b) {
			return a, errTrunc("alltoall: %d elements into a buffer of %d", a.sv.n, a.rv.n)
		}
	}
	a.fill()
	return a, nil
}

// ResolveAlltoallv checks an alltoallv call.
func ResolveAlltoallv(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (Call, error) {
	a := Call{Coll: "alltoallv", Counts: sendCounts, Displs: sendDispls, RCounts: recvCounts, RDispls: recvDispls}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if a.sv, err = viewOf(send, "alltoallv send"); err != nil {
		return a, err
	}
	if a.rv, err = viewOf(recv, "alltoallv receive"); err != nil {
		return a, err
	}
	if err := sameKind(a.sv, a.rv); err != nil {
		return a, err
	}
	n := st.size
	if err := checkCounts("alltoallv send", sendCounts, sendDispls, n, a.sv.sz, len(a.sv.b)); err != nil {
		return a, err
	}
	if err := checkCounts("alltoallv receive", recvCounts, recvDispls, n, a.rv.sz, len(a.rv.b)); err != nil {
		return a, err
	}
	a.fill()
	a.Sz = max(a.sv.sz, 1)
	return a, nil
}

// ResolveReduceScatter checks a reduce_scatter call. Send is the whole vector (in place: the start of Recv, cut
// to the counts' total), Counts the blocks in elements.
func ResolveReduceScatter(c *ranks.Comm, send, recv any, counts []int, op Op) (Call, error) {
	a := Call{Coll: "reduce_scatter", Counts: counts, op: op}
	st, err := start(c)
	if err != nil {
		return a, err
	}
	if a.rv, err = viewOf(recv, "reduce_scatter receive"); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	if a.InPlace {
		a.sv = a.rv
	} else {
		if a.sv, err = viewOf(send, "reduce_scatter send"); err != nil {
			return a, err
		}
		if err := sameKind(a.sv, a.rv); err != nil {
			return a, err
		}
	}
	if len(counts) != st.size {
		return a, errArg("reduce_scatter: %d counts for %d ranks", len(counts), st.size)
	}
	total := 0
	for i, x := range counts {
		if x < 0 {
			return a, errArg("reduce_scatter: count %d for rank %d", x, i)
		}
		if x > math.MaxInt-total { // a total that wrapped round passed the checks below, and in place sliced recv with it
			return a, errArg("reduce_scatter: counts add up to more than %d", math.MaxInt)
		}
		total += x
	}
	if a.InPlace {
		if total > a.rv.n {
			return a, errTrunc("reduce_scatter: in place, counts add up to %d, the receive buffer holds %d elements", total, a.rv.n)
		}
		a.sv.b, a.sv.n = a.rv.b[:total*a.rv.sz], total
	} else if total != a.sv.n {
		return a, errArg("reduce_scatter: counts add up to %d, the send buffer holds %d elements", total, a.sv.n)
	}
	if counts[st.rank] > a.rv.n {
		return a, errTrunc("reduce_scatter: %d elements into a buffer of %d", counts[st.rank], a.rv.n)
	}
	if a.k, err = kernelFor(op, a.sv.k); err != nil {
		return a, err
	}
	a.fill()
	a.Sz = max(a.sv.sz, 1)
	return a, nil
}

// ResolveReduceScatterBlock checks a reduce_scatter_block call: a reduce_scatter with every block len(recv)
// elements long (in place: recv holds the whole vector, size × the block). counts is where the blocks' counts go
// (len(counts) == size); the call keeps it.
func ResolveReduceScatterBlock(c *ranks.Comm, send, recv any, op Op, counts []int) (Call, error) {
	if _, err := start(c); err != nil {
		return Call{Coll: "reduce_scatter"}, err
	}
	rv, err := viewOf(recv, "reduce_scatter_block receive")
	if err != nil {
		return Call{Coll: "reduce_scatter"}, err
	}
	n := c.Size()
	blk := rv.n
	if isInPlace(send) {
		if rv.n%n != 0 {
			return Call{Coll: "reduce_scatter"}, errArg("reduce_scatter_block: in place with a buffer of %d elements for %d ranks", rv.n, n)
		}
		blk = rv.n / n
	}
	for i := range counts {
		counts[i] = blk
	}
	return ResolveReduceScatter(c, send, recv, counts, op)
}

// ResolveScan checks a scan (or, exclusive, an exscan) call. Send is this rank's contribution (Recv, in place).
func ResolveScan(c *ranks.Comm, send, recv any, op Op, exclusive bool) (Call, error) {
	a := Call{Coll: "scan", op: op}
	if exclusive {
		a.Coll = "exscan"
	}
	if _, err := start(c); err != nil {
		return a, err
	}
	var err error
	if a.sv, a.rv, err = reduceArgs(a.Coll, send, recv, true); err != nil {
		return a, err
	}
	if a.k, err = kernelFor(op, a.sv.k); err != nil {
		return a, err
	}
	a.InPlace = isInPlace(send)
	a.fill()
	return a, nil
}

// ReduceLocal combines in into inout with op on the calling rank alone (MPI_Reduce_local): inout[i] = in[i] op
// inout[i], in's elements taking the place of a lower rank's contribution, as in a reduction. The two hold the same
// number of elements of one type (Views included); they must not overlap.
func ReduceLocal(in, inout any, op Op) error {
	va, in, inout := PackViews(in, inout)
	if va != nil {
		va.Pack()
	}
	src, err := viewOfRole(in, "reduce_local", " in")
	if err != nil {
		return err
	}
	dst, err := viewOfRole(inout, "reduce_local", " inout")
	if err != nil {
		return err
	}
	if err := sameKind(src, dst); err != nil {
		return err
	}
	if src.n != dst.n {
		return errArg("reduce_local: %d elements in, %d in inout", src.n, dst.n)
	}
	k, err := kernelFor(op, src.k)
	if err != nil {
		return err
	}
	if len(src.b) > 0 {
		k(dst.b, src.b)
	}
	if va != nil {
		va.Unpack()
	}
	return nil
}

// CallKind returns the kind of the call check that a's collective counts as (ranks.CallKind), 0 for none.
func (a *Call) CallKind() ranks.CallKind {
	switch a.Coll {
	case "barrier":
		return ranks.CallBarrier
	case "bcast":
		return ranks.CallBcast
	case "reduce":
		return ranks.CallReduce
	case "allreduce":
		return ranks.CallAllreduce
	case "gather", "gatherv":
		return ranks.CallGather
	case "scatter", "scatterv":
		return ranks.CallScatter
	case "allgather", "allgatherv":
		return ranks.CallAllgather
	case "alltoall", "alltoallv":
		return ranks.CallAlltoall
	case "reduce_scatter":
		return ranks.CallReduceScatter
	case "scan":
		return ranks.CallScan
	case "exscan":
		return ranks.CallExscan
	}
	return 0
}
