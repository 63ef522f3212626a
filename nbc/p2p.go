package nbc

import "github.com/gompj/gompj/collectives"

// Schedules of the message-based algorithms: the blocking algorithms of package collectives (p2p.go there), cut
// at their waits. Each function appends one operation's rounds for one rank to a schedule; buffers are bytes,
// blocks are counted in bytes (elements of sz bytes where a size is cut). What the blocking version takes from the
// communicator's scratch memory is allocated here, once per operation: operations may be outstanding together.
//
// A send the next rounds never write over is detached: the round need not wait for it (the operation does).

// Base tags of an operation's messages (collectives.Tag makes the wire tag with the operation's id).
const (
	tagBarrier = iota + 1
	tagBcast
	tagReduce
	tagAllreduce
	tagGather
	tagScatter
	tagAllgather
	tagAlltoall
	tagScan
	tagHier
)

// p2pb builds one rank's schedule of one operation.
type p2pb struct {
	s       *Schedule
	rank, n int
	id      collectives.OpID
}

func (b p2pb) tag(base int) int { return collectives.Tag(b.id, base) }

func (b p2pb) send(buf []byte, peer, base int) {
	b.s.add(Step{Kind: StepSend, Buf: buf, Peer: peer, Tag: b.tag(base), Base: base})
}
func (b p2pb) sendDet(buf []byte, peer, base int) {
	b.s.add(Step{Kind: StepSend, Detached: true, Buf: buf, Peer: peer, Tag: b.tag(base), Base: base})
}
func (b p2pb) recv(buf []byte, peer, base int) {
	b.s.add(Step{Kind: StepRecv, Buf: buf, Peer: peer, Tag: b.tag(base), Base: base})
}
func (b p2pb) sendObj(obj any, peer, base int) {
	b.s.add(Step{Kind: StepSendObj, Obj: obj, Peer: peer, Tag: b.tag(base), Base: base})
}
func (b p2pb) recvObj(obj any, peer, base int) {
	b.s.add(Step{Kind: StepRecvObj, Obj: obj, Peer: peer, Tag: b.tag(base), Base: base})
}
func (b p2pb) sendrecv(s []byte, dst int, r []byte, src, base int) {
	b.send(s, dst, base)
	b.recv(r, src, base)
}

// --- barrier ---

func (b p2pb) dissemination() {
	for d := 1; d < b.n; d *= 2 {
		b.s.Round()
		b.sendrecv(nil, (b.rank+d)%b.n, nil, (b.rank-d+b.n)%b.n, tagBarrier)
	}
}

// --- bcast ---

func (b p2pb) binomialBcast(buf []byte, root, base int) {
	n := b.n
	vr := (b.rank - root + n) % n
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			b.s.Round()
			b.recv(buf, (b.rank-mask+n)%n, base)
			break
		}
		mask <<= 1
	}
	b.s.Round()
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			b.sendDet(buf, (b.rank+mask)%n, base)
		}
	}
}

func (b p2pb) linearBcast(buf []byte, root int) {
	b.s.Round()
	if b.rank != root {
		b.recv(buf, root, tagBcast)
		return
	}
	for i := 0; i < b.n; i++ {
		if i != root {
			b.sendDet(buf, i, tagBcast)
		}
	}
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

func (b p2pb) scatterAllgatherBcast(buf []byte, sz, root int) {
	n := b.n
	piece := func(i int) []byte {
		lo, hi := span(len(buf), sz, n, (i-root+n)%n)
		return buf[lo:hi]
	}
	b.s.Round()
	if b.rank == root {
		for i := 0; i < n; i++ {
			if i != root {
				b.sendDet(piece(i), i, tagBcast)
			}
		}
	} else {
		b.recv(piece(b.rank), root, tagBcast)
	}
	right, left := (b.rank+1)%n, (b.rank-1+n)%n
	for s := 0; s < n-1; s++ {
		b.s.Round()
		b.sendDet(piece((b.rank-s+n)%n), right, tagAllgather)
		b.recv(piece((b.rank-s-1+2*n)%n), left, tagAllgather)
	}
}

// --- reductions ---

// binomialReduce combines into acc (which holds this rank's contribution once the schedule's earlier steps have
// run) and leaves the result in the root's acc. Non-commutative ops reduce to rank 0 in rank order, which hands
// the result to the root.
func (b p2pb) binomialReduce(k Kernel, commute bool, acc []byte, root, base int) {
	n := b.n
	r0 := root
	if !commute {
		r0 = 0
	}
	vr := (b.rank - r0 + n) % n
	var tmp []byte
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask == 0 {
			if src := vr | mask; src < n {
				if tmp == nil {
					tmp = b.s.scratch(len(acc))
				}
				b.s.Round()
				b.recv(tmp, (src+r0)%n, base)
				b.s.ReduceRight(k, commute, acc, tmp)
			}
		} else {
			b.s.Round()
			b.send(acc, (vr&^mask+r0)%n, base)
			break
		}
	}
	if r0 != root {
		if b.rank == r0 {
			b.s.Round()
			b.send(acc, root, base)
		}
		if b.rank == root {
			b.s.Round()
			b.recv(acc, r0, base)
		}
	}
}

func pof2Below(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

func realRank(newrank, rem int) int {
	if newrank < rem {
		return newrank*2 + 1
	}
	return newrank + rem
}

// fold pairs up the first 2*rem ranks so that a power of two remains (see collectives); it returns this rank's
// rank among the remaining ones, or -1.
func (b p2pb) fold(k Kernel, acc, tmp []byte) (newrank, pof2, rem int) {
	pof2 = pof2Below(b.n)
	rem = b.n - pof2
	if b.rank < 2*rem {
		b.s.Round()
		if b.rank%2 == 0 {
			b.send(acc, b.rank+1, tagAllreduce)
			return -1, pof2, rem
		}
		b.recv(tmp, b.rank-1, tagAllreduce)
		b.s.ReduceLeft(k, acc, tmp)
		return b.rank / 2, pof2, rem
	}
	return b.rank - rem, pof2, rem
}

func (b p2pb) unfold(acc []byte, rem int) {
	if b.rank < 2*rem {
		b.s.Round()
		if b.rank%2 == 1 {
			b.send(acc, b.rank-1, tagAllreduce)
		} else {
			b.recv(acc, b.rank+1, tagAllreduce)
		}
	}
}

// recursiveDoubling allreduce on acc; keeps rank order.
func (b p2pb) recursiveDoubling(k Kernel, commute bool, acc []byte) {
	tmp := b.s.scratch(len(acc))
	newrank, pof2, rem := b.fold(k, acc, tmp)
	if newrank >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			dst := realRank(newrank^mask, rem)
			b.s.Round()
			b.sendrecv(acc, dst, tmp, dst, tagAllreduce)
			if dst < b.rank {
				b.s.ReduceLeft(k, acc, tmp)
			} else {
				b.s.ReduceRight(k, commute, acc, tmp)
			}
		}
	}
	b.unfold(acc, rem)
}

// rabenseifner allreduce (commutative ops): reduce-scatter by recursive halving, allgather by recursive doubling.
// With send (a power-of-two size only: no fold), acc does not hold the rank's contribution yet: the first halving
// step sends from send; every other part of acc is received whole in the allgather. The part it keeps receives the
// peer's part straight in, and its own part of send is reduced into it (commutative: either order), unless send is
// acc (in place), when the peer's part goes to scratch and is reduced into acc. (A copy of the kept part and a
// receive into scratch had been half a megabyte more of copies in a 1 MiB Iallreduce.)
func (b p2pb) rabenseifner(k Kernel, acc, send []byte, sz int) {
	tmp := b.s.scratch(len(acc))
	newrank, pof2, rem := b.fold(k, acc, tmp)
	if newrank >= 0 {
		disp := make([]int, pof2+1)
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
			r := tmp[disp[rLo]:disp[rHi]]
			b.s.Round()
			switch kept := acc[disp[rLo]:disp[rHi]]; {
			case send != nil && mask == 1 && collectives.Disjoint(acc, send):
				b.sendrecv(send[disp[sLo]:disp[sHi]], dst, kept, dst, tagAllreduce)
				b.s.ReduceLeft(k, kept, send[disp[rLo]:disp[rHi]]) // commutative: either order
			case send != nil && mask == 1:
				b.sendrecv(send[disp[sLo]:disp[sHi]], dst, r, dst, tagAllreduce)
				b.s.Copy(kept, send[disp[rLo]:disp[rHi]])
				b.s.ReduceLeft(k, kept, r)
			default:
				b.sendrecv(acc[disp[sLo]:disp[sHi]], dst, r, dst, tagAllreduce)
				b.s.ReduceLeft(k, kept, r)
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
			b.s.Round()
			b.sendrecv(acc[disp[sLo]:disp[sHi]], dst, acc[disp[rLo]:disp[rHi]], dst, tagAllreduce)
			if newrank > newdst {
				sendIdx = recvIdx
			}
		}
	}
	b.unfold(acc, rem)
}

// ringReduceScatter leaves piece (r + shift) mod n of acc fully reduced at rank r (commutative ops). With own
// (piece i of the rank's contribution, apart from acc), acc does not hold the contribution: the first round sends
// from own, and each round receives the partial piece straight into acc and reduces the rank's own piece into it.
func (b p2pb) ringReduceScatter(k Kernel, acc []byte, piece, own func(i int) []byte, shift, base int) {
	n := b.n
	right, left := (b.rank+1)%n, (b.rank-1+n)%n
	var t []byte // the received partial pieces, without own
	if own == nil {
		most := 0
		for i := 0; i < n; i++ {
			most = max(most, len(piece(i)))
		}
		t = b.s.scratch(most)
	}
	for s := 0; s < n-1; s++ {
		si := ((b.rank-s-1+shift)%n + 2*n) % n
		ri := ((b.rank-s-2+shift)%n + 2*n) % n
		in := piece(ri)
		b.s.Round()
		if own == nil {
			b.sendrecv(piece(si), right, t[:len(in)], left, base)
			b.s.ReduceLeft(k, in, t[:len(in)])
			continue
		}
		out := piece(si)
		if s == 0 {
			out = own(si)
		}
		b.sendrecv(out, right, in, left, base)
		b.s.ReduceLeft(k, in, own(ri))
	}
}

// ringAllreduce (commutative ops): ring reduce-scatter, then ring allgather. With send (apart from acc), acc does
// not hold the rank's contribution: the reduce-scatter reads it from send, and the allgather fills the rest.
func (b p2pb) ringAllreduce(k Kernel, acc, send []byte, sz int) {
	n := b.n
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
	b.ringReduceScatter(k, acc, piece, own, 0, tagAllreduce)
	right, left := (b.rank+1)%n, (b.rank-1+n)%n
	for s := 0; s < n-1; s++ {
		b.s.Round()
		b.sendDet(piece((b.rank-s+n)%n), right, tagAllgather)
		b.recv(piece((b.rank-s-1+2*n)%n), left, tagAllgather)
	}
}

// --- gather, scatter ---

// blockOf returns rank i's block of buf: counts and displs in elements of sz bytes (nil displs: packed in rank
// order); without counts, blocks of blk bytes in rank order.
func blockOf(buf []byte, counts, displs []int, sz, i, blk int) []byte {
	if counts == nil {
		return buf[i*blk : (i+1)*blk]
	}
	d := 0
	if displs != nil {
		d = displs[i]
	} else {
		for j := 0; j < i; j++ {
			d += counts[j]
		}
	}
	return buf[d*sz : (d+counts[i])*sz]
}

// linearGatherv: own is this rank's block (nil at an in-place root); blocks land in the root's recv.
func (b p2pb) linearGatherv(own, recv []byte, counts, displs []int, sz, blk, root int) {
	b.s.Round()
	if b.rank != root {
		b.send(own, root, tagGather)
		return
	}
	if own != nil {
		b.s.Copy(blockOf(recv, counts, displs, sz, root, blk), own)
	}
	for i := 0; i < b.n; i++ {
		if i != root {
			b.recv(blockOf(recv, counts, displs, sz, i, blk), i, tagGather)
		}
	}
}

// linearScatterv: the root's send holds the blocks; recv nil at an in-place root.
func (b p2pb) linearScatterv(send []byte, counts, displs []int, sz int, recv []byte, blk, root int) {
	b.s.Round()
	if b.rank != root {
		b.recv(recv, root, tagScatter)
		return
	}
	if recv != nil {
		b.s.Copy(recv, blockOf(send, counts, displs, sz, root, blk))
	}
	for i := 0; i < b.n; i++ {
		if i != root {
			b.sendDet(blockOf(send, counts, displs, sz, i, blk), i, tagScatter)
		}
	}
}

// binomialGather of equal blocks of blk bytes: the subtrees' blocks gather in relative-rank order; the root rotates
// them into recv. The receives from the children all go at once (disjoint parts of tmp).
func (b p2pb) binomialGather(own, recv []byte, blk, root int) {
	n := b.n
	vr := (b.rank - root + n) % n
	tmp := b.s.scratch(blk * n)
	b.s.Copy(tmp, own)
	have := 1
	parent := -1
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask == 0 {
			if src := vr | mask; src < n {
				cnt := min(mask, n-src)
				b.recv(tmp[mask*blk:(mask+cnt)*blk], (src+root)%n, tagGather)
				have += cnt
			}
		} else {
			parent = (vr&^mask + root) % n
			break
		}
	}
	if parent >= 0 {
		b.s.Round()
		b.send(tmp[:have*blk], parent, tagGather)
		return
	}
	b.s.Round()
	for i := 0; i < n; i++ {
		b.s.Copy(recv[((i+root)%n)*blk:((i+root)%n+1)*blk], tmp[i*blk:(i+1)*blk])
	}
}

// binomialScatter of equal blocks: recv nil at an in-place root.
func (b p2pb) binomialScatter(send, recv []byte, blk, root int) {
	n := b.n
	vr := (b.rank - root + n) % n
	tmp := b.s.scratch(blk * n)
	mask := 1
	if vr == 0 {
		for i := 0; i < n; i++ {
			b.s.Copy(tmp[i*blk:(i+1)*blk], send[((i+root)%n)*blk:((i+root)%n+1)*blk])
		}
		for mask < n {
			mask <<= 1
		}
	} else {
		for ; mask < n; mask <<= 1 {
			if vr&mask != 0 {
				cnt := min(mask, n-vr)
				b.s.Round()
				b.recv(tmp[:cnt*blk], (b.rank-mask+n)%n, tagScatter)
				break
			}
		}
	}
	b.s.Round()
	if recv != nil {
		b.s.Copy(recv, tmp[:blk])
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			cnt := min(mask, n-vr-mask)
			b.sendDet(tmp[mask*blk:(mask+cnt)*blk], (b.rank+mask)%n, tagScatter)
		}
	}
}

// --- allgather ---

// ringAllgatherv: this rank's block is in place in recv once the earlier steps have run. With own (this rank's
// block, apart from recv), it is not: the first round sends own, and the last copies it into recv (no round reads
// it there).
func (b p2pb) ringAllgatherv(recv []byte, counts, displs []int, sz, blk int, own []byte) {
	n := b.n
	right, left := (b.rank+1)%n, (b.rank-1+n)%n
	for s := 0; s < n-1; s++ {
		b.s.Round()
		out := blockOf(recv, counts, displs, sz, (b.rank-s+n)%n, blk)
		if s == 0 && own != nil {
			out = own
		}
		b.sendDet(out, right, tagAllgather)
		b.recv(blockOf(recv, counts, displs, sz, (b.rank-s-1+2*n)%n, blk), left, tagAllgather)
	}
	if own != nil {
		b.s.Round()
		b.s.Copy(blockOf(recv, counts, displs, sz, b.rank, blk)[:len(own)], own)
	}
}

// bruckAllgather: ceil(log2 n) rounds for any n; this rank's block is in place in recv.
func (b p2pb) bruckAllgather(recv []byte, blk int) {
	n := b.n
	tmp := b.s.scratch(n * blk)
	b.s.Copy(tmp, recv[b.rank*blk:(b.rank+1)*blk])
	for pof := 1; pof < n; pof *= 2 {
		cnt := min(pof, n-pof)
		b.s.Round()
		b.sendDet(tmp[:cnt*blk], (b.rank-pof+n)%n, tagAllgather)
		b.recv(tmp[pof*blk:(pof+cnt)*blk], (b.rank+pof)%n, tagAllgather)
	}
	b.s.Round()
	for i := 0; i < n; i++ {
		j := (b.rank + i) % n
		b.s.Copy(recv[j*blk:(j+1)*blk], tmp[i*blk:(i+1)*blk])
	}
}

// recursiveDoublingAllgather for a power-of-two size (others use Bruck's).
func (b p2pb) recursiveDoublingAllgather(recv []byte, blk int) {
	n := b.n
	if n&(n-1) != 0 {
		b.bruckAllgather(recv, blk)
		return
	}
	for mask := 1; mask < n; mask <<= 1 {
		partner := b.rank ^ mask
		mine := b.rank &^ (mask - 1)
		theirs := partner &^ (mask - 1)
		b.s.Round()
		b.sendDet(recv[mine*blk:(mine+mask)*blk], partner, tagAllgather)
		b.recv(recv[theirs*blk:(theirs+mask)*blk], partner, tagAllgather)
	}
}

// --- alltoall ---

// The alltoall schedules copy this rank's own block last, in a round of its own, where the blocking algorithms
// copy it first: the first messages go out at once, and the copy is the background's while the rank computes
// (the worker pool's, or the device's loop that completed the last receive) rather than part of the starting
// call, which no computation overlaps. With 1 MiB blocks the copy took about 20 us of a start of 35 (2 node
// processes over TCP, traced). The own block is its own part of recv, which no message writes.

func (b p2pb) pairwiseAlltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int, sz, blk int) {
	n := b.n
	for i := 1; i < n; i++ {
		dst, src := (b.rank+i)%n, (b.rank-i+n)%n
		b.s.Round()
		b.sendDet(blockOf(send, scounts, sdispls, sz, dst, blk), dst, tagAlltoall)
		b.recv(blockOf(recv, rcounts, rdispls, sz, src, blk), src, tagAlltoall)
	}
	b.s.Round()
	b.s.Copy(blockOf(recv, rcounts, rdispls, sz, b.rank, blk), blockOf(send, scounts, sdispls, sz, b.rank, blk))
}

// linearAlltoallv is the blocking linear alltoall's schedule: one round per window of peers
// (collectives.LinearWindow) with all their receives and sends, so that each transfer goes as soon as its peer
// gets to it, then this rank's own block copied (own: its bytes, which the caller has checked against the block it
// receives into).
func (b p2pb) linearAlltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int, sz, blk int) {
	n := b.n
	for lo := 1; lo < n; lo += collectives.LinearWindow {
		hi := min(lo+collectives.LinearWindow, n)
		b.s.Round()
		for i := lo; i < hi; i++ {
			src := (b.rank - i + n) % n
			b.recv(blockOf(recv, rcounts, rdispls, sz, src, blk), src, tagAlltoall)
		}
		for i := lo; i < hi; i++ {
			dst := (b.rank + i) % n
			b.sendDet(blockOf(send, scounts, sdispls, sz, dst, blk), dst, tagAlltoall)
		}
	}
	own := blockOf(send, scounts, sdispls, sz, b.rank, blk)
	b.s.Round()
	b.s.Copy(blockOf(recv, rcounts, rdispls, sz, b.rank, blk)[:len(own)], own)
}

// bruckAlltoall: ceil(log2 n) rounds, each moving about half the blocks; packing and unpacking are local steps.
func (b p2pb) bruckAlltoall(send, recv []byte, blk int) {
	n := b.n
	half := (n/2 + 1) * blk
	tmp, pack, in := b.s.scratch(n*blk), b.s.scratch(half), b.s.scratch(half)
	for i := 0; i < n; i++ {
		j := (b.rank + i) % n
		b.s.Copy(tmp[i*blk:(i+1)*blk], send[j*blk:(j+1)*blk])
	}
	for pof := 1; pof < n; pof <<= 1 {
		cnt := 0
		for i := 0; i < n; i++ {
			if i&pof != 0 {
				b.s.Copy(pack[cnt*blk:(cnt+1)*blk], tmp[i*blk:(i+1)*blk])
				cnt++
			}
		}
		b.send(pack[:cnt*blk], (b.rank+pof)%n, tagAlltoall)
		b.recv(in[:cnt*blk], (b.rank-pof+n)%n, tagAlltoall)
		j := 0
		for i := 0; i < n; i++ {
			if i&pof != 0 {
				b.s.Copy(tmp[i*blk:(i+1)*blk], in[j*blk:(j+1)*blk])
				j++
			}
		}
	}
	b.s.Round()
	for i := 0; i < n; i++ {
		j := (b.rank - i + n) % n
		b.s.Copy(recv[j*blk:(j+1)*blk], tmp[i*blk:(i+1)*blk])
	}
}

// --- scan ---

// chainScan: rank i receives the prefix of ranks < i from rank i-1 and passes on its own.
func (b p2pb) chainScan(k Kernel, src, dst []byte, exclusive bool) {
	n := b.n
	if !exclusive {
		b.s.Copy(dst, src)
		if b.rank > 0 {
			tmp := b.s.scratch(len(src))
			b.s.Round()
			b.recv(tmp, b.rank-1, tagScan)
			b.s.ReduceLeft(k, dst, tmp)
		}
		if b.rank < n-1 {
			b.s.Round()
			b.send(dst, b.rank+1, tagScan)
		}
		return
	}
	mine := src
	if b.rank > 0 {
		b.s.Round()
		b.recv(dst, b.rank-1, tagScan)
		if b.rank < n-1 {
			mine = b.s.scratch(len(src))
			b.s.Copy(mine, src)
			b.s.ReduceLeft(k, mine, dst)
		}
	}
	if b.rank < n-1 {
		b.s.Round()
		b.send(mine, b.rank+1, tagScan)
	}
}
