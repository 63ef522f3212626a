package collectives

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"

	"github.com/gompj/gompj/ranks"
)

// Collectives on intercommunicators, as MPI defines them: data flows from one group to the other. Each is built
// from an intracommunicator collective over each group's local communicator (ranks.Comm.Local, so the local
// phases take the table's algorithms, shared memory included) and messages between the groups on the
// intercommunicator's collective context, where point-to-point ranks name the remote group. Usually the local
// rank 0s (the leaders) carry one message each way (Barrier, Bcast, Reduce, Allreduce, Gather, Scatter, Allgather,
// ReduceScatter(Block)); Alltoall(v) exchanges pairwise between the groups' ranks, and the other v-variants send
// each block straight to where it goes. Scan and Exscan are not defined on intercommunicators (ErrComm).
//
// Rooted collectives (Bcast, Reduce, Gather(v), Scatter(v)) take root = ranks.Root at the root, ProcNull at the
// other ranks of its group, and the root's rank in the remote group at the ranks of the other group. Blocks may differ
// in size between the groups (the sizes one group sends are those the other receives), so where a group cannot
// know the size it receives (Allgather), its leader tells it. InPlace is not defined on intercommunicators.
//
// Errors: a leader that meets an error receiving from the other group (a short buffer) still runs the local
// phase, so that its group does not wait for it, and returns the error; Allgather's leader also passes it to
// its whole group.

// rootRole is what a rank does in a rooted intercommunicator collective.
type rootRole uint8

const (
	roleRoot   rootRole = iota // the root
	roleIdle                   // in the root's group, not the root: takes no part
	roleRemote                 // in the other group: root is the root's remote rank
)

// interStart checks c and starts the operation: every rank of both groups calls it once per collective, so that
// they number the intercommunicator's operations alike: every message between the groups carries the operation's
// id in its tag (p.tag, seq.go), whether it goes through p's methods or straight through p.c.
func interStart(c *ranks.Comm) (*commState, p2p, error) {
	if err := c.Check(); err != nil {
		return nil, p2p{}, err
	}
	st := stateOf(c)
	return st, newP2P(c, st), nil
}

func interRole(c *ranks.Comm, root int, what string) (rootRole, error) {
	switch {
	case root == ranks.Root:
		return roleRoot, nil
	case root == ranks.ProcNull:
		return roleIdle, nil
	case root >= 0 && root < c.RemoteSize():
		return roleRemote, nil
	}
	return 0, fmt.Errorf("%w: %s on an intercommunicator: root %d (Root at the root, ProcNull at the rest of its "+
		"group, the root's rank 0..%d in the other group)", ranks.ErrRoot, what, root, c.RemoteSize()-1)
}

func noInPlace(what string, bufs ...any) error {
	for _, b := range bufs {
		if isInPlace(b) {
			return errArg("%s: InPlace is not defined on intercommunicators", what)
		}
	}
	return nil
}

func interBarrier(c *ranks.Comm) error {
	_, p, err := interStart(c)
	if err != nil {
		return err
	}
	lc := c.Local()
	// Every member of this group has arrived once the local barrier ends on the leader; the leaders' exchange
	// tells each of them that the other group has arrived; the second barrier holds the group until its leader
	// knows.
	if err := Barrier(lc); err != nil {
		return err
	}
	if lc.Rank() == 0 {
		if err := p.sendrecv(empty, 0, empty, 0, tagBarrier); err != nil {
			return err
		}
	}
	return Barrier(lc)
}

func interBcast(c *ranks.Comm, buf any, root int) error {
	_, p, err := interStart(c)
	if err != nil {
		return err
	}
	role, err := interRole(c, root, "bcast")
	if err != nil || role == roleIdle {
		return err
	}
	if err := noInPlace("bcast", buf); err != nil {
		return err
	}
	if buf == nil {
		return fmt.Errorf("%w: bcast: nil buffer", ranks.ErrBuffer)
	}
	v, verr := viewOf(buf, "bcast")
	object := verr != nil
	if role == roleRoot {
		if object {
			return p.c.Send(buf, 0, p.tag(tagBcast))
		}
		return p.send(v.b, 0, tagBcast)
	}
	lc := c.Local()
	var rerr error
	if lc.Rank() == 0 {
		if object {
			_, rerr = p.c.Recv(buf, root, p.tag(tagBcast))
		} else {
			rerr = p.recv(v.b, root, tagBcast)
		}
	}
	if object {
		err = bcastObject(lc, buf, 0)
	} else {
		err = bcastVec(lc, v, 0)
	}
	return firstErr(rerr, err)
}

func interReduce(c *ranks.Comm, send, recv any, op Op, root int) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	role, err := interRole(c, root, "reduce")
	if err != nil || role == roleIdle {
		return err
	}
	if err := noInPlace("reduce", send); err != nil {
		return err
	}
	if role == roleRoot {
		dst, err := viewOfRole(recv, "reduce", " receive")
		if err != nil {
			return err
		}
		if _, err := kernelFor(op, dst.k); err != nil {
			return err
		}
		return p.recv(dst.b, 0, tagReduce)
	}
	src, err := viewOfRole(send, "reduce", " send")
	if err != nil {
		return err
	}
	k, err := kernelFor(op, src.k)
	if err != nil {
		return err
	}
	lc := c.Local()
	var acc vec
	if lc.Rank() == 0 {
		acc = vec{k: src.k, b: st.scratch(scrCall, len(src.b)), n: src.n, sz: src.sz}
	}
	if err := reduceVec(lc, k, op, src, acc, 0); err != nil {
		return err
	}
	if lc.Rank() == 0 {
		return p.send(acc.b, root, tagReduce)
	}
	return nil
}

func interAllreduce(c *ranks.Comm, send, recv any, op Op) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	if err := noInPlace("allreduce", send, recv); err != nil {
		return err
	}
	src, dst, err := reduceArgs("allreduce", send, recv, true)
	if err != nil {
		return err
	}
	k, err := kernelFor(op, src.k)
	if err != nil {
		return err
	}
	lc := c.Local()
	var acc vec
	if lc.Rank() == 0 {
		acc = vec{k: src.k, b: st.scratch(scrCall, len(src.b)), n: src.n, sz: src.sz}
	}
	if err := reduceVec(lc, k, op, src, acc, 0); err != nil {
		return err
	}
	out := dst
	out.b, out.n = dst.b[:len(src.b)], src.n
	var xerr error
	if lc.Rank() == 0 { // this group's reduction goes to the other group, whose reduction this group receives
		xerr = p.sendrecv(acc.b, 0, out.b, 0, tagAllreduce)
	}
	return firstErr(xerr, bcastVec(lc, out, 0))
}

func interGather(c *ranks.Comm, send, recv any, root int) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	role, err := interRole(c, root, "gather")
	if err != nil || role == roleIdle {
		return err
	}
	if err := noInPlace("gather", send); err != nil {
		return err
	}
	if role == roleRoot {
		if isObject(recv) { // a pointer to a slice, one element per remote rank
			s, err := sliceTarget("gather", recv, c.RemoteSize())
			if err != nil {
				return err
			}
			for i := 0; i < c.RemoteSize(); i++ {
				if _, err := p.c.Recv(s.Index(i).Addr().Interface(), i, p.tag(tagGather)); err != nil {
					return err
				}
			}
			return nil
		}
		rv, err := viewOf(recv, "gather receive")
		if err != nil {
			return err
		}
		// The other group's blocks, gathered at its leader, come in one message.
		return p.recv(rv.b, 0, tagGather)
	}
	if isObject(send) {
		return p.c.Send(send, root, p.tag(tagGather))
	}
	sv, err := viewOf(send, "gather send")
	if err != nil {
		return err
	}
	lc := c.Local()
	blk := len(sv.b)
	var all []byte
	if lc.Rank() == 0 {
		all = st.scratch(scrCall, lc.Size()*blk)
	}
	if err := gatherBlocks(lc, stateOf(lc), sv.b, false, all, blk, max(sv.sz, 1), 0, true); err != nil {
		return err
	}
	if lc.Rank() == 0 {
		return p.send(all, root, tagGather)
	}
	return nil
}

func interScatter(c *ranks.Comm, send, recv any, root int) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	role, err := interRole(c, root, "scatter")
	if err != nil || role == roleIdle {
		return err
	}
	if err := noInPlace("scatter", recv); err != nil {
		return err
	}
	n := c.RemoteSize()
	if role == roleRoot {
		if isObject(send) { // a slice, one element per remote rank
			s := reflect.ValueOf(send)
			if s.Kind() != reflect.Slice || s.Len() != n {
				return fmt.Errorf("%w: scatter of objects needs a slice of %d elements at the root, got %v",
					ranks.ErrBuffer, n, reflect.TypeOf(send))
			}
			for i := 0; i < n; i++ {
				if err := p.c.Send(s.Index(i).Interface(), i, p.tag(tagScatter)); err != nil {
					return err
				}
			}
			return nil
		}
		sv, err := viewOf(send, "scatter send")
		if err != nil {
			return err
		}
		if len(sv.b)%n != 0 {
			return errArg("scatter: a send buffer of %d elements for %d remote ranks", sv.n, n)
		}
		return p.send(sv.b, 0, tagScatter)
	}
	if isObject(recv) { // a pointer
		rv := reflect.ValueOf(recv)
		if rv.Kind() != reflect.Pointer || rv.IsNil() {
			return fmt.Errorf("%w: scatter of objects needs a pointer to receive into, got %v", ranks.ErrBuffer, reflect.TypeOf(recv))
		}
		_, err := p.c.Recv(recv, root, p.tag(tagScatter))
		return err
	}
	rv, err := viewOf(recv, "scatter receive")
	if err != nil {
		return err
	}
	// Every rank's receive buffer is its block, as in an intracommunicator scatter's non-roots.
	lc := c.Local()
	blk := len(rv.b)
	var all []byte
	var rerr error
	if lc.Rank() == 0 {
		all = st.scratch(scrCall, lc.Size()*blk)
		var s ranks.Status
		if s, rerr = p.c.Recv(all, root, p.tag(tagScatter)); rerr == nil && s.Bytes() != len(all) {
			rerr = errArg("scatter: the root sent %d bytes for %d ranks receiving %d bytes each", s.Bytes(),
				lc.Size(), blk)
		}
	}
	return firstErr(rerr, scatterBlocks(lc, stateOf(lc), all, rv.b, false, blk, max(rv.sz, 1), 0))
}

func interAllgather(c *ranks.Comm, send, recv any) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	if err := noInPlace("allgather", send); err != nil {
		return err
	}
	if isObject(send) {
		return interAllgatherObjects(p, send, recv)
	}
	sv, err := viewOf(send, "allgather send")
	if err != nil {
		return err
	}
	rv, err := viewOf(recv, "allgather receive")
	if err != nil {
		return err
	}
	if err := sameKind(sv, rv); err != nil {
		return err
	}
	lc := c.Local()
	blk := len(sv.b)
	var all []byte
	if lc.Rank() == 0 {
		all = st.scratch(scrCall, lc.Size()*blk)
	}
	if err := gatherBlocks(lc, stateOf(lc), sv.b, false, all, blk, max(sv.sz, 1), 0, true); err != nil {
		return err
	}
	// The leaders swap their groups' vectors; each tells its group how many bytes came (and whether they were
	// cut short), since the other group's blocks may have another size than this group's.
	hdr := st.scratch(scrAcc, 16)
	if lc.Rank() == 0 {
		s, xerr := p.c.Sendrecv(all, 0, p.tag(tagAllgather), rv.b, 0, p.tag(tagAllgather))
		binary.LittleEndian.PutUint64(hdr, uint64(s.Bytes()))
		binary.LittleEndian.PutUint64(hdr[8:], 0)
		if xerr != nil {
			binary.LittleEndian.PutUint64(hdr[8:], 1)
		}
		if xerr != nil && !isTruncate(xerr) {
			return xerr
		}
	}
	if err := bcastVec(lc, vec{k: kind(ranks.TypeByte), b: hdr, n: 16, sz: 1}, 0); err != nil {
		return err
	}
	m := int(binary.LittleEndian.Uint64(hdr))
	truncated := binary.LittleEndian.Uint64(hdr[8:]) != 0
	out := rv.b
	if m > len(out) { // this rank's buffer is shorter than the leader's: take the broadcast elsewhere
		out = st.scratch(scrCall, m)
		truncated = true
	}
	if err := bcastVec(lc, vec{k: rv.k, b: out[:m], n: m / max(rv.sz, 1), sz: rv.sz}, 0); err != nil {
		return err
	}
	if len(rv.b) < m {
		copy(rv.b, out)
	}
	if truncated {
		return errTrunc("allgather: the other group's blocks do not fit a receive buffer of %d elements", rv.n)
	}
	return nil
}

func isTruncate(err error) bool { return errors.Is(err, ranks.ErrTruncate) }

// interAllgatherObjects sends every rank's value to every rank of the other group (objects are for convenience:
// one message per pair).
func interAllgatherObjects(p p2p, send, recv any) error {
	n := p.c.RemoteSize()
	s, err := sliceTarget("allgather", recv, n)
	if err != nil {
		return err
	}
	reqs := make([]*ranks.Request, n)
	for i := range reqs {
		if reqs[i], err = p.c.Irecv(s.Index(i).Addr().Interface(), i, p.tag(tagAllgather)); err != nil {
			return err
		}
	}
	for j := 0; j < n; j++ {
		if err := p.c.Send(send, j, p.tag(tagAllgather)); err != nil {
			return err
		}
	}
	return ranks.Waitall(reqs...)
}

func interAlltoall(c *ranks.Comm, send, recv any) error {
	_, p, err := interStart(c)
	if err != nil {
		return err
	}
	if err := noInPlace("alltoall", send); err != nil {
		return err
	}
	sv, err := viewOf(send, "alltoall send")
	if err != nil {
		return err
	}
	rv, err := viewOf(recv, "alltoall receive")
	if err != nil {
		return err
	}
	if err := sameKind(sv, rv); err != nil {
		return err
	}
	n := c.RemoteSize()
	if sv.n%n != 0 || rv.n%n != 0 {
		return errArg("alltoall: send and receive buffers of %d and %d elements for %d remote ranks", sv.n, rv.n, n)
	}
	sb, rb := len(sv.b)/n, len(rv.b)/n
	return pairwiseInter(p, c.Rank(), c.Size(), n,
		func(k int) []byte { return sv.b[k*sb : (k+1)*sb] },
		func(k int) []byte { return rv.b[k*rb : (k+1)*rb] })
}

// pairwiseInter exchanges block sblock(k) for rblock(k) with every remote rank k (n of them; this group has size
// ranks, me among them), pairwise over max(size, n) steps: at step i, rank me sends to remote rank me+i and
// receives from remote rank me-i (mod the larger size), which at that step send to and receive from me; partners
// beyond the remote group are ProcNull. Every step runs even after an error, so no partner is left waiting.
func pairwiseInter(p p2p, me, size, n int, sblock, rblock func(k int) []byte) error {
	steps := max(size, n)
	var first error
	for i := 0; i < steps; i++ {
		dst, src := (me+i)%steps, (me-i+steps)%steps
		var s, r []byte
		if dst < n {
			s = sblock(dst)
		} else {
			dst = ranks.ProcNull
		}
		if src < n {
			r = rblock(src)
		} else {
			src = ranks.ProcNull
		}
		if err := p.sendrecv(s, dst, r, src, tagAlltoall); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// The v-variants exchange directly between the groups' ranks, one message per block: their counts are known
// only where the blocks are received or sent, so no local phase could pack them.

func interGatherv(c *ranks.Comm, send, recv any, counts, displs []int, root int) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	role, err := interRole(c, root, "gatherv")
	if err != nil || role == roleIdle {
		return err
	}
	if err := noInPlace("gatherv", send); err != nil {
		return err
	}
	if role == roleRemote {
		sv, err := viewOf(send, "gatherv send")
		if err != nil {
			return err
		}
		return p.send(sv.b, root, tagGather)
	}
	rv, err := viewOf(recv, "gatherv receive")
	if err != nil {
		return err
	}
	n := c.RemoteSize()
	if err := checkCounts("gatherv", counts, displs, n, rv.sz, len(rv.b)); err != nil {
		return err
	}
	reqs := st.reqList()
	for i := 0; i < n; i++ {
		if reqs, err = st.irecv(p.c, reqs, blockOf(rv.b, counts, displs, max(rv.sz, 1), i, 0), i, p.tag(tagGather)); err != nil {
			return firstErr(err, st.waitReqs(reqs))
		}
	}
	return st.waitReqs(reqs)
}

func interScatterv(c *ranks.Comm, send any, counts, displs []int, recv any, root int) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	role, err := interRole(c, root, "scatterv")
	if err != nil || role == roleIdle {
		return err
	}
	if err := noInPlace("scatterv", recv); err != nil {
		return err
	}
	if role == roleRemote {
		rv, err := viewOf(recv, "scatterv receive")
		if err != nil {
			return err
		}
		return p.recv(rv.b, root, tagScatter)
	}
	sv, err := viewOf(send, "scatterv send")
	if err != nil {
		return err
	}
	n := c.RemoteSize()
	if err := checkCounts("scatterv", counts, displs, n, sv.sz, len(sv.b)); err != nil {
		return err
	}
	reqs := st.reqList()
	for i := 0; i < n; i++ {
		r, err := p.isend(blockOf(sv.b, counts, displs, max(sv.sz, 1), i, 0), i, tagScatter)
		if err != nil {
			return firstErr(err, st.waitReqs(reqs))
		}
		reqs = append(reqs, r)
	}
	return st.waitReqs(reqs)
}

func interAllgatherv(c *ranks.Comm, send, recv any, counts, displs []int) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	if err := noInPlace("allgatherv", send); err != nil {
		return err
	}
	sv, err := viewOf(send, "allgatherv send")
	if err != nil {
		return err
	}
	rv, err := viewOf(recv, "allgatherv receive")
	if err != nil {
		return err
	}
	if err := sameKind(sv, rv); err != nil {
		return err
	}
	n := c.RemoteSize()
	if err := checkCounts("allgatherv", counts, displs, n, rv.sz, len(rv.b)); err != nil {
		return err
	}
	// Every receive is posted before any send starts, so rendezvous sends find them.
	reqs := st.reqList()
	for i := 0; i < n; i++ {
		if reqs, err = st.irecv(p.c, reqs, blockOf(rv.b, counts, displs, max(rv.sz, 1), i, 0), i, p.tag(tagAllgather)); err != nil {
			return firstErr(err, st.waitReqs(reqs))
		}
	}
	for j := 0; j < n; j++ {
		r, err := p.isend(sv.b, j, tagAllgather)
		if err != nil {
			return firstErr(err, st.waitReqs(reqs))
		}
		reqs = append(reqs, r)
	}
	return st.waitReqs(reqs)
}

func interAlltoallv(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) error {
	_, p, err := interStart(c)
	if err != nil {
		return err
	}
	if err := noInPlace("alltoallv", send); err != nil {
		return err
	}
	sv, err := viewOf(send, "alltoallv send")
	if err != nil {
		return err
	}
	rv, err := viewOf(recv, "alltoallv receive")
	if err != nil {
		return err
	}
	if err := sameKind(sv, rv); err != nil {
		return err
	}
	n := c.RemoteSize()
	if err := checkCounts("alltoallv send", sendCounts, sendDispls, n, sv.sz, len(sv.b)); err != nil {
		return err
	}
	if err := checkCounts("alltoallv receive", recvCounts, recvDispls, n, rv.sz, len(rv.b)); err != nil {
		return err
	}
	sz := max(sv.sz, 1)
	return pairwiseInter(p, c.Rank(), c.Size(), n,
		func(k int) []byte { return blockOf(sv.b, sendCounts, sendDispls, sz, k, 0) },
		func(k int) []byte { return blockOf(rv.b, recvCounts, recvDispls, sz, k, 0) })
}

func interReduceScatterBlock(c *ranks.Comm, send, recv any, op Op) error {
	st, err := stateForCounts(c)
	if err != nil {
		return err
	}
	rv, err := viewOf(recv, "reduce_scatter_block receive")
	if err != nil {
		return err
	}
	counts := st.scratchInts(intsCall, c.Size())
	for i := range counts {
		counts[i] = rv.n
	}
	return interReduceScatter(c, send, recv, counts, op)
}

// stateForCounts is c's state, for the callers that need its scratch before the operation starts.
func stateForCounts(c *ranks.Comm) (*commState, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	return stateOf(c), nil
}

// interReduceScatter: each group reduces its vectors (sum(counts) elements, counts being its own group's) at its
// leader; the leaders swap the results, and each scatters the other group's reduction over its group by counts.
func interReduceScatter(c *ranks.Comm, send, recv any, counts []int, op Op) error {
	st, p, err := interStart(c)
	if err != nil {
		return err
	}
	if err := noInPlace("reduce_scatter", send, recv); err != nil {
		return err
	}
	sv, err := viewOf(send, "reduce_scatter send")
	if err != nil {
		return err
	}
	rv, err := viewOf(recv, "reduce_scatter receive")
	if err != nil {
		return err
	}
	if err := sameKind(sv, rv); err != nil {
		return err
	}
	if len(counts) != c.Size() {
		return errArg("reduce_scatter: %d counts for %d ranks", len(counts), c.Size())
	}
	total := 0
	for i, x := range counts {
		if x < 0 {
			return errArg("reduce_scatter: count %d for rank %d", x, i)
		}
		total += x
	}
	if total != sv.n {
		return errArg("reduce_scatter: counts add up to %d, the send buffer holds %d elements", total, sv.n)
	}
	if counts[c.Rank()] > rv.n {
		return errTrunc("reduce_scatter: %d elements into a buffer of %d", counts[c.Rank()], rv.n)
	}
	k, err := kernelFor(op, sv.k)
	if err != nil {
		return err
	}
	lc := c.Local()
	var acc, full []byte
	if lc.Rank() == 0 {
		acc, full = st.scratch(scrCall, len(sv.b)), st.scratch(scrAcc, len(sv.b))
	}
	if err := reduceVec(lc, k, op, sv, vec{k: sv.k, b: acc, n: sv.n, sz: sv.sz}, 0); err != nil {
		return err
	}
	var xerr error
	if lc.Rank() == 0 {
		xerr = p.sendrecv(acc, 0, full, 0, tagReduceScatter)
	}
	sz := max(sv.sz, 1)
	return firstErr(xerr, newP2P(lc, stateOf(lc)).linearScatterv(full, counts, nil, sz, rv.b[:counts[c.Rank()]*sz], 0, 0))
}
