package collectives

import (
	"runtime"
	"sync/atomic"

	"github.com/gompj/gompj/ranks"
)

// commState is what one rank keeps about one communicator between collective calls: its layout, its share of the
// shared-memory structure, the node-aware sub-communicators and forced algorithms. It lives in the Comm handle
// (ranks.Comm.Ext), so a communicator that is dropped takes its state with it.
type commState struct {
	size, rank int
	node       int                     // this rank's node
	nodes      int                     // distinct nodes among the members
	local      bool                    // every member is on this node
	nodeOf     []int                   // comm rank -> node (only when !local)
	layout     func(worldRank int) int // a test's faked layout (setLayout), in place of World.NodeOf; nil if none

	shm *shmComm // shared by the members (all on this node), when local
	me  *shmRank // this rank's private shared-memory bookkeeping

	forced [numColls]atomic.Pointer[string] // set by Force
	forces atomic.Uint32                    // Forces so far: a choice remembered across calls holds while it stays
	rules  [numColls][]rule                 // the table's rules that can match this communicator, made on first use
	last   [numColls]lastChoice             // the previous choice, reused for the same size

	hier *hierCell // node-aware sub-communicators, made on first use; the cleanup holds the cell (makeState)

	nbc any      // package nbc's state for this rank and communicator (NbcState)
	nbr *nbrPlan // neighbourhood collectives' plan, made on first use (neighbor.go)

	seq opCounters // operation ids (seq.go)

	// Scratch memory owned by this rank, reused from call to call (see scratch).
	bufs  [numScratch][]byte
	packs [numArgs]packed // the call's View arguments, packed (views.go)
	ints  [numIntScratch][]int
	reqs  []*ranks.Request
}

// stateOf returns c's state, which lives in the handle itself (ranks.Comm.Ext): one load on every call. The first
// call on a handle makes it.
func stateOf(c *ranks.Comm) *commState {
	if st, ok := c.Ext().Load().(*commState); ok {
		return st
	}
	st := makeState(c, nil)
	if !c.Ext().CompareAndSwap(nil, st) { // another goroutine of the rank made one first: use it
		return c.Ext().Load().(*commState)
	}
	return st
}

// makeState makes a state for c with the given faked layout (nil: the World's), and the cleanup that frees the
// node-aware sub-communicators it makes when c dies. The cleanup holds only their cell, never the state: the state
// points back at c (package nbc keeps operations on c in it), and a cleanup whose argument reaches its object never
// runs, which kept every communicator that had run a nonblocking collective alive after Free: about 72 KB per
// Split, Iallreduce and Free.
func makeState(c *ranks.Comm, layout func(worldRank int) int) *commState {
	st := newState(c, layout)
	runtime.AddCleanup(c, func(hc *hierCell) {
		if h := hc.h; h != nil { // the node-aware sub-communicators die with their parent
			h.node.Free()
			if h.leaders != nil {
				h.leaders.Free()
			}
		}
	}, st.hier)
	return st
}

// hierCell holds a communicator's node-aware sub-communicators for the cleanup that frees them.
type hierCell struct{ h *hierComms }

func newState(c *ranks.Comm, layout func(worldRank int) int) *commState {
	w := c.World()
	nodeOf := w.NodeOf
	if layout != nil {
		nodeOf = layout
	}
	s := &commState{size: c.Size(), rank: c.Rank(), layout: layout, hier: new(hierCell)}
	if c.IsInter() {
		return s // scratch only: the local phases run on c.Local(), which has a state of its own (inter.go)
	}
	s.node = nodeOf(c.WorldRank(c.Rank()))
	lo, hi := w.Local()
	seen := map[int]bool{}
	s.local = true
	nodes := make([]int, s.size)
	for i := 0; i < s.size; i++ {
		wr := c.WorldRank(i)
		nodes[i] = nodeOf(wr)
		seen[nodes[i]] = true
		if nodes[i] != s.node || wr < lo || wr >= hi {
			s.local = false
		}
	}
	s.nodes = len(seen)
	if !s.local {
		s.nodeOf = nodes
		return s
	}
	n := s.size
	s.shm = w.Shared(c, "github.com/gompj/gompj/collectives.shm", func() any { return newShmComm(n) }).(*shmComm)
	s.me = &shmRank{acksExpected: make([]uint64, n), s: s.shm}
	return s
}

// setLayout makes c's collectives see the node of each world rank as nodeOf says (tests: fake several nodes in
// one process). Every member must call it before c's first collective.
func setLayout(c *ranks.Comm, nodeOf func(worldRank int) int) {
	c.Ext().Store(makeState(c, nodeOf)) // a state with the new layout, in place of any the handle holds
}

// Scratch memory. The collectives run in tight loops, so what a call needs beyond the caller's buffers (copies,
// receive buffers, request lists, counts) comes from memory this rank keeps in the communicator's state and reuses:
// after the first calls of a given size, a call allocates nothing. A slot grows to the largest size asked of it (and
// no larger) and is never shrunk; it dies with the communicator's state.
//
// One call may need several areas at once: an in-place alltoall's copy of its input and the algorithm's own
// buffers, a reduction's accumulator and its receive buffer. So each role has a slot of its own (the list below
// says which code takes which), and no function holding a slice of a slot calls, on the same state, anything that
// takes that slot: algorithms and collectives that call one another use different slots, and the
// sub-communicators of the node-aware algorithms have states, hence slots, of their own. A slice from a slot is
// valid until the next request of the same slot: to hold two buffers of one role, take the sum of their sizes once
// and cut it. Every member's use of a slot ends with the call: a buffer published to peers (shared memory) or
// handed to a request is no longer read once the call has returned.
type scratchSlot uint8

const (
	scrCall     scratchSlot = iota // api.go only: a copy of the caller's input, or a whole vector the call hands on
	scrAcc                         // an algorithm's accumulator: this rank's contribution, combined in place
	scrRecv                        // message-based algorithms (p2p.go): what they receive or pack for sending
	scrShm                         // shared-memory reductions (shm.go): the block being combined
	scrHier                        // node-aware algorithms (hier.go): their buffers on the parent communicator
	scrViewSend                    // views.go only: a View send argument, packed
	scrViewRecv                    // views.go only: a View receive argument, packed
	numScratch
)

// Integer scratch slots, same rules: counts and displacements.
const (
	intsCall = iota // api.go only
	intsAlgo        // inside an algorithm
	numIntScratch
)

// scratch returns n bytes of the slot's memory, contents undefined.
func (s *commState) scratch(slot scratchSlot, n int) []byte {
	if cap(s.bufs[slot]) < n {
		s.bufs[slot] = make([]byte, n)
	}
	return s.bufs[slot][:n]
}

// scratchInts returns n zeroed ints of the slot's memory.
func (s *commState) scratchInts(slot, n int) []int {
	if cap(s.ints[slot]) < n {
		s.ints[slot] = make([]int, n)
	}
	b := s.ints[slot][:n]
	clear(b)
	return b
}

// reqList returns an empty list to append a call's nonblocking requests to; waitReqs waits for them and keeps the
// list's memory for the next call. One list per communicator and call: the algorithms that start requests do not
// call each other while theirs are in flight (those that run a phase on a sub-communicator use its list there).
func (s *commState) reqList() []*ranks.Request {
	return s.reqs[:0]
}

// waitReqs waits for every request of reqs (a list from reqList, appended to) and takes the list back.
func (s *commState) waitReqs(reqs []*ranks.Request) error {
	err := ranks.Waitall(reqs...)
	clear(reqs) // the requests are done: let them go, and the buffers they received into
	s.reqs = reqs[:0]
	return err
}
