package nbc

import (
	"fmt"
	"reflect"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// spec is one rank's part of one collective operation: what the schedule builders take.
type spec struct {
	algo    string
	rank, n int
	id      collectives.OpID
	a       *collectives.Call
}

func (sp *spec) p2p(s *Schedule) p2pb { return p2pb{s: s, rank: sp.rank, n: sp.n, id: sp.id} }

// buildP2P appends to s the schedule of sp's collective with a message-based algorithm (the table's names; the
// collective's last resort for any other name). Argument errors were found when the call was resolved; what it
// returns are errors of object calls, which package collectives checks only while it runs them.
func buildP2P(s *Schedule, sp *spec) error {
	a := sp.a
	if a.Object {
		return buildObjects(s, sp)
	}
	b := sp.p2p(s)
	n, rank := sp.n, sp.rank
	switch a.Coll {
	case "barrier":
		b.dissemination()
	case "bcast":
		if n == 1 {
			return nil
		}
		switch sp.algo {
		case "linear":
			b.linearBcast(a.Recv, a.Root)
		case "scatter_allgather":
			b.scatterAllgatherBcast(a.Recv, a.Sz, a.Root)
		default:
			b.binomialBcast(a.Recv, a.Root, tagBcast)
		}
	case "reduce":
		acc := a.Send
		if rank == a.Root {
			acc = a.Recv[:len(a.Send)]
		} else if n > 1 {
			acc = s.scratch(len(a.Send))
		}
		s.Copy(acc, a.Send)
		if n > 1 {
			b.binomialReduce(a.Kernel, a.Commutative, acc, a.Root, tagReduce)
		}
	case "allreduce":
		acc := a.Recv[:len(a.Send)]
		if n > 1 && sp.algo == "rabenseifner" && pof2Below(n) == n {
			// Its first round sends from the send buffer, and copies into the result only the part it keeps,
			// after the first receive: the starting call posts at once (its copy of the whole buffer was most of
			// what an Iallreduce's call cost, and of what a computing rank's overlap lost), and half the copy goes.
			b.rabenseifner(a.Kernel, acc, a.Send, a.Sz)
			return nil
		}
		if n > 1 && sp.algo == "ring" && collectives.Disjoint(acc, a.Send) {
			b.ringAllreduce(a.Kernel, acc, a.Send, a.Sz) // so does the ring's, and nothing is copied
			return nil
		}
		s.Copy(acc, a.Send)
		if n == 1 {
			return nil
		}
		switch sp.algo {
		case "rabenseifner":
			b.rabenseifner(a.Kernel, acc, nil, a.Sz)
		case "ring":
			b.ringAllreduce(a.Kernel, acc, nil, a.Sz)
		case "reduce_bcast":
			b.binomialReduce(a.Kernel, a.Commutative, acc, 0, tagReduce)
			b.binomialBcast(acc, 0, tagBcast)
		default:
			b.recursiveDoubling(a.Kernel, a.Commutative, acc)
		}
	case "gather":
		if n == 1 {
			s.Copy(a.Recv, a.Send)
			return nil
		}
		own := a.Send
		if a.InPlace {
			own = a.Recv[a.Root*a.Blk : (a.Root+1)*a.Blk]
		}
		if sp.algo == "binomial" {
			b.binomialGather(own, a.Recv, a.Blk, a.Root)
			return nil
		}
		if a.InPlace {
			own = nil
		}
		b.linearGatherv(own, a.Recv, nil, nil, 1, a.Blk, a.Root)
	case "gatherv":
		if n == 1 {
			if !a.InPlace {
				blk := blockOf(a.Recv, a.Counts, a.Displs, a.Sz, 0, 0)
				if len(a.Send) > len(blk) {
					return truncf("gatherv: %d elements into a block of %d", len(a.Send)/a.Sz, len(blk)/a.Sz)
				}
				s.Copy(blk, a.Send)
			}
			return nil
		}
		own := a.Send
		if a.InPlace {
			own = nil
		}
		if rank == a.Root && own != nil {
			if blk := blockOf(a.Recv, a.Counts, a.Displs, a.Sz, rank, 0); len(own) > len(blk) {
				return truncf("gatherv: %d elements from the root into a block of %d", len(own)/a.Sz, len(blk)/a.Sz)
			}
		}
		b.linearGatherv(own, a.Recv, a.Counts, a.Displs, a.Sz, 0, a.Root)
	case "scatter":
		var recv []byte
		if !a.InPlace {
			recv = a.Recv[:a.Blk]
		}
		if n == 1 {
			s.Copy(recv, a.Send)
			return nil
		}
		if sp.algo == "binomial" {
			b.binomialScatter(a.Send, recv, a.Blk, a.Root)
			return nil
		}
		b.linearScatterv(a.Send, nil, nil, a.Sz, recv, a.Blk, a.Root)
	case "scatterv":
		var recv []byte
		if !a.InPlace {
			recv = a.Recv
			if rank == a.Root {
				if blk := blockOf(a.Send, a.Counts, a.Displs, a.Sz, rank, 0); len(blk) > len(recv) {
					return truncf("scatterv: %d elements into a buffer of %d", len(blk)/a.Sz, len(recv)/a.Sz)
				}
				recv = recv[:len(blockOf(a.Send, a.Counts, a.Displs, a.Sz, rank, 0))]
			}
		}
		if n == 1 {
			if recv != nil {
				s.Copy(recv, blockOf(a.Send, a.Counts, a.Displs, a.Sz, 0, 0))
			}
			return nil
		}
		b.linearScatterv(a.Send, a.Counts, a.Displs, a.Sz, recv, 0, a.Root)
	case "allgather":
		all := a.Recv[:n*a.Blk]
		if n > 1 && !a.InPlace && sp.algo == "ring" && collectives.Disjoint(all, a.Send) {
			// The first round sends the own block from the send buffer, and its copy into the result is the last
			// round's: the starting call posts at once (collectives.ringAllgatherFrom says why the block is not
			// sent from the result).
			b.ringAllgatherv(all, nil, nil, 1, a.Blk, a.Send[:a.Blk])
			return nil
		}
		if !a.InPlace {
			s.Copy(a.Recv[rank*a.Blk:(rank+1)*a.Blk], a.Send)
		}
		if n == 1 {
			return nil
		}
		switch sp.algo {
		case "recursive_doubling":
			b.recursiveDoublingAllgather(all, a.Blk)
		case "bruck":
			b.bruckAllgather(all, a.Blk)
		default:
			b.ringAllgatherv(all, nil, nil, 1, a.Blk, nil)
		}
	case "allgatherv":
		if !a.InPlace {
			s.Copy(blockOf(a.Recv, a.Counts, a.Displs, a.Sz, rank, 0), a.Send)
		}
		if n > 1 {
			b.ringAllgatherv(a.Recv, a.Counts, a.Displs, a.Sz, 0, nil)
		}
	case "alltoall":
		src := a.Send
		if a.InPlace {
			src = s.scratch(len(a.Recv)) // the blocks to send, copied when the operation starts
			s.Copy(src, a.Recv)
		}
		if n == 1 {
			s.Copy(a.Recv, src)
			return nil
		}
		switch sp.algo {
		case "bruck":
			b.bruckAlltoall(src, a.Recv, a.Blk)
		case "linear":
			b.linearAlltoallv(src, nil, nil, a.Recv, nil, nil, 1, a.Blk)
		default:
			b.pairwiseAlltoallv(src, nil, nil, a.Recv, nil, nil, 1, a.Blk)
		}
	case "alltoallv":
		sb := blockOf(a.Send, a.Counts, a.Displs, a.Sz, rank, 0)
		if rb := blockOf(a.Recv, a.RCounts, a.RDispls, a.Sz, rank, 0); len(sb) > len(rb) {
			return truncf("alltoallv: %d elements to self into a block of %d", len(sb)/a.Sz, len(rb)/a.Sz)
		}
		if sp.algo == "linear" {
			b.linearAlltoallv(a.Send, a.Counts, a.Displs, a.Recv, a.RCounts, a.RDispls, a.Sz, 0)
			return nil
		}
		b.pairwiseAlltoallvChecked(a.Send, a.Counts, a.Displs, a.Recv, a.RCounts, a.RDispls, a.Sz)
	case "reduce_scatter":
		return buildReduceScatter(s, sp)
	case "scan", "exscan":
		exclusive := a.Coll == "exscan"
		src := a.Send
		if exclusive && a.InPlace {
			src = s.scratch(len(a.Send)) // rank 0's recv stays untouched, the others' is overwritten
			s.Copy(src, a.Send)
		}
		dst := a.Recv[:len(src)]
		if n == 1 {
			if !exclusive {
				s.Copy(dst, src)
			}
			return nil
		}
		b.chainScan(a.Kernel, src, dst, exclusive)
	default:
		return fmt.Errorf("%w: nbc: no collective %q", ranks.ErrArg, a.Coll)
	}
	return nil
}

// pairwiseAlltoallvChecked is pairwiseAlltoallv with this rank's block to itself cut to what it sends (checked).
func (b p2pb) pairwiseAlltoallvChecked(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int, sz int) {
	n := b.n
	for i := 1; i < n; i++ {
		dst, src := (b.rank+i)%n, (b.rank-i+n)%n
		b.s.Round()
		b.sendDet(blockOf(send, scounts, sdispls, sz, dst, 0), dst, tagAlltoall)
		b.recv(blockOf(recv, rcounts, rdispls, sz, src, 0), src, tagAlltoall)
	}
	sb := blockOf(send, scounts, sdispls, sz, b.rank, 0)
	b.s.Round()
	b.s.Copy(blockOf(recv, rcounts, rdispls, sz, b.rank, 0)[:len(sb)], sb)
}

func buildReduceScatter(s *Schedule, sp *spec) error {
	a, n, rank := sp.a, sp.n, sp.rank
	b := sp.p2p(s)
	sz := a.Sz
	if n == 1 {
		if !a.InPlace {
			s.Copy(a.Recv, a.Send)
		}
		return nil
	}
	offs := make([]int, n+1)
	for i, x := range a.Counts {
		offs[i+1] = offs[i] + x*sz
	}
	if sp.algo == "ring" {
		acc := s.scratch(len(a.Send)) // the partial pieces: the contribution is read from the send buffer
		piece := func(i int) []byte { return acc[offs[i]:offs[i+1]] }
		own := func(i int) []byte { return a.Send[offs[i]:offs[i+1]] }
		b.ringReduceScatter(a.Kernel, acc, piece, own, 0, tagReduce)
		s.Round()
		s.Copy(a.Recv, piece(rank))
		return nil
	}
	// reduce to rank 0, which scatters the blocks
	acc := s.scratch(len(a.Send))
	s.Copy(acc, a.Send)
	b.binomialReduce(a.Kernel, a.Commutative, acc, 0, tagReduce)
	var full []byte
	if rank == 0 {
		full = acc
	}
	b.linearScatterv(full, a.Counts, nil, sz, a.Recv[:a.Counts[rank]*sz], 0, 0)
	return nil
}

func truncf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ranks.ErrTruncate}, args...)...)
}

// --- objects ---

// buildObjects: collectives of values that are not primitive slices, msgpack-encoded one message per value, by the
// patterns of the blocking ones (a binomial bcast, linear gather and scatter, gather then bcast for allgather).
// Argument errors of the receiving side are found here, at the start, as a blocking call finds them while it runs.
func buildObjects(s *Schedule, sp *spec) error {
	a, n, rank := sp.a, sp.n, sp.rank
	b := sp.p2p(s)
	switch a.Coll {
	case "bcast":
		b.binomialBcastObj(a.ObjRecv, a.Root)
	case "gather":
		return b.gatherObj(a.ObjSend, a.ObjRecv, a.Root)
	case "allgather":
		if err := b.gatherObj(a.ObjSend, a.ObjRecv, 0); err != nil {
			return err
		}
		if rank != 0 {
			if _, err := collectives.SliceTarget("allgather", a.ObjRecv, n); err != nil {
				return err
			}
		}
		b.binomialBcastObj(a.ObjRecv, 0)
		if rank != 0 {
			b.s.Do(keepArray(a.ObjRecv)) // in the round after the receive
		}
	case "scatter":
		if err := collectives.ObjectPointer("scatter", a.ObjRecv); err != nil {
			return err
		}
		s.Round()
		if rank != a.Root {
			b.recvObj(a.ObjRecv, a.Root, tagScatter)
			return nil
		}
		sv, err := collectives.ScatterSource(a.ObjSend, a.ObjRecv, n)
		if err != nil {
			return err
		}
		rv := reflect.ValueOf(a.ObjRecv)
		s.Do(func() error { rv.Elem().Set(sv.Index(a.Root)); return nil })
		for i := 0; i < n; i++ {
			if i != a.Root {
				b.sendObj(sv.Index(i).Interface(), i, tagScatter)
			}
		}
	default:
		return fmt.Errorf("%w: nbc: %s of objects", ranks.ErrBuffer, a.Coll)
	}
	return nil
}

// keepArray returns a step that leaves the slice that p points to (a pointer to a slice, sized by
// collectives.SliceTarget) in the array it has now, holding what was decoded into *p meanwhile: a receive decodes
// into a fresh slice, and Iallgather's caller holds the array, not p (heapObjects).
func keepArray(p any) func() error {
	pv := reflect.ValueOf(p).Elem()
	orig := reflect.ValueOf(pv.Interface()) // the slice as it is now: a copy, not a view of *p
	return func() error {
		if pv.Pointer() != orig.Pointer() || pv.Len() != orig.Len() {
			reflect.Copy(orig, pv)
			pv.Set(orig)
		}
		return nil
	}
}

func (b p2pb) binomialBcastObj(buf any, root int) {
	n := b.n
	vr := (b.rank - root + n) % n
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			b.s.Round()
			b.recvObj(buf, (b.rank-mask+n)%n, tagBcast)
			break
		}
	}
	b.s.Round()
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			b.sendObj(buf, (b.rank+mask)%n, tagBcast) // encoded when posted: after buf was received
		}
	}
}

func (b p2pb) gatherObj(send, recv any, root int) error {
	b.s.Round()
	if b.rank != root {
		b.sendObj(send, root, tagGather)
		return nil
	}
	sl, err := collectives.SliceTarget("gather", recv, b.n)
	if err != nil {
		return err
	}
	if err := collectives.SetElem("gather", sl, root, send); err != nil {
		return err
	}
	for i := 0; i < b.n; i++ {
		if i != root {
			b.recvObj(sl.Index(i).Addr().Interface(), i, tagGather)
		}
	}
	return nil
}
