package collectives

import (
	"fmt"

	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/ranks"
)

// The blocking collectives. Each checks its arguments on the calling rank, picks an algorithm (table.go) and runs
// it. Buffers: see the package documentation; send may be InPlace where documented.

func checkRoot(c *ranks.Comm, root int) error {
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("%w: root %d, communicator size %d", ranks.ErrRoot, root, c.Size())
	}
	return nil
}

func start(c *ranks.Comm) (*commState, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil", ranks.ErrComm)
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.IsInter() {
		return nil, fmt.Errorf("%w: this collective does not take an intercommunicator (on intercommunicators gompj "+
			"has every blocking collective but Scan and Exscan, which MPI does not define there; nonblocking and "+
			"persistent collectives take intracommunicators only)", ranks.ErrComm)
	}
	return stateOf(c), nil
}

func sameKind(a, b vec) error {
	if a.k != b.k {
		return errType(a, b)
	}
	return nil
}

// checkCounts validates counts and displacements (in elements of sz bytes) against a buffer of len bytes.
func checkCounts(what string, counts, displs []int, n, sz, length int) error {
	if len(counts) != n {
		return errArg("%s: %d counts for %d ranks", what, len(counts), n)
	}
	if displs != nil && len(displs) != n {
		return errArg("%s: %d displacements for %d ranks", what, len(displs), n)
	}
	off := 0
	for i, c := range counts {
		d := off
		if displs != nil {
			d = displs[i]
		}
		if c < 0 || d < 0 {
			return errArg("%s: count %d, displacement %d for rank %d", what, c, d, i)
		}
		// Compared in elements, without d+c or (d+c)*sz: those overflowed for huge counts or displacements,
		// which then passed, and a peer reading the block (shared memory: blockOf) sliced outside the buffer.
		if lim := length / max(sz, 1); d > lim || c > lim-d {
			return errTrunc("%s: rank %d's block of %d at %d does not fit a buffer of %d elements", what, i, c, d, lim)
		}
		off += c
	}
	return nil
}

// Barrier blocks until every member has called it.
func Barrier(c *ranks.Comm) error {
	if c.IsInter() {
		return interBarrier(c)
	}
	if _, err := ResolveBarrier(c); err != nil {
		return err
	}
	st := stateOf(c)
	startedOn(c, st, ranks.CallBarrier, 0) // the arguments passed: the call takes place (ranks, callcheck.go)
	return barrierOn(c, st, true)
}

func barrier(c *ranks.Comm) error { return barrierOn(c, stateOf(c), false) }

// barrierOn is barrier with c's state st; api: the program's Barrier, whose wait in shared memory looks for a
// member that called a small nonblocking collective in its place (gate.go).
func barrierOn(c *ranks.Comm, st *commState, api bool) error {
	if st.size == 1 {
		return nil
	}
	algo, err := st.chooseID(collBarrier, "barrier", st.sel(true, 0))
	if err != nil {
		return err
	}
	switch algo {
	case "shm":
		if api {
			return st.shmOp(c).barrierOf(true)
		}
		return st.shmOp(c).Barrier()
	case "hier":
		return leaderDone(st, hierBarrier(c, st))
	}
	return newP2P(c, st).dissemination()
}

// Bcast copies the root's buf into every member's buf. buf is a primitive (or Loc) slice, or a pointer to any
// msgpack-encodable value (sent by a binomial tree of encoded messages).
func Bcast(c *ranks.Comm, bufArg any, root int) error {
	buf := hideArg(&bufArg) // see hideArg
	if st := withViews(c, nil, &buf); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interBcast(c, buf, root)
	}
	a, err := ResolveBcast(c, buf, root)
	if err != nil {
		return err
	}
	started(c, ranks.CallBcast, root)
	if a.Object {
		return bcastObject(c, buf, root)
	}
	return bcastVec(c, a.rv, root)
}

func bcastObject(c *ranks.Comm, buf any, root int) error {
	n, rank := c.Size(), c.Rank()
	p := newP2P(c, stateOf(c))
	cc := p.c
	vr := (rank - root + n) % n
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if _, err := cc.Recv(buf, (rank-mask+n)%n, p.tag(tagBcast)); err != nil {
				if mask > 1 && vr+1 < n { // it has children, which wait for it (p2p.go, Broken)
					return Broken(cc, err)
				}
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := cc.Send(buf, (rank+mask)%n, p.tag(tagBcast)); err != nil {
				return Broken(cc, err)
			}
		}
	}
	return nil
}

func bcastVec(c *ranks.Comm, v vec, root int) error {
	st := stateOf(c)
	if st.size == 1 {
		return nil
	}
	algo, err := st.chooseID(collBcast, "bcast", st.sel(true, len(v.b)))
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	switch algo {
	case "shm":
		return st.shmOp(c).Bcast(v.b, root)
	case "hier":
		return hierBcast(c, st, v, root)
	case "linear":
		return p.linearBcast(v.b, root)
	case "scatter_allgather":
		return p.scatterAllgatherBcast(v.b, max(v.sz, 1), root)
	}
	return p.binomialBcast(v.b, root)
}

// Reduce combines every member's send with op, in rank order, into the root's recv (significant at the root
// only; InPlace as send at the root takes its contribution from recv).
func Reduce(c *ranks.Comm, sendArg, recvArg any, op Op, root int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interReduce(c, send, recv, op, root)
	}
	a, err := ResolveReduce(c, send, recv, op, root)
	if err != nil {
		return err
	}
	started(c, ranks.CallReduce, root)
	return reduceVec(c, a.k, op, a.sv, a.rv, root)
}

func reduceVec(c *ranks.Comm, k kernel, op Op, src, dst vec, root int) error {
	st := stateOf(c)
	if st.size == 1 {
		mem.Copy(dst.b, src.b)
		return nil
	}
	algo, err := st.chooseID(collReduce, "reduce", st.sel(op.Commutative(), len(src.b)))
	if err != nil {
		return err
	}
	switch algo {
	case "shm":
		return st.shmOp(c).Reduce(k, src.b, dst.b, max(src.sz, 1), root, st)
	case "hier":
		return leaderDone(st, hierReduce(c, st, k, op, src, dst, root))
	}
	var acc []byte
	if st.rank == root {
		acc = dst.b[:len(src.b)]
	} else {
		acc = st.scratch(scrAcc, len(src.b))
	}
	mem.Copy(acc, src.b)
	return newP2P(c, st).binomialReduce(combiner{k, op.Commutative()}, acc, root)
}

// Allreduce combines every member's send with op, in rank order, into every member's recv (InPlace: from recv).
func Allreduce(c *ranks.Comm, sendArg, recvArg any, op Op) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interAllreduce(c, send, recv, op)
	}
	a, err := ResolveAllreduce(c, send, recv, op)
	if err != nil {
		return err
	}
	started(c, ranks.CallAllreduce, 0)
	return allreduceState(c, stateOf(c), a.k, op, a.sv, a.rv)
}

func allreduceVec(c *ranks.Comm, k kernel, op Op, src, dst vec) error {
	return allreduceState(c, stateOf(c), k, op, src, dst)
}

func allreduceState(c *ranks.Comm, st *commState, k kernel, op Op, src, dst vec) error {
	if st.size == 1 {
		mem.Copy(dst.b, src.b)
		return nil
	}
	algo, err := st.chooseID(collAllreduce, "allreduce", st.sel(op.Commutative(), len(src.b)))
	if err != nil {
		return err
	}
	switch algo {
	case "shm":
		return st.shmOp(c).Allreduce(k, src.b, dst.b, max(src.sz, 1), st)
	case "hier":
		return leaderDone(st, hierAllreduce(c, st, k, op, src, dst))
	}
	acc := dst.b[:len(src.b)]
	p := newP2P(c, st)
	cb := combiner{k, op.Commutative()}
	if Disjoint(acc, src.b) {
		switch {
		case algo == "rabenseifner" && pof2Below(st.size) == st.size:
			return p.rabenseifner(cb, acc, src.b, max(src.sz, 1))
		case algo == "ring":
			return p.ringAllreduce(cb, acc, src.b, max(src.sz, 1))
		}
	}
	mem.Copy(acc, src.b)
	switch algo {
	case "rabenseifner":
		return p.rabenseifner(cb, acc, nil, max(src.sz, 1))
	case "ring":
		return p.ringAllreduce(cb, acc, nil, max(src.sz, 1))
	case "reduce_bcast":
		if err := p.binomialReduce(cb, acc, 0); err != nil {
			return err
		}
		return p.binomialBcast(acc, 0)
	}
	return p.recursiveDoubling(cb, acc)
}

// Gather collects every member's send, in rank order, into the root's recv (significant at the root only).
// InPlace as send at the root: its block is already in place in recv.
func Gather(c *ranks.Comm, sendArg, recvArg any, root int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interGather(c, send, recv, root)
	}
	a, err := ResolveGather(c, send, recv, root)
	if err != nil {
		return err
	}
	started(c, ranks.CallGather, root)
	if a.Object {
		return gatherObjects(c, send, recv, root)
	}
	return gatherBlocks(c, stateOf(c), a.sv.b, a.InPlace, a.rv.b, a.Blk, max(a.sv.sz, 1), root, true)
}

// gatherBlocks runs the chosen gather algorithm on blocks of blk bytes (elements of sz bytes). send is this rank's
// block; in place at the root it already sits in recv. Gathers inside a node-aware collective pass hier=false.
func gatherBlocks(c *ranks.Comm, st *commState, send []byte, inPlace bool, recv []byte, blk, sz, root int, hier bool) error {
	if st.size == 1 {
		mem.Copy(recv, send)
		return nil
	}
	algo, err := st.chooseID(collGather, "gather", st.sel(true, blk))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Gatherv(send, inPlace, recv, nil, nil, sz, blk, root)
	}
	own := send
	if inPlace {
		own = recv[root*blk : (root+1)*blk]
	}
	p := newP2P(c, st)
	switch {
	case algo == "hier" && hier:
		return leaderDone(st, hierGather(c, st, own, recv, blk, root))
	case algo == "binomial":
		return p.binomialGather(own, recv, blk, root)
	}
	if inPlace {
		own = nil
	}
	return p.linearGatherv(own, recv, nil, nil, 1, blk, root)
}

// Gatherv collects counts[i] elements from rank i into the root's recv at displs[i] (nil displs: packed in rank
// order). counts, displs and recv are significant at the root only.
func Gatherv(c *ranks.Comm, sendArg, recvArg any, counts, displs []int, root int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interGatherv(c, send, recv, counts, displs, root)
	}
	a, err := ResolveGatherv(c, send, recv, counts, displs, root)
	if err != nil {
		return err
	}
	started(c, ranks.CallGather, root)
	st := stateOf(c)
	inPlace, sv, rv := a.InPlace, a.sv, a.rv
	sz := max(sv.sz, 1)
	algo, err := st.chooseID(collGatherv, "gatherv", st.sel(true, 0))
	if err != nil {
		return err
	}
	if algo == "shm" || st.size == 1 {
		if st.size == 1 && !inPlace {
			b := blockOf(rv.b, counts, displs, sz, 0, 0)
			if len(sv.b) > len(b) {
				return errTrunc("gatherv: %d elements into a block of %d", sv.n, len(b)/sz)
			}
			mem.Copy(b, sv.b)
			return nil
		}
		if st.size > 1 {
			return st.shmOp(c).Gatherv(sv.b, inPlace, rv.b, counts, displs, sz, 0, root)
		}
		return nil
	}
	var own []byte
	if !inPlace {
		own = sv.b
	}
	return newP2P(c, st).linearGatherv(own, rv.b, counts, displs, sz, 0, root)
}

// Scatter hands block i of the root's send to rank i's recv (send significant at the root only). InPlace as recv
// at the root: the root's block stays where it is.
func Scatter(c *ranks.Comm, sendArg, recvArg any, root int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interScatter(c, send, recv, root)
	}
	a, err := ResolveScatter(c, send, recv, root)
	if err != nil {
		return err
	}
	started(c, ranks.CallScatter, root)
	if a.Object {
		return scatterObjects(c, send, recv, root)
	}
	st := stateOf(c)
	return scatterBlocks(c, st, a.sv.b, a.rv.b, a.InPlace, a.Blk, max(max(a.sv.sz, a.rv.sz), 1), root)
}

// scatterBlocks runs the chosen scatter algorithm on blocks of blk bytes (elements of sz bytes): block i of the
// root's send goes to rank i's recv (nil at the root in place).
func scatterBlocks(c *ranks.Comm, st *commState, send, recv []byte, inPlace bool, blk, sz, root int) error {
	if st.size == 1 {
		mem.Copy(recv, send)
		return nil
	}
	algo, err := st.chooseID(collScatter, "scatter", st.sel(true, blk))
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	switch algo {
	case "shm":
		return st.shmOp(c).Scatterv(send, nil, nil, sz, blk, recv, inPlace, root)
	case "hier":
		var r []byte
		if !inPlace {
			r = recv[:blk]
		}
		return hierScatter(c, st, send, r, blk, root)
	case "binomial":
		var r []byte
		if !inPlace {
			r = recv[:blk]
		}
		return p.binomialScatter(send, r, blk, root)
	}
	var r []byte
	if !inPlace {
		r = recv
	}
	return p.linearScatterv(send, nil, nil, sz, r, blk, root)
}

// Scatterv hands counts[i] elements at displs[i] of the root's send to rank i (send, counts and displs
// significant at the root only; nil displs: packed in rank order). InPlace as recv at the root.
func Scatterv(c *ranks.Comm, sendArg any, counts, displs []int, recvArg any, root int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interScatterv(c, send, counts, displs, recv, root)
	}
	a, err := ResolveScatterv(c, send, counts, displs, recv, root)
	if err != nil {
		return err
	}
	started(c, ranks.CallScatter, root)
	st := stateOf(c)
	inPlace, sv, rv := a.InPlace, a.sv, a.rv
	sz := max(max(sv.sz, rv.sz), 1)
	if st.size == 1 {
		if !inPlace {
			b := blockOf(sv.b, counts, displs, sz, 0, 0)
			if len(b) > len(rv.b) {
				return errTrunc("scatterv: %d elements into a buffer of %d", len(b)/sz, rv.n)
			}
			mem.Copy(rv.b, b)
		}
		return nil
	}
	algo, err := st.chooseID(collScatterv, "scatterv", st.sel(true, 0))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Scatterv(sv.b, counts, displs, sz, 0, rv.b, inPlace, root)
	}
	var r []byte
	if !inPlace {
		r = rv.b
	}
	return newP2P(c, st).linearScatterv(sv.b, counts, displs, sz, r, 0, root)
}

// Allgather collects every member's send, in rank order, into every member's recv. InPlace as send: each rank's
// block is already in place in recv.
func Allgather(c *ranks.Comm, sendArg, recvArg any) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interAllgather(c, send, recv)
	}
	a, err := ResolveAllgather(c, send, recv)
	if err != nil {
		return err
	}
	started(c, ranks.CallAllgather, 0)
	if a.Object {
		return allgatherObjects(c, send, recv)
	}
	st := stateOf(c)
	n := st.size
	inPlace, sv, rv, blk := a.InPlace, a.sv, a.rv, a.Blk
	if n == 1 {
		mem.Copy(rv.b, sv.b)
		return nil
	}
	algo, err := st.chooseID(collAllgather, "allgather", st.sel(true, blk))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Allgatherv(sv.b, inPlace, rv.b, nil, nil, max(rv.sz, 1), blk)
	}
	p := newP2P(c, st)
	all := rv.b[:n*blk]
	if algo == "ring" && !inPlace && Disjoint(all, sv.b) {
		return p.ringAllgatherFrom(sv.b, all, blk)
	}
	if !inPlace {
		mem.Copy(rv.b[st.rank*blk:], sv.b)
	}
	switch algo {
	case "hier":
		return leaderDone(st, hierAllgather(c, st, all, blk))
	case "recursive_doubling":
		return p.recursiveDoublingAllgather(all, blk)
	case "bruck":
		return p.bruckAllgather(all, blk)
	}
	return p.ringAllgatherv(all, nil, nil, 1, blk)
}

// Allgatherv collects counts[i] elements from rank i into every member's recv at displs[i] (nil displs: packed).
// InPlace as send: each rank's block is already in place.
func Allgatherv(c *ranks.Comm, sendArg, recvArg any, counts, displs []int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interAllgatherv(c, send, recv, counts, displs)
	}
	a, err := ResolveAllgatherv(c, send, recv, counts, displs)
	if err != nil {
		return err
	}
	started(c, ranks.CallAllgather, 0)
	st := stateOf(c)
	inPlace, sv, rv := a.InPlace, a.sv, a.rv
	own := blockOf(rv.b, counts, displs, rv.sz, st.rank, 0)
	if st.size == 1 {
		mem.Copy(own, sv.b)
		return nil
	}
	algo, err := st.chooseID(collAllgatherv, "allgatherv", st.sel(true, 0))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Allgatherv(sv.b, inPlace, rv.b, counts, displs, rv.sz, 0)
	}
	if !inPlace {
		mem.Copy(own, sv.b)
	}
	return newP2P(c, st).ringAllgatherv(rv.b, counts, displs, rv.sz, 0)
}

// Alltoall sends block j of send to rank j, which stores it as block i (this rank) of its recv. InPlace as send:
// the blocks to send are in recv and are replaced by the ones received.
func Alltoall(c *ranks.Comm, sendArg, recvArg any) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interAlltoall(c, send, recv)
	}
	a, err := ResolveAlltoall(c, send, recv)
	if err != nil {
		return err
	}
	started(c, ranks.CallAlltoall, 0)
	st := stateOf(c)
	n := st.size
	rv, blk, src := a.rv, a.Blk, a.sv.b
	if a.InPlace {
		src = st.scratch(scrCall, len(rv.b)) // the blocks to send, while the received ones replace them
		mem.Copy(src, rv.b)
	}
	if n == 1 {
		mem.Copy(rv.b, src)
		return nil
	}
	algo, err := st.chooseID(collAlltoall, "alltoall", st.sel(true, blk))
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	switch algo {
	case "shm":
		return st.shmOp(c).Alltoallv(src, nil, nil, rv.b, nil, nil, max(rv.sz, 1), blk)
	case "hier":
		return leaderDone(st, hierAlltoall(c, st, src, rv.b, blk))
	case "bruck":
		return p.bruckAlltoall(src, rv.b, blk)
	case "linear":
		return p.linearAlltoallv(src, nil, nil, rv.b, nil, nil, 1, blk)
	}
	return p.pairwiseAlltoallv(src, nil, nil, rv.b, nil, nil, 1, blk)
}

// Alltoallv sends sendCounts[j] elements at sendDispls[j] to rank j, which stores them at its recvDispls[i]
// (nil displacements: packed in rank order).
func Alltoallv(c *ranks.Comm, sendArg any, sendCounts, sendDispls []int, recvArg any, recvCounts, recvDispls []int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	}
	a, err := ResolveAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	if err != nil {
		return err
	}
	started(c, ranks.CallAlltoall, 0)
	st := stateOf(c)
	sv, rv := a.sv, a.rv
	n := st.size
	sz := max(sv.sz, 1)
	if n == 1 {
		s, r := blockOf(sv.b, sendCounts, sendDispls, sz, 0, 0), blockOf(rv.b, recvCounts, recvDispls, sz, 0, 0)
		if len(s) > len(r) {
			return errTrunc("alltoallv: %d elements into a block of %d", len(s)/sz, len(r)/sz)
		}
		mem.Copy(r, s)
		return nil
	}
	algo, err := st.chooseID(collAlltoallv, "alltoallv", st.sel(true, 0))
	if err != nil {
		return err
	}
	switch algo {
	case "shm":
		return st.shmOp(c).Alltoallv(sv.b, sendCounts, sendDispls, rv.b, recvCounts, recvDispls, sz, 0)
	case "linear":
		return newP2P(c, st).linearAlltoallv(sv.b, sendCounts, sendDispls, rv.b, recvCounts, recvDispls, sz, 0)
	}
	return newP2P(c, st).pairwiseAlltoallv(sv.b, sendCounts, sendDispls, rv.b, recvCounts, recvDispls, sz, 0)
}

// ReduceScatter combines every member's send (sum(counts) elements) with op and leaves block i (counts[i]
// elements, blocks packed in rank order) in rank i's recv. InPlace as send: the vector is in recv (which then holds
// sum(counts) elements), and the block is left at its start (MPI_IN_PLACE).
func ReduceScatter(c *ranks.Comm, sendArg, recvArg any, counts []int, op Op) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interReduceScatter(c, send, recv, counts, op)
	}
	a, err := ResolveReduceScatter(c, send, recv, counts, op)
	if err != nil {
		return err
	}
	started(c, ranks.CallReduceScatter, 0)
	st := stateOf(c)
	inPlace, sv, rv, k := a.InPlace, a.sv, a.rv, a.k
	sz := max(sv.sz, 1)
	if st.size == 1 {
		if !inPlace {
			mem.Copy(rv.b, sv.b)
		}
		return nil
	}
	algo, err := st.chooseID(collReduceScatter, "reduce_scatter", st.sel(op.Commutative(), len(sv.b)))
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	switch algo {
	case "shm":
		return st.shmOp(c).ReduceScatter(k, sv.b, rv.b, counts, sz, inPlace, st)
	case "ring":
		acc := st.scratch(scrAcc, len(sv.b)) // holds the partial pieces: the contribution is read from sv
		offs := st.scratchInts(intsAlgo, st.size+1)
		for i, x := range counts {
			offs[i+1] = offs[i] + x*sz
		}
		piece := func(i int) []byte { return acc[offs[i]:offs[i+1]] }
		own := func(i int) []byte { return sv.b[offs[i]:offs[i+1]] }
		if err := p.ringReduceScatter(combiner{k, true}, acc, piece, own, 0, tagReduceScatter); err != nil {
			return err
		}
		mem.Copy(rv.b, piece(st.rank))
		return nil
	}
	// reduce_scatterv: reduce to rank 0, which scatters the blocks. In place, send aliases recv: the reduction has
	// finished reading it (here and everywhere) before the scatter writes it.
	var full vec
	if st.rank == 0 {
		full = sv
		full.b = st.scratch(scrCall, len(sv.b))
	}
	if err := reduceVec(c, k, op, sv, full, 0); err != nil {
		return err
	}
	return p.linearScatterv(full.b, counts, nil, sz, rv.b, 0, 0)
}

// ReduceScatterBlock is ReduceScatter with every block len(recv) elements long. InPlace as send: recv holds the
// whole vector (size × the block), and the block is left at its start.
func ReduceScatterBlock(c *ranks.Comm, sendArg, recvArg any, op Op) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	if c.IsInter() {
		return interReduceScatterBlock(c, send, recv, op)
	}
	st, err := start(c)
	if err != nil {
		return err
	}
	counts := st.scratchInts(intsCall, c.Size())
	if _, err := ResolveReduceScatterBlock(c, send, recv, op, counts); err != nil {
		return err
	}
	c.StartCall() // logged here; counted once, by ReduceScatter (started)
	return ReduceScatter(c, send, recv, counts, op)
}

// Scan leaves in rank i's recv the combination of the sends of ranks 0..i. InPlace as send: from recv.
func Scan(c *ranks.Comm, send, recv any, op Op) error { return scan(c, send, recv, op, false) }

// Exscan leaves in rank i's recv the combination of the sends of ranks 0..i-1; rank 0's recv is not touched.
// InPlace as send: from recv.
func Exscan(c *ranks.Comm, send, recv any, op Op) error { return scan(c, send, recv, op, true) }

// scanKind is the call check's kind of a scan.
func scanKind(exclusive bool) ranks.CallKind {
	if exclusive {
		return ranks.CallExscan
	}
	return ranks.CallScan
}

func scan(c *ranks.Comm, sendArg, recvArg any, op Op, exclusive bool) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	if st := withViews(c, &send, &recv); st != nil {
		defer st.unpackArgs()
	}
	a, err := ResolveScan(c, send, recv, op, exclusive)
	if err != nil {
		return err
	}
	started(c, scanKind(exclusive), 0)
	st := stateOf(c)
	what, src, dst, k := a.Coll, a.sv, a.rv, a.k
	if exclusive && isInPlace(send) {
		b := st.scratch(scrCall, len(src.b)) // rank 0's recv must stay untouched, and the others' is overwritten
		mem.Copy(b, src.b)
		src.b = b
	}
	if st.size == 1 {
		if !exclusive {
			mem.Copy(dst.b, src.b)
		}
		return nil
	}
	algo, err := st.choose(what, st.sel(op.Commutative(), len(src.b)))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Scan(k, src.b, dst.b, exclusive)
	}
	return newP2P(c, st).chainScan(combiner{k, op.Commutative()}, src.b, dst.b[:len(src.b)], exclusive)
}
