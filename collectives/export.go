package collectives

import "github.com/gompj/gompj/ranks"

// What package nbc (nonblocking and persistent collectives) takes from here, besides Call and the Resolve
// functions: operation ids, the algorithm table, and the communicator's layout.

// NextOp returns the id of the next ordinary operation on c (seq.go). A nonblocking collective takes it when it
// starts, on every member at the same point, as a blocking one does.
func NextOp(c *ranks.Comm) OpID { return stateOf(c).nextOp() }

// NextPersistent returns the id of the next persistent operation on c, taken by its Init call.
func NextPersistent(c *ranks.Comm) OpID { return stateOf(c).nextPersistent() }

// ChooseNonblocking returns the algorithm of the nonblocking or persistent call a on c, from the table. a may be
// made by package nbc itself (a phase of a node-aware operation): only its exported fields count.
func ChooseNonblocking(c *ranks.Comm, a *Call) (string, error) {
	st := stateOf(c)
	comm := a.Kernel == nil || a.Commutative
	return st.chooseNonblocking(a.Coll, st.sel(comm, a.Bytes()))
}

// Local reports whether every member of c lives on this node.
func Local(c *ranks.Comm) bool { return stateOf(c).local }

// Hier is a communicator's node-aware structure: the members on this node (Node, in the communicator's order), one
// leader per node (Leaders, nil on the other members) and where every member sits.
type Hier struct {
	Node     *ranks.Comm
	Leaders  *ranks.Comm
	NodeIdx  []int   // comm rank -> index of its node (its leader's rank in Leaders)
	NodeRank []int   // comm rank -> its rank in its node's communicator
	Members  [][]int // node index -> its members' comm ranks, in order
	Start    []int   // node index -> how many members the nodes before it have
	Blocked  bool    // nodes hold consecutive ranks in node order
}

// Hierarchy returns c's node-aware structure, making its communicators on first use (collectively: every member
// calls it at the same point, as the node-aware algorithms do).
func Hierarchy(c *ranks.Comm) (*Hier, error) {
	st := stateOf(c)
	h, err := st.hierarchy(c)
	if err != nil {
		return nil, err
	}
	return &Hier{Node: h.node, Leaders: h.leaders, NodeIdx: h.nodeIdx, NodeRank: h.nodeRank, Members: h.members,
		Start: h.start, Blocked: h.blocked}, nil
}

// NbcState returns package nbc's state for this rank on c, made by mk the first time. It lives and dies with the
// rank's collective state of c. Collectives on one communicator are started in order by one goroutine at a time
// (MPI's rule), so it needs no lock.
func NbcState(c *ranks.Comm, mk func() any) any {
	st := stateOf(c)
	if st.nbc == nil {
		st.nbc = mk()
	}
	return st.nbc
}

// BarrierGate returns member c's gate for its nonblocking barriers' requests where they can arrive at the barrier
// that the blocking one passes in shared memory (ArriveBarrier): every member of c is on this node (every member
// finds the same); nil where not.
func BarrierGate(c *ranks.Comm) ranks.Gate {
	if st := stateOf(c); st.shm != nil {
		return st.me
	}
	return nil
}
