package node

import "fmt"

// Layout places the ranks of a job on its nodes: contiguous blocks in node order. By default each node gets
// np/nodes ranks and the first np%nodes nodes one more (MPJ Express hybdev's rule); with a fixed ranks-per-node K
// node i hosts [i*K, min((i+1)*K, np)).
type Layout struct {
	Ranks, Nodes int
	perNode      int // K when fixed, else 0
	q, r         int // block layout: np/nodes, np%nodes
}

// NewLayout returns the layout of ranks over nodes; ranksPerNode 0 means blocks as even as possible. Every node
// must host at least one rank.
func NewLayout(ranks, nodes, ranksPerNode int) (Layout, error) {
	switch {
	case ranks <= 0:
		return Layout{}, fmt.Errorf("gompj: %d ranks", ranks)
	case nodes <= 0:
		return Layout{}, fmt.Errorf("gompj: %d nodes", nodes)
	case nodes > ranks:
		return Layout{}, fmt.Errorf("gompj: %d nodes for %d ranks: every node needs at least one rank", nodes, ranks)
	case ranksPerNode < 0:
		return Layout{}, fmt.Errorf("gompj: %d ranks per node", ranksPerNode)
	}
	l := Layout{Ranks: ranks, Nodes: nodes, perNode: ranksPerNode, q: ranks / nodes, r: ranks % nodes}
	if ranksPerNode > 0 {
		if nodes*ranksPerNode < ranks {
			return Layout{}, fmt.Errorf("gompj: %d nodes × %d ranks per node cannot host %d ranks", nodes, ranksPerNode, ranks)
		}
		if (nodes-1)*ranksPerNode >= ranks {
			return Layout{}, fmt.Errorf("gompj: %d ranks at %d per node fill only %d of %d nodes", ranks, ranksPerNode,
				(ranks+ranksPerNode-1)/ranksPerNode, nodes)
		}
	}
	return l, nil
}

// NodesFor is how many nodes a job of ranks needs at ranksPerNode per node.
func NodesFor(ranks, ranksPerNode int) int {
	if ranksPerNode <= 0 {
		return 1
	}
	return (ranks + ranksPerNode - 1) / ranksPerNode
}

// Range returns the world ranks [lo, hi) hosted by node.
func (l Layout) Range(node int) (lo, hi int) {
	if l.perNode > 0 {
		return node * l.perNode, min((node+1)*l.perNode, l.Ranks)
	}
	lo = node*l.q + min(node, l.r)
	hi = lo + l.q
	if node < l.r {
		hi++
	}
	return lo, hi
}

// NodeOf returns the node hosting world rank.
func (l Layout) NodeOf(rank int) int {
	if l.perNode > 0 {
		return rank / l.perNode
	}
	big := l.r * (l.q + 1) // ranks on the nodes with one extra
	if rank < big {
		return rank / (l.q + 1)
	}
	return l.r + (rank-big)/l.q
}

// Describe names a node and its ranks for messages: "node 2 (ranks 6-8)".
func (l Layout) Describe(node int) string {
	if node < 0 || node >= l.Nodes {
		return fmt.Sprintf("node %d", node)
	}
	lo, hi := l.Range(node)
	if hi-lo == 1 {
		return fmt.Sprintf("node %d (rank %d)", node, lo)
	}
	return fmt.Sprintf("node %d (ranks %d-%d)", node, lo, hi-1)
}
