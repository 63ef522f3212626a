package collectives

import (
	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/ranks"
)

// Node-aware collectives: a shared-memory phase inside each node, an inter-node phase among one leader per node
// (the lowest rank of each node) over point-to-point, and shared memory again. They work with any rank-to-node
// layout; they need an op to be commutative (members of a node need not be contiguous in rank order).

// hierComms are a communicator's node-aware sub-communicators, made (collectively) on first use.
type hierComms struct {
	node     *ranks.Comm // the members on this node, in the communicator's order
	leaders  *ranks.Comm // one member per node (its lowest rank); nil on non-leaders
	nodeIdx  []int       // comm rank -> index of its node's leader in leaders
	nodeRank []int       // comm rank -> its rank in its node communicator
	members  [][]int     // node index -> its members' comm ranks, in order
	start    []int       // node index -> how many members the nodes before it have
	blocked  bool        // nodes hold consecutive ranks in node order: node-major order is rank order
}

// hierOK: the communicator spans several nodes and some node hosts several of its members.
func (st *commState) hierOK() bool { return !st.local && st.nodes > 1 && st.nodes < st.size }

func (st *commState) hierarchy(c *ranks.Comm) (*hierComms, error) {
	if h := st.hier.h; h != nil {
		return h, nil
	}
	h := &hierComms{nodeIdx: make([]int, st.size), nodeRank: make([]int, st.size)}
	leaderOf := map[int]int{} // node -> index in leaders
	count := map[int]int{}
	for i := 0; i < st.size; i++ {
		nd := st.nodeOf[i]
		if _, ok := leaderOf[nd]; !ok {
			leaderOf[nd] = len(leaderOf)
		}
		h.nodeIdx[i] = leaderOf[nd]
		h.nodeRank[i] = count[nd]
		count[nd]++
	}
	h.members = make([][]int, len(leaderOf))
	for i := 0; i < st.size; i++ {
		h.members[h.nodeIdx[i]] = append(h.members[h.nodeIdx[i]], i)
	}
	h.start = make([]int, len(leaderOf)+1)
	for b, m := range h.members {
		h.start[b+1] = h.start[b] + len(m)
	}
	h.blocked = true
	for i := 0; i < st.size; i++ {
		if h.start[h.nodeIdx[i]]+h.nodeRank[i] != i {
			h.blocked = false
		}
	}
	node, err := c.Split(st.node, st.rank)
	if err != nil {
		return nil, err
	}
	color := ranks.Undefined
	if h.nodeRank[st.rank] == 0 {
		color = 0
	}
	leaders, err := c.Split(color, st.rank)
	if err != nil {
		return nil, err
	}
	if leaders != nil && st.layout != nil {
		setLayout(leaders, st.layout) // a faked layout (tests) holds for the leaders too
	}
	h.node, h.leaders = node, leaders
	st.hier.h = h
	return h, nil
}

func hierBarrier(c *ranks.Comm, st *commState) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	if err := barrier(h.node); err != nil {
		return err
	}
	if h.leaders != nil {
		if err := barrier(h.leaders); err != nil {
			return err
		}
	}
	return barrier(h.node)
}

func hierBcast(c *ranks.Comm, st *commState, buf vec, root int) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	rootNode := h.nodeIdx[root]
	mine := h.nodeIdx[st.rank]
	if h.leaders != nil && (mine != rootNode || h.nodeRank[root] == 0) {
		if ok, err := leaderBcastOverlap(h, buf, rootNode, mine == rootNode); ok {
			return err
		}
	}
	if mine == rootNode {
		if err := bcastVec(h.node, buf, h.nodeRank[root]); err != nil {
			if h.leaders != nil { // a leader that failed to get the data: the other leaders wait for it
				return Broken(c, err)
			}
			return err
		}
	}
	if h.leaders != nil {
		if err := bcastVec(h.leaders, buf, rootNode); err != nil {
			return h.leaderFailed(c, err)
		}
	}
	if mine != rootNode {
		return bcastVec(h.node, buf, 0)
	}
	return nil
}

// leaderBcastOverlap is a leader's part of a node-aware bcast when the node phase runs in shared memory and the
// leaders' phase is a binomial tree: the leader publishes its buffer to its node as soon as it has the data and
// lets the local ranks copy while it forwards the message to its children leaders. It reports false (having done
// nothing) when the algorithms are not those.
func leaderBcastOverlap(h *hierComms, buf vec, rootNode int, haveData bool) (bool, error) {
	ns, ls := stateOf(h.node), stateOf(h.leaders)
	if a, err := ns.chooseID(collBcast, "bcast", ns.sel(true, len(buf.b))); err != nil || a != "shm" || ns.size == 1 {
		return false, nil
	}
	if a, err := ls.chooseID(collBcast, "bcast", ls.sel(true, len(buf.b))); err != nil || a != "binomial" {
		return false, nil
	}
	o := ns.shmOp(h.node)
	if haveData {
		o.BcastPublish(buf.b)
	}
	reqs, err := newP2P(h.leaders, ls).binomialBcastStart(buf.b, rootNode)
	if err != nil {
		return true, h.leaderFailed(h.node, err)
	}
	if !haveData {
		o.BcastPublish(buf.b)
	}
	return true, firstErr(ls.waitReqs(reqs), o.waitAcks())
}

// leaderDone is the outcome err of a node-aware operation on a rank of st: a leader that failed in it has left the
// other leaders or its node's members waiting in a phase it did not get to (its node's reduce failed, say, on a
// size that differs between its members), so the job ends (Broken). Bcast and scatter, whose leaders' failures
// may leave nobody waiting, look for themselves (leaderFailed).
func leaderDone(st *commState, err error) error {
	if h := st.hier.h; err != nil && h != nil && h.leaders != nil {
		return Broken(h.leaders, err)
	}
	return err
}

// leaderFailed is a leader's failure in the leaders' phase of an operation whose node phase follows: the other
// members of its node wait in that phase for it, so the job ends (Broken) unless the node has no other member.
func (h *hierComms) leaderFailed(c *ranks.Comm, err error) error {
	if h.node.Size() > 1 {
		return Broken(c, err)
	}
	return err
}

// hierAllreduce: reduce to each node's leader, allreduce among leaders, bcast inside each node.
func hierAllreduce(c *ranks.Comm, st *commState, k kernel, op Op, src, dst vec) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	if err := reduceVec(h.node, k, op, src, dst, 0); err != nil {
		return err
	}
	if h.leaders != nil {
		if err := allreduceVec(h.leaders, k, op, dst, dst); err != nil {
			return err
		}
	}
	return bcastVec(h.node, vec{k: dst.k, b: dst.b[:len(src.b)], n: src.n, sz: dst.sz}, 0)
}

// hierReduce: reduce to each node's leader, reduce among leaders to the root's leader, which hands the result
// to the root if it is not the root itself.
func hierReduce(c *ranks.Comm, st *commState, k kernel, op Op, src, dst vec, root int) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	rootNode := h.nodeIdx[root]
	leader := h.nodeRank[st.rank] == 0
	var tmp vec
	if leader {
		tmp = src
		tmp.b = st.scratch(scrHier, len(src.b)) // c's own scratch: the node phase uses the node communicator's
	}
	if err := reduceVec(h.node, k, op, src, tmp, 0); err != nil {
		return err
	}
	rootIsLeader := h.nodeRank[root] == 0
	if h.leaders != nil {
		out := tmp
		if st.rank == root {
			out = dst
		}
		if err := reduceVec(h.leaders, k, op, tmp, out, rootNode); err != nil {
			return err
		}
		if h.nodeIdx[st.rank] == rootNode && !rootIsLeader {
			return p.send(out.b[:len(src.b)], root, tagHier)
		}
		return nil
	}
	if st.rank == root && !rootIsLeader {
		return p.recvLast(dst.b[:len(src.b)], leaderRankOf(h, st, root), tagHier)
	}
	return nil
}

// leaderRankOf returns the comm rank of the leader of rank r's node.
func leaderRankOf(h *hierComms, st *commState, r int) int {
	for i := 0; i < st.size; i++ {
		if h.nodeIdx[i] == h.nodeIdx[r] && h.nodeRank[i] == 0 {
			return i
		}
	}
	return r
}

// hierAllgather (equal blocks of blk bytes, this rank's already in place in recv): gather each node's blocks at
// its leader, allgather the node blocks among leaders, put them in rank order, bcast inside each node.
func hierAllgather(c *ranks.Comm, st *commState, recv []byte, blk int) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	n := st.size
	nodeSize := h.node.Size()
	own := recv[st.rank*blk : (st.rank+1)*blk]
	var nb, all []byte
	leader := h.leaders != nil
	if leader {
		scr := st.scratch(scrHier, (nodeSize+n)*blk)
		nb, all = scr[:nodeSize*blk], scr[nodeSize*blk:]
	}
	nbv := vec{k: kind(ranks.TypeByte), b: nb, n: len(nb), sz: 1}
	if err := gatherVec(h.node, own, nbv, blk, 0); err != nil {
		return err
	}
	if leader {
		nodes := h.leaders.Size()
		cd := st.scratchInts(intsAlgo, 2*nodes)
		counts, displs := cd[:nodes], cd[nodes:]
		for i := 0; i < n; i++ {
			counts[h.nodeIdx[i]] += blk
		}
		for i := 1; i < nodes; i++ {
			displs[i] = displs[i-1] + counts[i-1]
		}
		mem.Copy(all[displs[h.nodeIdx[st.rank]]:], nb)
		if err := allgathervBytes(h.leaders, all, counts, displs); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			off := displs[h.nodeIdx[r]] + h.nodeRank[r]*blk
			mem.Copy(recv[r*blk:(r+1)*blk], all[off:off+blk])
		}
	}
	return bcastVec(h.node, vec{k: kind(ranks.TypeByte), b: recv[:n*blk], n: n * blk, sz: 1}, 0)
}

// gatherVec gathers equal blocks of bytes at root (recv significant there only).
func gatherVec(c *ranks.Comm, send []byte, recv vec, blk, root int) error {
	return gatherBlocks(c, stateOf(c), send, false, recv.b, blk, 1, root, false)
}

// allgathervBytes: this rank's block already in place in all.
func allgathervBytes(c *ranks.Comm, all []byte, counts, displs []int) error {
	st := stateOf(c)
	if st.size == 1 {
		return nil
	}
	algo, err := st.chooseID(collAllgatherv, "allgatherv", st.sel(true, 0))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Allgatherv(nil, true, all, counts, displs, 1, 0)
	}
	return newP2P(c, st).ringAllgatherv(all, counts, displs, 1, 0)
}

// permute moves blocks between rank order (rank r at r*blk) and node-major order; toRank says which way.
func (h *hierComms) permute(dst, src []byte, blk int, toRank bool) {
	for b, ms := range h.members {
		for q, r := range ms {
			nm := (h.start[b] + q) * blk
			if toRank {
				mem.Copy(dst[r*blk:(r+1)*blk], src[nm:nm+blk])
			} else {
				mem.Copy(dst[nm:nm+blk], src[r*blk:(r+1)*blk])
			}
		}
	}
}

// hierGather (equal blocks of blk bytes; own is this rank's, which at an in-place root aliases its block of recv):
// gather each node's blocks at its leader in shared memory, gather the node blocks among leaders at the root's
// leader, which hands the whole to the root if it is not the root itself. When nodes hold consecutive ranks and the
// root leads its node, everything lands in the root's recv directly.
func hierGather(c *ranks.Comm, st *commState, own, recv []byte, blk, root int) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	var lp p2p // the leaders' operation
	if h.leaders != nil {
		lp = newP2P(h.leaders, stateOf(h.leaders))
	}
	n := st.size
	rootNode, mine := h.nodeIdx[root], h.nodeIdx[st.rank]
	rootLeads := h.nodeRank[root] == 0
	direct := h.blocked && rootLeads // the root's recv is the node-major buffer
	var all, nb, spare []byte
	if h.leaders != nil {
		switch {
		case mine == rootNode && direct:
			all = recv[:n*blk]
		case mine == rootNode:
			scr := st.scratch(scrHier, 2*n*blk)
			all, spare = scr[:n*blk], scr[n*blk:] // spare: the blocks in rank order, for a root that does not lead
		default:
			all = st.scratch(scrHier, len(h.members[mine])*blk)
		}
		nb = all
		if mine == rootNode {
			nb = all[h.start[mine]*blk : h.start[mine+1]*blk]
		}
	}
	// the root's leader posts its receives from the other leaders before the node phase: their blocks land
	// straight in place whenever they come
	reqs := st.reqList()
	if h.leaders != nil && mine == rootNode {
		for b := range h.members {
			if b == mine {
				continue
			}
			if reqs, err = postChunks(lp, false, reqs, all[h.start[b]*blk:h.start[b+1]*blk], b, tagGather); err != nil {
				return err
			}
		}
	}
	if err := gatherVec(h.node, own, vec{k: kind(ranks.TypeByte), b: nb, n: len(nb), sz: 1}, blk, 0); err != nil {
		return err
	}
	if h.leaders != nil {
		if mine != rootNode {
			reqs, err := postChunks(lp, true, reqs, nb, rootNode, tagGather)
			return firstErr(err, st.waitReqs(reqs))
		}
		if err := st.waitReqs(reqs); err != nil {
			return err
		}
		if direct {
			return nil
		}
		out := spare
		if st.rank == root {
			out = recv[:n*blk]
		}
		h.permute(out, all, blk, true)
		if st.rank != root {
			return p.send(out, root, tagHier)
		}
		return nil
	}
	if st.rank == root && !rootLeads {
		return p.recvLast(recv[:n*blk], leaderRankOf(h, st, root), tagHier)
	}
	return nil
}

// hierScatter is hierGather backwards: the root hands its send to its node's leader (unless it leads), which
// scatters node blocks among the leaders; each leader scatters its node's blocks in shared memory. recv nil: in
// place at the root.
func hierScatter(c *ranks.Comm, st *commState, send, recv []byte, blk, root int) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	var lp p2p // the leaders' operation
	if h.leaders != nil {
		lp = newP2P(h.leaders, stateOf(h.leaders))
	}
	n := st.size
	rootNode, mine := h.nodeIdx[root], h.nodeIdx[st.rank]
	rootLeads := h.nodeRank[root] == 0
	if st.rank == root && !rootLeads {
		if len(send) < n*blk {
			return errArg("scatter: a send buffer of %d bytes for %d blocks of %d", len(send), n, blk)
		}
		if err := p.send(send[:n*blk], leaderRankOf(h, st, root), tagHier); err != nil {
			return err
		}
	}
	var nb []byte
	if h.leaders != nil {
		var all []byte
		if mine == rootNode {
			switch {
			case st.rank == root && h.blocked:
				all = send[:n*blk]
			case st.rank == root:
				all = st.scratch(scrHier, n*blk)
				h.permute(all, send, blk, false)
			default:
				tmp := st.scratch(scrHier, 2*n*blk)
				in := tmp[:n*blk]
				if err := p.recv(in, root, tagHier); err != nil {
					return err
				}
				all = in
				if !h.blocked {
					all = tmp[n*blk:]
					h.permute(all, in, blk, false)
				}
			}
			nb = all[h.start[mine]*blk : h.start[mine+1]*blk]
		} else {
			nb = st.scratch(scrHier, len(h.members[mine])*blk)
		}
		if mine != rootNode {
			reqs, err := postChunks(lp, false, st.reqList(), nb, rootNode, tagScatter)
			if err = firstErr(err, st.waitReqs(reqs)); err != nil {
				return h.leaderFailed(c, err)
			}
		} else {
			// the other nodes' blocks leave first; the node phase runs while they travel
			reqs := st.reqList()
			for i := 1; i < len(h.members); i++ {
				b := (mine + i) % len(h.members)
				if reqs, err = postChunks(lp, true, reqs, all[h.start[b]*blk:h.start[b+1]*blk], b, tagScatter); err != nil {
					return err
				}
			}
			return firstErr(scatterBytes(h.node, nb, recv, blk, 0), st.waitReqs(reqs))
		}
	}
	if recv == nil && h.nodeRank[st.rank] != 0 {
		recv = st.scratch(scrHier, blk) // an in-place root that does not lead: its block is where it was
	}
	return scatterBytes(h.node, nb, recv, blk, 0)
}

// scatterBytes scatters equal blocks of bytes from root (send significant there only; recv nil at the root: in
// place).
func scatterBytes(c *ranks.Comm, send, recv []byte, blk, root int) error {
	st := stateOf(c)
	if st.size == 1 {
		if recv != nil {
			mem.Copy(recv, send[:blk])
		}
		return nil
	}
	algo, err := st.chooseID(collScatter, "scatter", st.sel(true, blk))
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	switch algo {
	case "shm":
		return st.shmOp(c).Scatterv(send, nil, nil, 1, blk, recv, recv == nil, root)
	case "binomial":
		return p.binomialScatter(send, recv, blk, root)
	}
	return p.linearScatterv(send, nil, nil, 1, recv, blk, root)
}

// hierAlltoall: blocks between members of a node are copied straight from the sender's send buffer by the
// receiver (shared memory); the leader of each node packs, straight from its members' send buffers, what they
// send to each other node, exchanges one message with every other leader, and exposes what it received, from
// which every member copies its blocks. One network message per pair of nodes instead of one per pair of ranks.
func hierAlltoall(c *ranks.Comm, st *commState, send, recv []byte, blk int) error {
	h, err := st.hierarchy(c)
	if err != nil {
		return err
	}
	n := st.size
	ns := stateOf(h.node)
	o := ns.shmOp(h.node)
	mine := h.nodeIdx[st.rank]
	local := h.members[mine]
	k, q := len(local), h.nodeRank[st.rank]
	gSend, gRecv := o.next(), o.next()
	for j := 0; j < k; j++ {
		o.expectAcks(j, k-1) // every other member reads its block
		if j > 0 {
			o.expectAcks(j, 1) // the leader packs the blocks for other nodes
		}
	}
	o.expectAcks(0, k-1) // members read the leader's receive buffer
	sl := &o.s.slots[q]
	sl.src, sl.blk = send[:n*blk], blk
	o.publish(gSend)

	reqs := st.reqList()
	var rbuf []byte
	var rdispl []int
	var err2 error
	if h.leaders != nil {
		m := len(h.members)
		// rdispl is published to the node's members, who read it until they acknowledge
		displs := st.scratchInts(intsAlgo, 2*(m+1))
		sdispl, sdone := displs[:m+1], 0
		rdispl = displs[m+1:]
		for b := 0; b < m; b++ { // node b's share of either buffer, this node's left out
			sdispl[b], rdispl[b+1] = sdone, rdispl[b]
			if b != mine {
				sdone += k * len(h.members[b]) * blk
				rdispl[b+1] += k * len(h.members[b]) * blk
			}
		}
		total := (n - k) * k * blk
		tmp := st.scratch(scrHier, 2*total)
		sbuf := tmp[:total]
		rbuf = tmp[total:]
		// pack, for each other node b, member by member, the blocks for b's members (in runs of consecutive ranks)
		for j := 0; j < k; j++ {
			if err := o.waitPublished(j, gSend); err != nil {
				return err
			}
			src := o.s.slots[j].src
			if len(src) < n*blk || o.s.slots[j].blk != blk {
				err2 = errArg("alltoall: node member %d sends %d bytes, not %d blocks of %d", j, len(src), n, blk)
			} else {
				for b, ms := range h.members {
					if b == mine {
						continue
					}
					off := sdispl[b] + j*len(ms)*blk
					for i := 0; i < len(ms); {
						e := i + 1
						for e < len(ms) && ms[e] == ms[e-1]+1 {
							e++
						}
						off += mem.Copy(sbuf[off:], src[ms[i]*blk:(ms[e-1]+1)*blk])
						i = e
					}
				}
			}
			if j > 0 {
				o.ack(j)
			}
		}
		lp := newP2P(h.leaders, stateOf(h.leaders))
		for b := 0; b < m; b++ {
			if b == mine {
				continue
			}
			if reqs, err = postChunks(lp, false, reqs, rbuf[rdispl[b]:rdispl[b+1]], b, tagAlltoall); err != nil {
				return err
			}
		}
		for i := 1; i < m; i++ { // start with the next node: spreads the senders over the receivers
			b := (mine + i) % m
			if reqs, err = postChunks(lp, true, reqs, sbuf[sdispl[b]:sdispl[b]+k*len(h.members[b])*blk], b, tagAlltoall); err != nil {
				return err
			}
		}
	}
	// blocks from this node's members (the network is busy meanwhile)
	for i := 0; i < k; i++ {
		j := (q + i) % k
		if err := o.waitPublished(j, gSend); err != nil {
			return err
		}
		p := &o.s.slots[j]
		if len(p.src) < n*blk || p.blk != blk {
			err2 = errArg("alltoall: node member %d sends %d bytes, not %d blocks of %d", j, len(p.src), n, blk)
		} else {
			mem.Copy(recv[local[j]*blk:(local[j]+1)*blk], p.src[st.rank*blk:(st.rank+1)*blk])
		}
		if j != q {
			o.ack(j)
		}
	}
	if h.leaders != nil {
		if err := st.waitReqs(reqs); err != nil {
			return err
		}
		o.s.slots[0].dst = rbuf
		o.s.slots[0].displs = rdispl
		o.publish(gRecv)
	} else if err := o.waitPublished(0, gRecv); err != nil {
		return err
	}
	// blocks from other nodes: from node b's member a, at rdispl[b] + (a*k + q)*blk of the leader's buffer
	lead := &o.s.slots[0]
	for b, ms := range h.members {
		if b == mine {
			continue
		}
		for a, r := range ms {
			off := lead.displs[b] + (a*k+q)*blk
			mem.Copy(recv[r*blk:(r+1)*blk], lead.dst[off:off+blk])
		}
	}
	if q != 0 {
		o.ack(0)
	}
	return firstErr(o.waitAcks(), err2)
}

// leaderChunk is the size of the pieces in which leaders send each other large node blocks: below the network's
// default eager limit, so that a piece travels at once instead of waiting for the receiver's clear-to-send, and
// the pieces of one block follow each other (matching keeps their order).
const leaderChunk = 64 << 10

// postChunks starts (Isend if send, else Irecv) the transfer of buf with peer in pieces of leaderChunk bytes, as
// part of operation p (base tag base), appending the requests to reqs, a list of p's communicator state
// (reqList). The caller waits for them with that state's waitReqs. (Direct calls, not a method value: a buffer
// passed through a function value escapes, and boxing it would allocate.)
func postChunks(p p2p, send bool, reqs []*ranks.Request, buf []byte, peer, base int) ([]*ranks.Request, error) {
	tag := p.tag(base)
	for off := 0; ; off += leaderChunk {
		b := buf[off:min(off+leaderChunk, len(buf))]
		if !send {
			var err error
			if reqs, err = p.st.irecv(p.c, reqs, b, peer, tag); err != nil {
				return reqs, err
			}
		} else if r, err := p.c.Isend(b, peer, tag); err != nil {
			return reqs, err
		} else {
			reqs = append(reqs, r)
		}
		if off+leaderChunk >= len(buf) {
			return reqs, nil
		}
	}
}
