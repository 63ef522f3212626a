package collectives

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"gompj/ranks"
)

// commState is what one rank keeps about one communicator between collective calls: its layout, its share of the
// shared-memory structure, the node-aware sub-communicators and forced algorithms. It is reached through a
// lock-free map keyed by a weak pointer to the Comm, so a communicator that is dropped takes its state with it.
type commState struct {
	size, rank int
	node       int   // this rank's node
	nodes      int   // distinct nodes among the members
	local      bool  // every member is on this node
	nodeOf     []int // comm rank -> node (only when !local)

	shm *shmComm // shared by the members (all on this node), when local
	me  *shmRank // this rank's private shared-memory bookkeeping

	forced [numColls]atomic.Pointer[string] // set by Force
	rules  [numColls][]rule                 // the table's rules that can match this communicator, made on first use
	last   [numColls]lastChoice             // the previous choice, reused for the same size

	hier *hierComms // node-aware sub-communicators, made on first use

	tmp []byte // scratch owned by this rank
}

// States are found through a direct-mapped cache of atomic pointers (one load and a compare on the hot path), backed
// by a sync.Map; entries hold weak pointers, so a dead communicator's state is never returned for a new one that
// reuses its address, and a cleanup drops it.
type stateEntry struct {
	key uintptr
	wp  weak.Pointer[ranks.Comm]
	st  *commState
}

const cacheSlots = 1024

var (
	stateCache [cacheSlots]atomic.Pointer[stateEntry]
	states     sync.Map // uintptr -> *stateEntry
)

// layoutHook, when set on a communicator before its first collective (tests), replaces World.NodeOf.
var layoutHooks sync.Map // weak.Pointer[ranks.Comm] -> func(worldRank int) int

func slotOf(k uintptr) *atomic.Pointer[stateEntry] { return &stateCache[(k>>6^k>>16)%cacheSlots] }

func stateOf(c *ranks.Comm) *commState {
	k := uintptr(unsafe.Pointer(c))
	slot := slotOf(k)
	if e := slot.Load(); e != nil && e.key == k && e.wp.Value() == c {
		return e.st
	}
	if v, ok := states.Load(k); ok {
		if e := v.(*stateEntry); e.wp.Value() == c {
			slot.Store(e)
			return e.st
		}
	}
	e := &stateEntry{key: k, wp: weak.Make(c), st: newState(c)}
	states.Store(k, e)
	slot.Store(e)
	runtime.AddCleanup(c, func(e *stateEntry) {
		states.CompareAndDelete(e.key, e)
		slotOf(e.key).CompareAndSwap(e, nil)
		layoutHooks.Delete(e.wp)
		if h := e.st.hier; h != nil { // the node-aware sub-communicators die with their parent
			h.node.Free()
			if h.leaders != nil {
				h.leaders.Free()
			}
		}
	}, e)
	return e.st
}

func newState(c *ranks.Comm) *commState {
	w := c.World()
	nodeOf := w.NodeOf
	if h, ok := layoutHooks.Load(weak.Make(c)); ok {
		nodeOf = h.(func(int) int)
	}
	s := &commState{size: c.Size(), rank: c.Rank()}
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
	s.shm = w.Shared(c, "gompj/collectives.shm", func() any { return newShmComm(n) }).(*shmComm)
	s.me = &shmRank{acksExpected: make([]uint64, n)}
	return s
}

// setLayout makes c's collectives see the node of each world rank as nodeOf says (tests: fake several nodes in
// one process). Every member must call it before c's first collective.
func setLayout(c *ranks.Comm, nodeOf func(worldRank int) int) {
	layoutHooks.Store(weak.Make(c), nodeOf)
	k := uintptr(unsafe.Pointer(c))
	states.Delete(k)
	slotOf(k).Store(nil)
}

// scratch returns n bytes of this rank's scratch memory (valid until the next call).
func (s *commState) scratch(n int) []byte {
	if cap(s.tmp) < n {
		s.tmp = make([]byte, n)
	}
	return s.tmp[:n]
}

func layoutHook(c *ranks.Comm) (func(int) int, bool) {
	h, ok := layoutHooks.Load(weak.Make(c))
	if !ok {
		return nil, false
	}
	return h.(func(int) int), true
}
