package collectives

import (
	"gompj/ranks"
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
}

// hierOK: the communicator spans several nodes and some node hosts several of its members.
func (st *commState) hierOK() bool { return !st.local && st.nodes > 1 && st.nodes < st.size }

func (st *commState) hierarchy(c *ranks.Comm) (*hierComms, error) {
	if st.hier != nil {
		return st.hier, nil
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
	if leaders != nil {
		if hook, ok := layoutHook(c); ok {
			setLayout(leaders, hook) // a faked layout (tests) holds for the leaders too
		}
	}
	h.node, h.leaders = node, leaders
	st.hier = h
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
			return err
		}
	}
	if h.leaders != nil {
		if err := bcastVec(h.leaders, buf, rootNode); err != nil {
			return err
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
	if a, err := ns.choose("bcast", ns.sel(true, len(buf.b))); err != nil || a != "shm" || ns.size == 1 {
		return false, nil
	}
	if a, err := ls.choose("bcast", ls.sel(true, len(buf.b))); err != nil || a != "binomial" {
		return false, nil
	}
	o := ns.shmOp(h.node)
	if haveData {
		o.BcastPublish(buf.b)
	}
	reqs, err := newP2P(h.leaders, ls).binomialBcastStart(buf.b, rootNode)
	if err != nil {
		return true, err
	}
	if !haveData {
		o.BcastPublish(buf.b)
	}
	return true, firstErr(waitAll(reqs), o.waitAcks())
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
	rootNode := h.nodeIdx[root]
	leader := h.nodeRank[st.rank] == 0
	var tmp vec
	if leader {
		tmp = src
		tmp.b = st.scratch(len(src.b)) // c's own scratch: the node phase uses the node communicator's
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
			return c.Coll().Send(out.b[:len(src.b)], root, tagHier)
		}
		return nil
	}
	if st.rank == root && !rootIsLeader {
		_, err := c.Coll().Recv(dst.b[:len(src.b)], leaderRankOf(h, st, root), tagHier)
		return err
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
	var nb []byte
	leader := h.leaders != nil
	if leader {
		nb = make([]byte, nodeSize*blk)
	}
	nbv := vec{k: kind(ranks.TypeByte), b: nb, n: len(nb), sz: 1}
	if err := gatherVec(h.node, own, nbv, blk, 0); err != nil {
		return err
	}
	if leader {
		nodes := h.leaders.Size()
		counts := make([]int, nodes)
		for i := 0; i < n; i++ {
			counts[h.nodeIdx[i]] += blk
		}
		displs := make([]int, nodes)
		for i := 1; i < nodes; i++ {
			displs[i] = displs[i-1] + counts[i-1]
		}
		all := make([]byte, n*blk)
		copy(all[displs[h.nodeIdx[st.rank]]:], nb)
		if err := allgathervBytes(h.leaders, all, counts, displs); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			off := displs[h.nodeIdx[r]] + h.nodeRank[r]*blk
			copy(recv[r*blk:(r+1)*blk], all[off:off+blk])
		}
	}
	return bcastVec(h.node, vec{k: kind(ranks.TypeByte), b: recv[:n*blk], n: n * blk, sz: 1}, 0)
}

// gatherVec gathers equal blocks of bytes at root (recv significant there only).
func gatherVec(c *ranks.Comm, send []byte, recv vec, blk, root int) error {
	st := stateOf(c)
	if st.size == 1 {
		copy(recv.b, send)
		return nil
	}
	algo, err := st.choose("gather", st.sel(true, blk))
	if err != nil {
		return err
	}
	p := newP2P(c, st)
	switch algo {
	case "shm":
		return st.shmOp(c).Gatherv(send, false, recv.b, nil, nil, 1, blk, root)
	case "binomial":
		return p.binomialGather(send, recv.b, blk, root)
	}
	return p.linearGatherv(send, recv.b, nil, nil, 1, blk, root)
}

// allgathervBytes: this rank's block already in place in all.
func allgathervBytes(c *ranks.Comm, all []byte, counts, displs []int) error {
	st := stateOf(c)
	if st.size == 1 {
		return nil
	}
	algo, err := st.choose("allgatherv", st.sel(true, 0))
	if err != nil {
		return err
	}
	if algo == "shm" {
		return st.shmOp(c).Allgatherv(nil, true, all, counts, displs, 1, 0)
	}
	return newP2P(c, st).ringAllgatherv(all, counts, displs, 1, 0)
}
