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
		tmp.b = make([]byte, len(src.b))
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
