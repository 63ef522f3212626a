package collectives

import (
	"errors"
	"fmt"

	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/ranks"
)

// Message-based algorithms, over the communicator's collective context. Blocks travel as bytes.

// Base tags on the collective context: what a message is within its operation. The tag on the wire also carries
// the operation's id (seq.go), so that any number of collectives may be outstanding on one communicator.
const (
	tagBarrier = iota + 1
	tagBcast
	tagReduce
	tagAllreduce
	tagGather
	tagScatter
	tagAllgather
	tagAlltoall
	tagReduceScatter
	tagScan
	tagHier
	tagNeighbor // every message of a neighbourhood collective (neighbor.go pairs them by posting order)
	numBaseTags
)

// p2p is one operation of a message-based algorithm on a communicator: its messages travel on the collective
// context with tags made of the operation's id and a base tag.
type p2p struct {
	c          *ranks.Comm // on the collective context
	rank, size int
	st         *commState
	id         OpID
}

// newP2P starts an operation on c: it takes the next operation id of c, so every member must call it at the same
// point of the same collective (the algorithms call it on every member alike).
func newP2P(c *ranks.Comm, st *commState) p2p {
	return p2p{c: c.Coll(), rank: st.rank, size: st.size, st: st, id: st.nextOp()}
}

// tag is the wire tag of this operation's messages of base tag base.
func (p p2p) tag(base int) int { return Tag(p.id, base) }

var empty = []byte{}

// A rank that fails part-way through a message-based collective leaves the others waiting: those it would have
// sent to next, and those whose sends it will not receive (a rendezvous send waits for its receive). The library
// tells them nothing, and each of them waits for ever. The commonest cause is an erroneous program: a buffer that
// does not match the root's data or the peers' on one rank, which that rank sees only as a message arrives too long
// (ErrTruncate) or of another type (ErrType). So the blocking sends and receives of an algorithm end the job when
// they fail (Broken), as MPI's default error handler would: the failing rank returns its error, and every other
// rank's call returns ErrAborted naming the rank and the cause. A receive after which the rank owes nobody anything
// (a leaf of a bcast or scatter tree, a non-root rank of a linear one, a root's receive of its result) is recvLast:
// there the job goes on, as on the shared-memory paths, where a reader whose buffer does not match fails alone.
// Waitall (st.waitReqs) lets every request it was given complete, so what an algorithm posted at once and then
// waits for leaves nobody waiting.

func (p p2p) send(b []byte, dst, base int) error {
	return Broken(p.c, p.c.Send(b, dst, p.tag(base)))
}

func (p p2p) recv(b []byte, src, base int) error {
	return Broken(p.c, p.recvLast(b, src, base))
}

// recvLast is a receive after which the rank has nothing left to do for anyone in the operation.
func (p p2p) recvLast(b []byte, src, base int) error {
	_, err := p.c.Recv(b, src, p.tag(base))
	return err
}

func (p p2p) sendrecv(s []byte, dst int, r []byte, src, base int) error {
	t := p.tag(base)
	_, err := p.c.Sendrecv(s, dst, t, r, src, t)
	return Broken(p.c, err)
}

// Broken ends the job when err, the failure of a rank's part of a collective on c, leaves other ranks waiting on
// that rank, and returns err (see above). A job that is ending anyway is left to its first cause, which may not
// have reached this node yet when err is its symptom (ErrAborted: a connection to an aborting node closed):
// ending the job with the symptom would report it in place of the cause (node's runRank waits for it likewise).
func Broken(c *ranks.Comm, err error) error {
	if err != nil && !errors.Is(err, ranks.ErrAborted) {
		if w := c.World(); !w.Aborted() {
			w.Abort(&ranks.RankError{Rank: c.WorldRank(c.Rank()), Err: fmt.Errorf("a collective it left part-way, "+
				"which other ranks wait on: %w", err)})
		}
	}
	return err
}

// isend starts a send of b to dst with base tag base.
func (p p2p) isend(b []byte, dst, base int) (*ranks.Request, error) {
	return p.c.Isend(b, dst, p.tag(base))
}

// irecv starts a receive of bytes into b from src on c and appends its request to reqs, which the caller waits for
// with st.waitReqs. It uses IrecvBytes: Irecv's interface argument escapes, so boxing b for it would allocate.
func (st *commState) irecv(c *ranks.Comm, reqs []*ranks.Request, b []byte, src, tag int) ([]*ranks.Request, error) {
	r, err := c.IrecvBytes(b, src, tag)
	if err != nil {
		return reqs, err
	}
	return append(reqs, r), nil
}

// --- barrier ---

func (p p2p) dissemination() error {
	for d := 1; d < p.size; d *= 2 {
		if err := p.sendrecv(empty, (p.rank+d)%p.size, empty, (p.rank-d+p.size)%p.size, tagBarrier); err != nil {
			return err
		}
	}
	return nil
}

// --- bcast ---

func (p p2p) binomialBcast(buf []byte, root int) error {
	reqs, err := p.binomialBcastStart(buf, root)
	if err != nil {
		return err
	}
	return p.st.waitReqs(reqs)
}

// binomialBcastStart receives buf from the parent and starts the sends to the children; the caller waits for
// the returned requests with p.st.waitReqs (so that it can do something else meanwhile).
func (p p2p) binomialBcastStart(buf []byte, root int) ([]*ranks.Request, error) {
	n := p.size
	vr := (p.rank - root + n) % n
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			recv := p.recv
			if mask == 1 || vr+1 >= n { // a leaf: its children would be vr+mask/2, ..., vr+1
				recv = p.recvLast
			}
			if err := recv(buf, (p.rank-mask+n)%n, tagBcast); err != nil {
				return nil, err
			}
			break
		}
		mask <<= 1
	}
	reqs := p.st.reqList()
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			r, err := p.isend(buf, (p.rank+mask)%n, tagBcast)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
		}
	}
	return reqs, nil
}

func (p p2p) linearBcast(buf []byte, root int) error {
	if p.rank != root {
		return p.recvLast(buf, root, tagBcast)
	}
	reqs := p.st.reqList()
	for i := 0; i < p.size; i++ {
		if i != root {
			r, err := p.isend(buf, i, tagBcast)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	return p.st.waitReqs(reqs)
}

// span returns the byte range of piece i of total bytes (elements of sz) cut into n pieces.
func span(total, sz, n, i int) (lo, hi int) {
	elems := total / sz
	per, extra := elems/n, elems%n
	lo = i*per + min(i, extra)
	hi = lo + per
	if i < extra {
		hi++
	}
	return lo * sz, hi * sz
}

// scatterAllgatherBcast: the root hands piece i to rank i, then a ring allgather completes everybody (van de
// Geijn): every link carries about 2 bytes per byte of the message, whatever the number of ranks.
func (p p2p) scatterAllgatherBcast(buf []byte, sz, root int) error {
	n := p.size
	piece := func(i int) []byte {
		lo, hi := span(len(buf), sz, n, (i-root+n)%n)
		return buf[lo:hi]
	}
	if p.rank == root {
		reqs := p.st.reqList()
		for i := 0; i < n; i++ {
			if i != root {
				r, err := p.isend(piece(i), i, tagBcast)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
		}
		if err := Broken(p.c, p.st.waitReqs(reqs)); err != nil {
			return err
		}
	} else if err := p.recv(piece(p.rank), root, tagBcast); err != nil {
		return err
	}
	right, left := (p.rank+1)%n, (p.rank-1+n)%n
	for s := 0; s < n-1; s++ {
		if err := p.sendrecv(piece((p.rank-s+n)%n), right, piece((p.rank-s-1+2*n)%n), left, tagBcast); err != nil {
			return err
		}
	}
	return nil
}

// --- reductions ---

// combiner applies an op keeping rank order for non-commutative ops.
type combiner struct {
	k    kernel
	comm bool
}

// left: acc = in op acc (in comes from lower ranks).
func (cb combiner) left(acc, in []byte) { cb.k(acc, in) }

// right: acc = acc op in (in comes from higher ranks); in is clobbered.
func (cb combiner) right(acc, in []byte) {
	if cb.comm {
		cb.k(acc, in)
		return
	}
	cb.k(in, acc)
	mem.Copy(acc, in)
}

// binomialReduce combines into acc (holding this rank's contribution) and leaves the result in the root's acc.
// Non-commutative ops are reduced to rank 0 in rank order and then sent to the root.
func (p p2p) binomialReduce(cb combiner, acc []byte, root int) error {
	n := p.size
	r0 := root
	if !cb.comm {
		r0 = 0
	}
	vr := (p.rank - r0 + n) % n
	tmp := p.st.scratch(scrRecv, len(acc))
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask == 0 {
			if src := vr | mask; src < n {
				if err := p.recv(tmp, (src+r0)%n, tagReduce); err != nil {
					return err
				}
				cb.right(acc, tmp)
			}
		} else {
			if err := p.send(acc, (vr&^mask+r0)%n, tagReduce); err != nil {
				return err
			}
			break
		}
	}
	if r0 != root {
		if p.rank == r0 {
			return p.send(acc, root, tagReduce)
		}
		if p.rank == root {
			return p.recvLast(acc, r0, tagReduce)
		}
	}
	return nil
}

func pof2Below(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// fold: the first 2*rem ranks pair up so that a power of two of ranks remains; even ones hand their data to the
// odd neighbour and sit out. It returns the rank among the remaining ones, or -1.
func (p p2p) fold(cb combiner, acc, tmp []byte, tag int) (newrank, pof2, rem int, err error) {
	n := p.size
	pof2 = pof2Below(n)
	rem = n - pof2
	if p.rank < 2*rem {
		if p.rank%2 == 0 {
			return -1, pof2, rem, p.send(acc, p.rank+1, tag)
		}
		if err := p.recv(tmp, p.rank-1, tag); err != nil {
			return 0, 0, 0, err
		}
		cb.left(acc, tmp)
		return p.rank / 2, pof2, rem, nil
	}
	return p.rank - rem, pof2, rem, nil
}

func (p p2p) unfold(acc []byte, rem, tag int) error {
	if p.rank < 2*rem {
		if p.rank%2 == 1 {
			return p.send(acc, p.rank-1, tag)
		}
		return p.recvLast(acc, p.rank+1, tag)
	}
	return nil
}

func realRank(newrank, rem int) int {
	if newrank < rem {
		return newrank*2 + 1
	}
	return newrank + rem
}

// recursiveDoubling allreduce on acc (this rank's contribution, then the result); keeps rank order.
func (p p2p) recursiveDoubling(cb combiner, acc []byte) error {
	tmp := p.st.scratch(scrRecv, len(acc))
	newrank, pof2, rem, err := p.fold(cb, acc, tmp, tagAllreduce)
	if err != nil {
		return err
	}
	if newrank >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			dst := realRank(newrank^mask, rem)
			if err := p.sendrecv(acc, dst, tmp, dst, tagAllreduce); err != nil {
				return err
			}
			if dst < p.rank {
				cb.left(acc, tmp)
			} else {
				cb.right(acc, tmp)
			}
		}
	}
	return p.unfold(acc, rem, tagAllreduce)
}

// rabenseifner allreduce (commutative ops): reduce-scatter by recursive halving, allgather by recursive doubling.
//
// With send (a power-of-two size only: no fold; send and acc disjoint), acc does not hold the rank's contribution:
// the first halving step sends from send and receives the peer's part straight into the part of acc it keeps, then
// reduces its own part of send into it (commutative: either order); every other part of acc is received whole in
// the allgather. Copying send into acc first, and receiving into scratch, had cost a 1 MiB Allreduce between 2 node
// processes of one host a copy of the whole buffer and one of half of it (pprof: memmove 13 % of its time).
func (p p2p) rabenseifner(cb combiner, acc, send []byte, sz int) error {
	tmp := p.st.scratch(scrRecv, len(acc))
	newrank, pof2, rem, err := p.fold(cb, acc, tmp, tagAllreduce)
	if err != nil {
		return err
	}
	if newrank >= 0 {
		disp := p.st.scratchInts(intsAlgo, pof2+1)
		for i := 0; i < pof2; i++ {
			_, disp[i+1] = span(len(acc), sz, pof2, i)
		}
		sendIdx, recvIdx, lastIdx := 0, 0, pof2
		mask := 1
		for ; mask < pof2; mask <<= 1 {
			newdst := newrank ^ mask
			dst := realRank(newdst, rem)
			var sLo, sHi, rLo, rHi int
			if newrank < newdst {
				sendIdx = recvIdx + pof2/(mask*2)
				sLo, sHi, rLo, rHi = sendIdx, lastIdx, recvIdx, sendIdx
			} else {
				recvIdx = sendIdx + pof2/(mask*2)
				sLo, sHi, rLo, rHi = sendIdx, recvIdx, recvIdx, lastIdx
			}
			if send != nil && mask == 1 {
				kept := acc[disp[rLo]:disp[rHi]]
				if err := p.sendrecv(send[disp[sLo]:disp[sHi]], dst, kept, dst, tagAllreduce); err != nil {
					return err
				}
				cb.k(kept, send[disp[rLo]:disp[rHi]])
			} else {
				r := tmp[disp[rLo]:disp[rHi]]
				if err := p.sendrecv(acc[disp[sLo]:disp[sHi]], dst, r, dst, tagAllreduce); err != nil {
					return err
				}
				cb.k(acc[disp[rLo]:disp[rHi]], r)
			}
			sendIdx = recvIdx
			if mask*2 < pof2 {
				lastIdx = recvIdx + pof2/(mask*2)
			}
		}
		for mask >>= 1; mask > 0; mask >>= 1 {
			newdst := newrank ^ mask
			dst := realRank(newdst, rem)
			var sLo, sHi, rLo, rHi int
			if newrank < newdst {
				if mask != pof2/2 {
					lastIdx += pof2 / (mask * 2)
				}
				recvIdx = sendIdx + pof2/(mask*2)
				sLo, sHi, rLo, rHi = sendIdx, recvIdx, recvIdx, lastIdx
			} else {
				recvIdx = sendIdx - pof2/(mask*2)
				sLo, sHi, rLo, rHi = sendIdx, lastIdx, recvIdx, sendIdx
			}
			if err := p.sendrecv(acc[disp[sLo]:disp[sHi]], dst, acc[disp[rLo]:disp[rHi]], dst, tagAllreduce); err != nil {
				return err
			}
			if newrank > newdst {
				sendIdx = recvIdx
			}
		}
	}
	return p.unfold(acc, rem, tagAllreduce)
}

// ringReduceScatter leaves piece `target(r)` fully reduced at rank r: piece i of acc is span(i); after it, rank r
// owns piece (r + shift) mod n.
//
// With own (piece i of the rank's contribution, apart from acc), acc does not hold the contribution: the first step
// sends from own, and each step receives the partial piece straight into acc and reduces the rank's own piece into
// it (commutative ops: either order). No copy of the whole contribution into acc, no scratch; the pieces of acc
// that no step receives are left as they were.
func (p p2p) ringReduceScatter(cb combiner, acc []byte, piece, own func(i int) []byte, shift int, tag int) error {
	n := p.size
	right, left := (p.rank+1)%n, (p.rank-1+n)%n
	for s := 0; s < n-1; s++ {
		si := ((p.rank-s-1+shift)%n + 2*n) % n
		ri := ((p.rank-s-2+shift)%n + 2*n) % n
		in := piece(ri)
		if own != nil {
			out := piece(si)
			if s == 0 {
				out = own(si)
			}
			if err := p.sendrecv(out, right, in, left, tag); err != nil {
				return err
			}
			cb.k(in, own(ri))
			continue
		}
		t := p.st.scratch(scrRecv, len(in)) // one step's: the previous step's is done with
		if err := p.sendrecv(piece(si), right, t, left, tag); err != nil {
			return err
		}
		cb.k(in, t)
	}
	return nil
}

// ring allreduce (commutative ops): ring reduce-scatter, then ring allgather; bandwidth-optimal. With send (apart
// from acc), acc does not hold the rank's contribution yet: the reduce-scatter reads it from send
// (ringReduceScatter's own), and the allgather fills every piece the reduce-scatter left.
func (p p2p) ringAllreduce(cb combiner, acc, send []byte, sz int) error {
	n := p.size
	piece := func(i int) []byte {
		lo, hi := span(len(acc), sz, n, i)
		return acc[lo:hi]
	}
	var own func(i int) []byte
	if send != nil {
		own = func(i int) []byte {
			lo, hi := span(len(send), sz, n, i)
			return send[lo:hi]
		}
	}
	if err := p.ringReduceScatter(cb, acc, piece, own, 0, tagAllreduce); err != nil {
		return err
	}
	// rank r owns piece r; allgather it around the ring
	right, left := (p.rank+1)%n, (p.rank-1+n)%n
	for s := 0; s < n-1; s++ {
		if err := p.sendrecv(piece((p.rank-s+n)%n), right, piece((p.rank-s-1+2*n)%n), left, tagAllreduce); err != nil {
			return err
		}
	}
	return nil
}

// --- gather, scatter ---

// linearGatherv: blocks land in recv at the root; send is this rank's block (nil at an in-place root).
func (p p2p) linearGatherv(send []byte, recv []byte, counts, displs []int, sz, blockBytes, root int) error {
	if p.rank != root {
		return p.send(send, root, tagGather)
	}
	reqs := p.st.reqList()
	for i := 0; i < p.size; i++ {
		b := blockOf(recv, counts, displs, sz, i, blockBytes)
		if i == root {
			if send != nil {
				if len(send) > len(b) {
					return errTrunc("gather: %d bytes from the root into a block of %d", len(send), len(b))
				}
				mem.Copy(b, send)
			}
			continue
		}
		var err error
		if reqs, err = p.st.irecv(p.c, reqs, b, i, p.tag(tagGather)); err != nil {
			return err
		}
	}
	return p.st.waitReqs(reqs)
}

func (p p2p) linearScatterv(send []byte, counts, displs []int, sz int, recv []byte, blockBytes, root int) error {
	if p.rank != root {
		return p.recvLast(recv, root, tagScatter)
	}
	reqs := p.st.reqList()
	for i := 0; i < p.size; i++ {
		b := blockOf(send, counts, displs, sz, i, blockBytes)
		if i == root {
			if recv != nil {
				if len(b) > len(recv) {
					return errTrunc("scatter: %d bytes for the root into a buffer of %d", len(b), len(recv))
				}
				mem.Copy(recv, b)
			}
			continue
		}
		r, err := p.isend(b, i, tagScatter)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	return p.st.waitReqs(reqs)
}

// binomialGather of equal blocks: subtrees are gathered in relative-rank order into tmp, then the root rotates.
func (p p2p) binomialGather(send []byte, recv []byte, blk, root int) error {
	n := p.size
	vr := (p.rank - root + n) % n
	tmp := p.st.scratch(scrRecv, blk*n)
	mem.Copy(tmp, send)
	have := 1
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask == 0 {
			src := vr | mask
			if src < n {
				cnt := min(mask, n-src)
				if err := p.recv(tmp[mask*blk:(mask+cnt)*blk], (src+root)%n, tagGather); err != nil {
					return err
				}
				have += cnt
			}
		} else {
			return p.send(tmp[:have*blk], (vr&^mask+root)%n, tagGather)
		}
	}
	for i := 0; i < n; i++ {
		mem.Copy(recv[((i+root)%n)*blk:], tmp[i*blk:(i+1)*blk])
	}
	return nil
}

func (p p2p) binomialScatter(send []byte, recv []byte, blk, root int) error {
	n := p.size
	vr := (p.rank - root + n) % n
	tmp := p.st.scratch(scrRecv, blk*n)
	mask := 1
	if vr == 0 {
		for i := 0; i < n; i++ {
			mem.Copy(tmp[i*blk:(i+1)*blk], send[((i+root)%n)*blk:])
		}
		for mask < n {
			mask <<= 1
		}
	} else {
		for ; mask < n; mask <<= 1 {
			if vr&mask != 0 {
				cnt := min(mask, n-vr)
				recv := p.recv
				if cnt == 1 { // a leaf: the subtree it receives is its own block
					recv = p.recvLast
				}
				if err := recv(tmp[:cnt*blk], (p.rank-mask+n)%n, tagScatter); err != nil {
					return err
				}
				break
			}
		}
	}
	reqs := p.st.reqList()
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			cnt := min(mask, n-vr-mask)
			r, err := p.isend(tmp[mask*blk:(mask+cnt)*blk], (p.rank+mask)%n, tagScatter)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	if err := p.st.waitReqs(reqs); err != nil {
		return err
	}
	if recv != nil {
		mem.Copy(recv, tmp[:blk])
	}
	return nil
}

// --- allgather ---

// ringAllgatherv: this rank's block is already in place in recv.
func (p p2p) ringAllgatherv(recv []byte, counts, displs []int, sz, blk int) error {
	return p.ringAllgatherSteps(recv, counts, displs, sz, blk, 0)
}

// ringAllgatherFrom is the ring allgather of blocks of blk bytes whose own block is still in send (apart from
// recv): the first step sends it from send, and it is copied into recv while that step's transfers are under way.
// Sent from recv after the copy, the block was read by the peer (across node processes, its process_vm_readv) from
// the lines the copy had just written: an allgather of 48 and 64 KiB blocks between 2 node processes of one host
// took 8.3-20 and 12-66 us against 7.2-8.5 and 10-11 sent from send (4 alternated runs).
func (p p2p) ringAllgatherFrom(send, recv []byte, blk int) error {
	n := p.size
	right, left := (p.rank+1)%n, (p.rank-1+n)%n
	reqs, err := p.st.irecv(p.c, p.st.reqList(), recv[left*blk:(left+1)*blk], left, p.tag(tagAllgather))
	if err == nil {
		var r *ranks.Request
		if r, err = p.isend(send[:blk], right, tagAllgather); err == nil {
			reqs = append(reqs, r)
		}
	}
	mem.Copy(recv[p.rank*blk:(p.rank+1)*blk], send[:blk])
	// On an error, what was posted is still waited for: the caller's buffers must not be in use when it returns.
	if werr := p.st.waitReqs(reqs); err != nil || werr != nil {
		if err = errors.Join(err, werr); n > 2 {
			return Broken(p.c, err) // the later steps' peers wait on this rank
		}
		return err
	}
	return p.ringAllgatherSteps(recv, nil, nil, 1, blk, 1)
}

// ringAllgatherSteps runs the ring allgather's steps from first on: at step s this rank sends block rank-s and
// receives block rank-s-1.
func (p p2p) ringAllgatherSteps(recv []byte, counts, displs []int, sz, blk, first int) error {
	n := p.size
	right, left := (p.rank+1)%n, (p.rank-1+n)%n
	for s := first; s < n-1; s++ {
		sb := blockOf(recv, counts, displs, sz, (p.rank-s+n)%n, blk)
		rb := blockOf(recv, counts, displs, sz, (p.rank-s-1+2*n)%n, blk)
		if err := p.sendrecv(sb, right, rb, left, tagAllgather); err != nil {
			return err
		}
	}
	return nil
}

// bruckAllgather: ceil(log2 n) steps for any n; this rank's block is in place in recv.
func (p p2p) bruckAllgather(recv []byte, blk int) error {
	n := p.size
	tmp := p.st.scratch(scrRecv, n*blk)
	mem.Copy(tmp, recv[p.rank*blk:(p.rank+1)*blk])
	for pof := 1; pof < n; pof *= 2 {
		cnt := min(pof, n-pof)
		if err := p.sendrecv(tmp[:cnt*blk], (p.rank-pof+n)%n, tmp[pof*blk:(pof+cnt)*blk], (p.rank+pof)%n, tagAllgather); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		mem.Copy(recv[((p.rank+i)%n)*blk:], tmp[i*blk:(i+1)*blk])
	}
	return nil
}

// recursiveDoublingAllgather for a power-of-two size (others use Bruck's).
func (p p2p) recursiveDoublingAllgather(recv []byte, blk int) error {
	n := p.size
	if n&(n-1) != 0 {
		return p.bruckAllgather(recv, blk)
	}
	for mask := 1; mask < n; mask <<= 1 {
		partner := p.rank ^ mask
		mine := p.rank &^ (mask - 1)
		theirs := partner &^ (mask - 1)
		if err := p.sendrecv(recv[mine*blk:(mine+mask)*blk], partner, recv[theirs*blk:(theirs+mask)*blk], partner, tagAllgather); err != nil {
			return err
		}
	}
	return nil
}

// --- alltoall ---

func (p p2p) pairwiseAlltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int, sz, blk int) error {
	n := p.size
	for i := 0; i < n; i++ {
		dst, src := (p.rank+i)%n, (p.rank-i+n)%n
		sb := blockOf(send, scounts, sdispls, sz, dst, blk)
		rb := blockOf(recv, rcounts, rdispls, sz, src, blk)
		if i == 0 {
			if len(sb) > len(rb) {
				return errTrunc("alltoall: %d bytes to self into a block of %d", len(sb), len(rb))
			}
			mem.Copy(rb, sb)
			continue
		}
		if err := p.sendrecv(sb, dst, rb, src, tagAlltoall); err != nil {
			return err
		}
	}
	return nil
}

// LinearWindow is how many peers a linear alltoall has transfers in flight with at once (MPICH's "scattered"
// alltoall bounds them alike): enough to keep every link of a node busy, few enough that a large communicator does
// not post thousands of receives and rendezvous at once. Package nbc's linear schedule takes its rounds alike.
const LinearWindow = 32

// linearAlltoallv moves the blocks with every peer at once, a window of peers at a time: it posts their receives,
// then their sends, and waits for them all. Pairwise steps wait for each exchange in turn, so one slow pair (a
// peer in another node process, a rank waiting for a core) holds back every later step; here each transfer goes as
// soon as its peer gets to it. Across node processes it took 0.4-0.8x pairwise's time (gompj bench alltoallv -np
// 4 -nodes 2, over shared memory and TCP, 1 KiB to 1 MiB; -np 8 -nodes 2 and -np 4 -nodes 4 likewise).
func (p p2p) linearAlltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int, sz, blk int) error {
	n := p.size
	sb := blockOf(send, scounts, sdispls, sz, p.rank, blk)
	rb := blockOf(recv, rcounts, rdispls, sz, p.rank, blk)
	if len(sb) > len(rb) {
		return errTrunc("alltoall: %d bytes to self into a block of %d", len(sb), len(rb))
	}
	mem.Copy(rb, sb)
	for lo := 1; lo < n; lo += LinearWindow {
		hi := min(lo+LinearWindow, n)
		reqs := p.st.reqList()
		var err error
		for i := lo; i < hi && err == nil; i++ {
			src := (p.rank - i + n) % n
			reqs, err = p.st.irecv(p.c, reqs, blockOf(recv, rcounts, rdispls, sz, src, blk), src, p.tag(tagAlltoall))
		}
		for i := lo; i < hi && err == nil; i++ {
			dst := (p.rank + i) % n
			var r *ranks.Request
			if r, err = p.isend(blockOf(send, scounts, sdispls, sz, dst, blk), dst, tagAlltoall); err == nil {
				reqs = append(reqs, r)
			}
		}
		// On an error, what was posted is still waited for: the caller's buffers must not be in use when it
		// returns.
		if werr := p.st.waitReqs(reqs); err != nil || werr != nil {
			if err = errors.Join(err, werr); hi < n {
				return Broken(p.c, err) // the windows after this one wait on this rank
			}
			return err
		}
	}
	return nil
}

// bruckAlltoall: ceil(log2 n) steps, each moving about half the data; for small blocks.
func (p p2p) bruckAlltoall(send, recv []byte, blk int) error {
	n := p.size
	half := (n/2 + 1) * blk // at most that many blocks move at each step
	buf := p.st.scratch(scrRecv, n*blk+2*half)
	tmp, pack, in := buf[:n*blk], buf[n*blk:n*blk+half], buf[n*blk+half:]
	for i := 0; i < n; i++ {
		mem.Copy(tmp[i*blk:(i+1)*blk], send[((p.rank+i)%n)*blk:])
	}
	for pof := 1; pof < n; pof <<= 1 {
		cnt := 0
		for i := 0; i < n; i++ {
			if i&pof != 0 {
				mem.Copy(pack[cnt*blk:(cnt+1)*blk], tmp[i*blk:(i+1)*blk])
				cnt++
			}
		}
		if err := p.sendrecv(pack[:cnt*blk], (p.rank+pof)%n, in[:cnt*blk], (p.rank-pof+n)%n, tagAlltoall); err != nil {
			return err
		}
		j := 0
		for i := 0; i < n; i++ {
			if i&pof != 0 {
				mem.Copy(tmp[i*blk:(i+1)*blk], in[j*blk:(j+1)*blk])
				j++
			}
		}
	}
	for i := 0; i < n; i++ {
		mem.Copy(recv[((p.rank-i+n)%n)*blk:], tmp[i*blk:(i+1)*blk])
	}
	return nil
}

// --- scan ---

// chainScan: rank i receives the prefix of ranks < i from rank i-1 and passes on its own.
func (p p2p) chainScan(cb combiner, src, dst []byte, exclusive bool) error {
	n := p.size
	if !exclusive {
		mem.Copy(dst, src)
		if p.rank > 0 {
			tmp := p.st.scratch(scrRecv, len(src))
			if err := p.recv(tmp, p.rank-1, tagScan); err != nil {
				return err
			}
			cb.left(dst, tmp)
		}
		if p.rank < n-1 {
			return p.send(dst, p.rank+1, tagScan)
		}
		return nil
	}
	mine := src
	if p.rank > 0 {
		if err := p.recv(dst, p.rank-1, tagScan); err != nil {
			return err
		}
		if p.rank < n-1 {
			mine = p.st.scratch(scrAcc, len(src))
			mem.Copy(mine, src)
			cb.left(mine, dst)
		}
	}
	if p.rank < n-1 {
		return p.send(mine, p.rank+1, tagScan)
	}
	return nil
}
