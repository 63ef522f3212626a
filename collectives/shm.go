package collectives

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// Shared-memory collectives for a communicator whose members all live on this node.
//
// The members share one shmComm (ranks.World.Shared, keyed by the communicator's context). Each member owns one
// slot in it, where it publishes slices of its buffers; the others copy or combine straight from them. Two kinds
// of synchronisation, both on atomic counters:
//
//   - a counting barrier: arrivals is monotone and phase p is complete once it reaches p*n. A rank arrives at
//     phase p+1 only after it saw phase p complete, so no reset (sense reversal) is ever needed: the phase number
//     plays the part of the sense. Whatever a rank wrote before arriving is visible to every rank that saw the
//     phase complete (sync/atomic orders it), so buffers published before a barrier may be read after it.
//   - publication and acknowledgement: a slot's gen is set to the operation's sequence number once its buffers
//     are published (a root's, say), readers wait for it; readers then add to the slot's acks, and the owner
//     waits for as many acknowledgements as readers before returning, so its buffer is not reused while read.
//     Every member counts the expected acknowledgements of every slot identically (acksExpected).
//
// Waiting spins and yields per queues.Policy, then parks on the communicator's event; the rank that completes a
// condition wakes the parked ranks. No lock is taken unless somebody parked.

const cacheLine = 128

type shmSlot struct {
	gen  atomic.Uint64
	acks atomic.Uint64
	_    [cacheLine - 16]byte

	// Written by the owner before it publishes (gen) or arrives at a barrier, read by the others after.
	//
	// fork is the owner's note of the path its last allreduce, allgather or reduce took: its count of such calls <<
	// 2 | a path (see paths). It shares a line with src and dst, which a direct path's members read anyway after
	// its first barrier (samePath checks it then): in a line of its own, reading it and writing it again at the
	// next call cost a 64 KiB reduce 11 % and allreduce 15 % at np=2 (gompj bench, 5 alternated pairs).
	fork     atomic.Uint64
	call     atomic.Uint64 // its count of API calls (shmRank.calls) as it publishes for readers (sameCall)
	root     int           // a direct reduce's root as the owner names it (sameRoot), in the line that samePath reads
	src, dst []byte
	counts   []int // v variants: counts and displacements in elements
	displs   []int
	blk      int       // gather, scatter: the root's block size in bytes
	stage    [2][]byte // small-message staging, double-buffered by barrier phase parity
	rcounts  []int     // alltoallv: receive counts and displacements in elements
	rdispls  []int
	coll     string // the publisher's collective (bcast, scatter, gather, scan, alltoall): readers check it (rootIs)
	_        [cacheLine]byte

	// alltoall: blocks copied into this member's receive buffer and out of its send buffer, over all alltoalls
	recvDone atomic.Uint64
	sendDone atomic.Uint64
	_        [cacheLine - 16]byte
}

// inlineSlot carries a small contribution and its sequence number in the same cache lines, so that a reader
// pays one transfer for the flag and the data together. Used only by operations in which every member reads every
// other member's slot (small allreduce and allgather): a member publishes round k+2 into the buffer of round k
// only after reading everybody's round k+1, which each published after it had finished reading round k.
type inlineSlot struct {
	seq  atomic.Uint64
	len  int
	data [inlineMax]byte
}

const inlineMax = 256 - 16

// parkWord is a member's declaration of the call in which it last parked (shmOp.parking), on a line of its own: read
// by the others only when all have parked.
type parkWord struct {
	w atomic.Uint64
	_ [cacheLine - 8]byte
}

type shmComm struct {
	parked     []parkWord // each member's declaration of the call it last parked in (shmOp.parking)
	inline     [][2]inlineSlot
	claims     []atomic.Uint64 // alltoall: block i->j at n*i+j, the last operation that claimed it
	claimsOnce sync.Once
	n          int
	procs      int // GOMAXPROCS when the state was made: every member reads the same value (stagedAllreduce)
	arrivals   atomic.Uint64
	_          [cacheLine - 8]byte
	release    atomic.Uint64 // the count of the latest node phase whose leader has come back (NodeRelease)
	// relEv is the release's own event: it may be raised under the network device's lock (a receive's hook, package
	// nbc), where a hook of ev (a node-aware leader's, which sends) must not run
	relEv event
	_     [cacheLine - 8]byte
	ev    event
	slots []shmSlot
}

// RankReturned implements ranks.ReturnWatcher: the waits parked here look again whether every member has parked
// or returned (shmOp.parking).
func (s *shmComm) RankReturned() { s.ev.notify() }

func newShmComm(n int) *shmComm {
	s := &shmComm{n: n, procs: runtime.GOMAXPROCS(0), slots: make([]shmSlot, n), inline: make([][2]inlineSlot, n),
		parked: make([]parkWord, n)}
	s.ev.waiters = make([]*queues.Waker, 0, n) // every member parked at once, without growing later
	return s
}

// shmRank is a member's private bookkeeping (only its own goroutine touches it).
type shmRank struct {
	seq          uint64         // shared-memory operations started
	phase        uint64         // barrier phases passed
	acksExpected []uint64       // per slot: acknowledgements it will have received once the current reads are done
	pref         []byte         // exscan: this rank's inclusive prefix
	inlineSeq    uint64         // inline rounds done
	forks        uint64         // allreduce, allgather and reduce calls (see paths)
	fork         uint64         // the current one's note (shmSlot.fork), 0 before the first
	a2aBlocks    uint64         // alltoall: blocks each member has received (and sent) so far
	flags        []bool         // scratch flags (alltoall: peers done)
	waker        *queues.Waker  // what this member parks on (event.wait)
	calls        uint64         // calls of the API on the communicator (started)
	kind         ranks.CallKind // the latest one's, 0 before the first
	root         int            // the latest one's root, 0 for the kinds that name none

	// nonblocking barriers (gate.go)
	s        *shmComm             // the communicator's shared state
	look     func(at, tag uint64) // package nbc's look before a nonblocking barrier's waiter parks (WatchBarrier)
	nbOut    bool                 // a nonblocking barrier of its may be under way: its next blocking one checks first
	last     *ranks.Request       // its latest nonblocking barrier's request (BarrierRequest)
	unnamed  bool                 // it has arrived at a nonblocking barrier whose request is not named yet
	deferred atomic.Int64         // its nonblocking arrivals put off until the phase before is through (deferral)
	_        [shmRankPad]byte
}

// shmRankPad makes shmRank 256 bytes, a size class whose objects start on a 256-byte boundary: a member writes its
// shmRank at every barrier, and at 200 bytes (unpadded) it could share a line with another member's, allocated from
// the same span when the two ranks ran on one processor in turn. The two arrays below fail the build unless the
// size is 256 exactly.
const shmRankPad = 256 - 200

var (
	_ [unsafe.Sizeof(shmRank{}) - 256]byte
	_ [256 - unsafe.Sizeof(shmRank{})]byte
)

// call returns the member's latest call of the API as a ranks.CallWord, 0 before the first. A reduce's root is left
// out: members that disagree about it are told by the reduce itself, where it matters, and the job goes on
// (sameRoot).
func (me *shmRank) call() uint64 {
	if me.kind == 0 {
		return 0
	}
	root := me.root
	if me.kind == ranks.CallReduce {
		root = 0
	}
	return ranks.CallWord(me.calls, me.kind, root)
}

// event parks waiters until a notify. Each parked waiter registers its own queues.Waker, and a notify wakes them
// all: parking allocates nothing (a channel closed to wake everybody could not be reused).
type event struct {
	parked  atomic.Bool
	mu      sync.Mutex
	waiters []*queues.Waker // parked since the last notify; its memory is kept, grown to the most ever parked
	// gates: the hooks of ranks whose completion calls are about to park on a nonblocking barrier's run (watch);
	// apart from waiters, which count the members parked in a blocking call (parking): a rank's hook stays listed
	// until the next notify, after its call may have gone on to other things
	gates []*queues.Waker
	spare []*queues.Waker // the memory of a gates list that notify has run, for the next (no allocation a watch)
}

func (e *event) notify() {
	if e.parked.Load() {
		e.mu.Lock()
		for i, w := range e.waiters {
			w.Wake()
			e.waiters[i] = nil
		}
		e.waiters = e.waiters[:0]
		hooks := e.gates // run outside the lock: a deferral's hook watches again, and may notify (gate.go)
		e.gates, e.spare = e.spare, nil
		e.parked.Store(false)
		e.mu.Unlock()
		if len(hooks) == 0 {
			return
		}
		for i, w := range hooks {
			w.Wake()
			hooks[i] = nil
		}
		e.mu.Lock()
		if e.spare == nil {
			e.spare = hooks[:0]
		}
		e.mu.Unlock()
	}
}

// watch lists hook w to be woken at the next notify (once, however often it is listed before).
func (e *event) watch(w *queues.Waker) {
	e.mu.Lock()
	e.parked.Store(true) // before the caller's look at what it waits for: a notifier that changed it sees the flag
	if !slices.Contains(e.gates, w) {
		e.gates = append(e.gates, w)
	}
	e.mu.Unlock()
}

// What event.wait ends with.
const (
	waitDone    = iota // cond holds
	waitAborted        // the job aborted
	waitStuck          // stuck reported that cond never will
)

// wait waits for cond per the policy, parking on w (the waiter's own). A wake-up may be spurious (w may still hold
// one from an earlier wait): cond is checked again. stuck, if not nil, is asked before each park (never while
// spinning): true means that cond can never hold, and the wait gives up. park, if not nil, is called as the waiter
// is about to park, with how many waiters would then be parked; true from it ends the wait as stuck does.
func (e *event) wait(cond, stuck func() bool, park func(parked int) bool, w *queues.Waker, p *queues.Policy,
	abort <-chan struct{}) int {
	if p.SpinFor(cond) {
		return waitDone
	}
	return e.park(cond, stuck, park, w, abort)
}

// park is wait after its spin: it parks until cond holds.
func (e *event) park(cond, stuck func() bool, park func(parked int) bool, w *queues.Waker, abort <-chan struct{}) int {
	for {
		e.mu.Lock()
		e.parked.Store(true) // before the check: a notifier that changed cond after it sees the flag
		if cond() {
			e.mu.Unlock()
			return waitDone
		}
		// A spurious wake-up leaves w listed from its last park: it is listed once, so that the list counts the
		// parked waiters.
		listed := slices.Contains(e.waiters, w)
		parked := len(e.waiters)
		if !listed {
			parked++
		}
		if (stuck != nil && stuck()) || (park != nil && park(parked)) {
			e.mu.Unlock()
			return waitStuck
		}
		if !listed {
			e.waiters = append(e.waiters, w)
		}
		e.mu.Unlock()
		if !w.Park(abort) {
			if cond() {
				return waitDone
			}
			return waitAborted
		}
		if cond() {
			return waitDone
		}
	}
}

// shmOp is one member's view of one shared-memory operation.
type shmOp struct {
	s    *shmComm
	me   *shmRank
	rank int
	w    *ranks.World
	c    *ranks.Comm
}

func (st *commState) shmOp(c *ranks.Comm) shmOp {
	return shmOp{s: st.shm, me: st.me, rank: st.rank, w: c.World(), c: c}
}

// started says that a collective call of the API on c, of kind k with root (0 for the kinds that name none),
// passed its argument checks and takes place: the call check logs it (ranks, callcheck.go), and a member of a
// communicator inside the node counts it, so that its waits in shared memory can declare which call they are in
// (parking). Every API call counts once, whatever algorithm it takes, and a phase it runs inside counts as part
// of it: the members of a correct program count the same calls.
func started(c *ranks.Comm, k ranks.CallKind, root int) { startedOn(c, stateOf(c), k, root) }

// Started is started for a nonblocking or persistent collective of package nbc: its calls count among the
// member's calls of the API as the blocking ones do (so that their numbers agree whichever a member makes), and a
// blocking call's wait can tell a member that made a nonblocking call in its place (CallLook).
func Started(c *ranks.Comm, k ranks.CallKind, root int) { started(c, k, root) }

// CallNumber returns the number of member c's latest call of the API on c, counted by started; 0 where c's members
// are not all on this node (only there do waits in shared memory declare their calls). On the member's goroutine.
func CallNumber(c *ranks.Comm) uint64 {
	if me := stateOf(c).me; me != nil {
		return me.calls
	}
	return 0
}

// CallLook, which package nbc sets as it loads, is what a wait in shared memory inside member c's call number call
// of kind k does before it parks: a member that made a nonblocking call in its place never comes (the two do not
// meet), and nbc's look ends the job if it finds one. Nil where package nbc is not linked in.
var CallLook func(c *ranks.Comm, call uint64, k ranks.CallKind)

// startedOn is started with c's state st.
func startedOn(c *ranks.Comm, st *commState, k ranks.CallKind, root int) {
	c.StartCall()
	if me := st.me; me != nil {
		me.calls++
		me.kind, me.root = k, root
	}
}

// Members that disagree about the collective they call (one skips a Barrier the others call, or calls Bcast where
// the others call Allreduce), or about its root (each names the other), each wait for what the others never do:
// the counts and flags of the shared state mean different things to each, and in the end they all park, or return
// from the job's function. Only the members move a communicator's shared state on, so once every member has
// parked or returned, none ever will. So a wait about to park declares the call it is in, in its own parked word,
// and the member that finds every other parked (the event's waiters count them, under its lock) or returned
// (World.Returned, which wakes the parked waits to look again) looks at the others' declarations: a member parked
// in another call under the same number names the disagreement; otherwise a member skipped a call and returned.
// Either way the job ends (Broken), since the shared state can no longer be trusted. An old declaration does no
// harm: the members of a correct program make the same call under each number. A call costs two writes to the
// member's own bookkeeping (started), and a park a store to a line nobody reads until all have parked; looking at
// every member's word at each park cost 8 ranks' Barrier on 2 cores about 5 %.
//
// A member that waits elsewhere (for a message, or in a nonblocking collective's Wait) never parks here, and its
// disagreement is not seen this way.

// parking declares, as this member parks, the call it waits in; once every member has parked or returned from the
// job's function (parked: those parked on the event, this one with them), it reports true, with another member
// parked in another call under the same number (*other, *theirs) or, if none, deadlocked.
func (o shmOp) parking(parked int, other *int, theirs *uint64) bool {
	mine := o.me.call()
	if mine == 0 {
		return false // no call of the API yet: a phase of another collective's
	}
	if p := &o.s.parked[o.rank].w; p.Load() != mine {
		p.Store(mine)
	}
	if parked < o.s.n && parked+o.c.MembersReturned() < o.s.n {
		return false
	}
	for j := range o.s.parked {
		if w := o.s.parked[j].w.Load(); j != o.rank && w != 0 && w != mine && ranks.SameCallNumber(w, mine) {
			*other, *theirs = j, w
			return true
		}
	}
	// No two parked in different calls under one number, and yet none can go on: members that returned, or waits
	// in calls that do not meet (a member skipped one, then returned).
	*other = deadlocked
	return true
}

// deadlocked is parking's other when every member has parked or returned without a disagreement to name.
const deadlocked = -2

func (o shmOp) aborted() error {
	return fmt.Errorf("%w: %v", ranks.ErrAborted, o.w.AbortCause())
}

func (o shmOp) wait(cond func() bool) error { return o.waitLooking(cond, 0) }

// waitLooking is wait for the program's Barrier, whose count is at (0: wait itself): each time before it parks it
// looks for a member that called a small nonblocking collective in its place (lookAt, gate.go), which ends the job if
// it finds one.
func (o shmOp) waitLooking(cond func() bool, at uint64) error {
	// The spin first, so that the closures below are made only for a wait that parks.
	if o.w.Policy().SpinFor(cond) {
		return nil
	}
	var stuck func() bool
	if o.me.fork != 0 {
		stuck = o.strayed
	}
	other, theirs := -1, uint64(0)
	return o.waitOr(cond, stuck, func(n int) bool {
		if at != 0 {
			o.lookAt(at)
		} else if CallLook != nil && o.me.kind != 0 {
			CallLook(o.c, o.me.calls, o.me.kind)
		}
		return o.parking(n, &other, &theirs)
	}, func() error {
		if other != -1 {
			return o.disagree(other, theirs)
		}
		return o.pathsDiffer()
	})
}

// disagree ends the job, naming member other's call theirs, declared where this member's differs (parking), or
// saying that none can go on (other is deadlocked).
func (o shmOp) disagree(other int, theirs uint64) error {
	if other == deadlocked {
		return Broken(o.c, fmt.Errorf("%w: rank %d waits in %s, its collective call %d on a communicator whose "+
			"other members all wait in shared memory too, or have returned from the job's function: none can go on "+
			"(a member skipped a collective call the others made)", ranks.ErrArg, o.rank,
			o.me.kind, o.me.calls))
	}
	return Broken(o.c, ranks.CallsDisagree(o.rank, other, o.me.call(), theirs))
}

// waitOr parks until cond holds, after the caller's spin; a wait about to park that finds stuck or park true (see
// event.wait) ends with what whenStuck returns.
func (o shmOp) waitOr(cond, stuck func() bool, park func(int) bool, whenStuck func() error) error {
	if o.me.waker == nil {
		o.me.waker = queues.GetWaker() // kept: taking one from the pool at every wait would churn the pool
	}
	switch o.s.ev.park(cond, stuck, park, o.me.waker, o.w.AbortCh()) {
	case waitAborted:
		return o.aborted()
	case waitStuck:
		return whenStuck()
	}
	return nil
}

func (o shmOp) pathsDiffer() error {
	return Broken(o.c, errArg("the members' contributions to a collective differ in size: rank %d and another "+
		"took different paths through shared memory, and each waits for what the other does on its own", o.rank))
}

// samePath checks, after the first barrier of a direct path, that every member took it in this call, before this
// member writes into the buffers the others published: a member on another path published none in this call, and
// its slot holds buffers of an earlier one (which may be the program's again by now).
func (o shmOp) samePath() error {
	for j := range o.s.slots {
		if f := o.s.slots[j].fork.Load(); f != o.me.fork {
			if f>>forkCallShift != o.me.fork>>forkCallShift && o.me.call() != 0 {
				// Member j came to the barrier through another call of the API: one of them skipped a call (a
				// Barrier) that the other made, and the barrier passed them both.
				return o.outOfStep(j, f>>forkCallShift)
			}
			return o.pathsDiffer()
		}
	}
	return nil
}

// Paths. Allreduce, Allgather and Reduce take one of three paths by the size of a contribution: inline (it rides
// in the member's inline slot), staged (copies, one barrier) or direct (published buffers, one or two barriers).
// Members whose sizes differ (an erroneous program) see it on the same path (each compares the others' sizes with
// its own), but on different paths each waits for ever for what the others do on theirs. So a member notes the call
// and its path (forkOn) before it publishes or arrives anywhere, and each of its waits that is about to park (in
// that call, or later: the note stays, and a later look finds nothing, since members that agreed on a call left the
// same note of it) asks whether another member took another path in the same call (strayed); a direct path also
// checks, after its first barrier, that every member took it (samePath), before it writes into what they
// published. A disagreement means the barrier's count and the inline rounds disagree too: the communicator's
// shared state can no longer be used, and the job ends (Broken). A correct call pays one store to the member's own
// slot, and on a direct path a look at every member's note in a line it reads anyway.
//
// A note also carries the member's count of the API's calls on the communicator (started), so that samePath tells
// members that came to its barrier through different calls (one skipped a Barrier the others made) from members
// on different paths: the count of such calls alone is the same in both. A phase that a collective runs inside
// another on the same communicator keeps its call's count, and differs by the count of such calls.
const (
	forkCountBits = 24                // bits of the count of allreduce, allgather and reduce calls in a note
	forkCallShift = 2 + forkCountBits // where the API's call count starts in a note
)

const (
	pathInline = 1 + iota
	pathStaged
	pathDirect
)

// forkOn notes that this member's current allreduce, allgather or reduce takes path.
func (o shmOp) forkOn(path uint64) {
	o.me.forks++
	o.me.fork = (o.me.calls<<forkCountBits|o.me.forks&(1<<forkCountBits-1))<<2 | path
	o.s.slots[o.rank].fork.Store(o.me.fork)
}

// strayed reports whether another member is in the same call as this one (allreduce, allgather, reduce) on another
// path.
func (o shmOp) strayed() bool {
	for j := range o.s.slots {
		if f := o.s.slots[j].fork.Load(); f>>2 == o.me.fork>>2 && f != o.me.fork {
			return true
		}
	}
	return false
}

// barrier: arrive at the next phase and wait until everyone has.
func (o shmOp) barrier() error { return o.barrierOf(false) }

// barrierOf is barrier; look: the program's Barrier, whose wait runs the look for a member that called a small
// nonblocking collective in its place before it parks (BarrierLook).
func (o shmOp) barrierOf(look bool) error {
	a := &o.s.arrivals
	if o.me.nbOut {
		// A nonblocking barrier of this member's may not be through, or not even counted (deferral): this arrival
		// must not come before its phase's, nor count towards it. Where its latest was reported complete, none is
		// pending; a look at the count would cost a transfer of its line more, the other members gone on.
		me, prev := o.me, o.me.phase*uint64(o.s.n)
		if !me.settled() && (me.deferred.Load() != 0 || a.Load() < prev) {
			if err := o.wait(func() bool { return me.deferred.Load() == 0 && a.Load() >= prev }); err != nil {
				return err
			}
		}
		me.nbOut = false
	}
	o.me.phase++
	target := o.me.phase * uint64(o.s.n)
	if a.Add(1) == target {
		o.s.ev.notify() // wakes the parked waiters: blocking barriers', and nonblocking ones' (gate.go)
		return nil
	}
	cond := func() bool { return a.Load() >= target }
	if look && BarrierLook != nil {
		return o.waitLooking(cond, target)
	}
	return o.wait(cond)
}

// next starts an operation and returns its sequence number.
func (o shmOp) next() uint64 {
	o.me.seq++
	return o.me.seq
}

func (o shmOp) publish(g uint64) {
	o.s.slots[o.rank].gen.Store(g)
	o.s.ev.notify()
}

func (o shmOp) waitPublished(j int, g uint64) error {
	gen := &o.s.slots[j].gen
	if gen.Load() >= g {
		return nil
	}
	return o.wait(func() bool { return gen.Load() >= g })
}

// expectAcks records that k reads of slot j's buffers are coming (every member calls it alike).
func (o shmOp) expectAcks(j, k int) { o.me.acksExpected[j] += uint64(k) }

func (o shmOp) ack(j int) {
	if o.s.slots[j].acks.Add(1) == o.me.acksExpected[j] {
		o.s.ev.notify()
	}
}

func (o shmOp) waitAcks() error {
	acks, want := &o.s.slots[o.rank].acks, o.me.acksExpected[o.rank]
	if acks.Load() >= want {
		return nil
	}
	return o.wait(func() bool { return acks.Load() >= want })
}

// waitRootAcks is waitAcks for the root of operation g of a bcast, scatter or gather (coll), in which no other
// member publishes. One that did took itself for the root as well, or started another collective at this point: an
// erroneous program, in which each such root would wait for ever for acknowledgements that went to the other (two
// ranks that each named themselves root of a Bcast hung). So a root about to park looks for another member's
// publication of g too, and then ends the job naming the disagreement (Broken): the members' counts of
// acknowledgements disagree from then on, and the communicator's shared state can no longer be used.
func (o shmOp) waitRootAcks(g uint64, coll string) error {
	acks, want := &o.s.slots[o.rank].acks, o.me.acksExpected[o.rank]
	if acks.Load() >= want || o.w.Policy().SpinFor(func() bool { return acks.Load() >= want }) {
		return nil
	}
	other, declared, theirs := -1, -1, uint64(0)
	stuck := func() bool {
		if o.me.fork != 0 && o.strayed() {
			return true
		}
		for j := range o.s.slots {
			if j != o.rank && o.s.slots[j].gen.Load() == g {
				other = j
				return true
			}
		}
		return false
	}
	park := func(n int) bool { return o.parking(n, &declared, &theirs) }
	return o.waitOr(func() bool { return acks.Load() >= want }, stuck, park, func() error {
		if declared != -1 {
			return o.disagree(declared, theirs)
		}
		if other < 0 {
			return o.pathsDiffer()
		}
		return Broken(o.c, RootTwice(coll, o.rank, other))
	})
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// --- barrier, bcast, scatter, gather ---

func (o shmOp) Barrier() error { return o.barrier() }

func (o shmOp) Bcast(buf []byte, root int) error {
	if o.rank == root {
		o.BcastPublish(buf)
		return o.waitRootAcks(o.me.seq, "bcast")
	}
	g := o.next()
	o.expectAcks(root, o.s.n-1)
	if err := o.waitPublished(root, g); err != nil {
		return err
	}
	if err := o.rootIs(root, "bcast"); err != nil {
		return err // no acknowledgement (see sameCall)
	}
	src := o.s.slots[root].src
	var err error
	switch {
	case len(src) > len(buf):
		err = errTrunc("bcast of %d bytes from root %d into a buffer of %d", len(src), root, len(buf))
	default:
		mem.Copy(buf, src)
	}
	o.ack(root)
	return err
}

// BcastPublish is the root's half of Bcast without the wait: the readers may copy from buf once it returns; the
// root must call waitAcks before it touches buf again or returns.
func (o shmOp) BcastPublish(buf []byte) {
	g := o.next()
	o.expectAcks(o.rank, o.s.n-1)
	o.s.slots[o.rank].src, o.s.slots[o.rank].coll = buf, "bcast"
	o.s.slots[o.rank].call.Store(o.me.calls)
	o.publish(g)
}

// sameCall checks, before a reader reads anything of its root's publication (or an alltoall's member, of a peer's),
// that it was published in the same call of the API as the reader's (their counts, shmRank.calls); rootIs then
// checks that it is the same collective.
// Members whose calls are out of step (one skipped or added a call) would otherwise pair wrongly: a reader behind
// could take one publication for two of its calls and acknowledge it twice, or acknowledge a publication of
// another collective, and the root, counting acknowledgements, return while another reader still copies from its
// buffer, or rewrite its slot for its next call meanwhile (the race detector saw a Scatter root's buffer written
// so, in TestCallsLookModel). rootIs makes both checks; a reader that fails either does not acknowledge, and the
// job ends (Broken), since the counts of acknowledgements no longer agree. A phase of another collective counts as
// its call.
func (o shmOp) sameCall(root int) error {
	if c := o.s.slots[root].call.Load(); c != o.me.calls {
		return o.outOfStep(root, c)
	}
	return nil
}

// outOfStep ends the job: member j published for its call c, where this member is in another (sameCall, samePath).
func (o shmOp) outOfStep(j int, c uint64) error {
	return Broken(o.c, fmt.Errorf("%w: the members of a communicator disagree about the collective: rank %d called "+
		"%s as its collective call %d on it, where rank %d published for its call %d (a member skipped or added a "+
		"call)", ranks.ErrArg, o.rank, o.me.kind, o.me.calls, j, c))
}

// rootIs checks that the root's published slot is for the reader's call (sameCall) and for collective coll:
// members of an erroneous program that started different collectives at this point would read the root's buffers
// laid out for another, out of their bounds.
func (o shmOp) rootIs(root int, coll string) error {
	if err := o.sameCall(root); err != nil {
		return err
	}
	if c := o.s.slots[root].coll; c != coll {
		return Broken(o.c, Mismatch(o.rank, coll, root, c))
	}
	return nil
}

// RootTwice is the error of root rank of a bcast, scatter or gather (coll) that saw member other publish at the
// same point as a root too; package nbc's slots report it alike.
func RootTwice(coll string, rank, other int) error {
	return errArg("%s: rank %d started as the root, and rank %d published at the same point as a root too (or "+
		"started another collective): the members disagree about the root", coll, rank, other)
}

// Mismatch is the error of a member (rank, which started coll) that finds another (peer: its root, or any member
// whose entry it reads) started another collective (other) at the same point: an erroneous program, which package
// nbc's shared-memory schedules detect as well.
func Mismatch(rank int, coll string, peer int, other string) error {
	return fmt.Errorf("%w: collective mismatch: rank %d started %s where rank %d started %s", ranks.ErrArg,
		rank, coll, peer, other)
}

// Scatterv: the root's send holds counts[i] elements of size sz for rank i at displs[i] (nil displs: packed in
// rank order, nil counts: len(recv) each). recv nil at the root means in place.
func (o shmOp) Scatterv(send []byte, counts, displs []int, sz, blk int, recv []byte, inPlace bool, root int) error {
	g := o.next()
	o.expectAcks(root, o.s.n-1)
	if o.rank == root {
		sl := &o.s.slots[root]
		sl.src, sl.counts, sl.displs, sl.blk, sl.coll = send, counts, displs, blk, "scatter"
		sl.call.Store(o.me.calls)
		o.publish(g)
		var err error
		if !inPlace {
			b := blockOf(send, counts, displs, sz, root, blk)
			if len(b) > len(recv) {
				err = errTrunc("scatter: %d bytes for the root into a buffer of %d", len(b), len(recv))
			} else {
				mem.Copy(recv, b)
			}
		}
		return firstErr(o.waitRootAcks(g, "scatter"), err)
	}
	if err := o.waitPublished(root, g); err != nil {
		return err
	}
	if err := o.rootIs(root, "scatter"); err != nil {
		return err // no acknowledgement (see sameCall)
	}
	sl := &o.s.slots[root]
	var err error
	if b := blockOf(sl.src, sl.counts, sl.displs, sz, o.rank, sl.blk); len(b) > len(recv) {
		err = errTrunc("scatter: %d bytes for rank %d into a buffer of %d", len(b), o.rank, len(recv))
	} else {
		mem.Copy(recv, b)
	}
	o.ack(root)
	return err
}

// blockOf returns rank i's block of buf: counts/displs in elements of sz bytes; without counts, blocks of
// blockBytes packed in rank order.
func blockOf(buf []byte, counts, displs []int, sz, i, blockBytes int) []byte {
	if counts == nil {
		return buf[i*blockBytes : (i+1)*blockBytes]
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

// Gatherv: the mirror of Scatterv. send nil at the root means in place.
func (o shmOp) Gatherv(send []byte, inPlace bool, recv []byte, counts, displs []int, sz, blk int, root int) error {
	g := o.next()
	o.expectAcks(root, o.s.n-1)
	if o.rank == root {
		sl := &o.s.slots[root]
		sl.dst, sl.counts, sl.displs, sl.blk, sl.coll = recv, counts, displs, blk, "gather"
		sl.call.Store(o.me.calls)
		o.publish(g)
		var err error
		if !inPlace {
			b := blockOf(recv, counts, displs, sz, root, blk)
			if len(send) > len(b) {
				err = errTrunc("gather: %d bytes from the root into a block of %d", len(send), len(b))
			} else {
				mem.Copy(b, send)
			}
		}
		return firstErr(o.waitRootAcks(g, "gather"), err)
	}
	if err := o.waitPublished(root, g); err != nil {
		return err
	}
	if err := o.rootIs(root, "gather"); err != nil {
		return err // no acknowledgement (see sameCall)
	}
	sl := &o.s.slots[root]
	var err error
	if b := blockOf(sl.dst, sl.counts, sl.displs, sz, o.rank, sl.blk); len(send) > len(b) {
		err = errTrunc("gather: %d bytes from rank %d into a block of %d", len(send), o.rank, len(b))
	} else {
		mem.Copy(b, send)
	}
	o.ack(root)
	return err
}

// --- allgather, alltoall ---

// Allgatherv: rank i's src lands in every recv at its block. src nil means in place (already in recv).
func (o shmOp) Allgatherv(src []byte, inPlace bool, recv []byte, counts, displs []int, sz, blockBytes int) error {
	n := o.s.n
	sl := &o.s.slots[o.rank]
	if inPlace {
		src = blockOf(recv, counts, displs, sz, o.rank, blockBytes)
	}
	if counts == nil && blockBytes <= inlineMax && len(src) <= inlineMax {
		o.forkOn(pathInline)
		k, par := o.inlinePublish(src)
		var err error
		for j := 0; j < n; j++ {
			s, werr := o.inlineGet(j, k, par)
			if werr != nil {
				return werr
			}
			if j == o.rank && inPlace {
				continue
			}
			b := blockOf(recv, nil, nil, sz, j, blockBytes)
			if len(s) > len(b) {
				err = errTrunc("allgather: %d bytes from rank %d into a block of %d", len(s), j, len(b))
				continue
			}
			mem.Copy(b, s)
		}
		return err
	}
	if counts == nil && blockBytes <= stageLimit/2 {
		o.forkOn(pathStaged)
		par := o.stage(src)
		if err := o.barrier(); err != nil {
			return err
		}
		var err error
		for j := 0; j < n; j++ {
			if j == o.rank && inPlace {
				continue
			}
			b := blockOf(recv, nil, nil, sz, j, blockBytes)
			s := o.s.slots[j].stage[par]
			if len(s) > len(b) {
				err = errTrunc("allgather: %d bytes from rank %d into a block of %d", len(s), j, len(b))
				continue
			}
			mem.Copy(b, s)
		}
		return err
	}
	o.forkOn(pathDirect)
	sl.src = src
	if err := o.barrier(); err != nil {
		return err
	}
	// Every member came to the barrier through this call: one that came through another (a member skipped a call)
	// would write its src for its next one while this member reads it.
	if err := o.samePath(); err != nil {
		return err
	}
	var err error
	for k := 1; k <= n; k++ {
		j := (o.rank + k) % n // start with the next rank: spreads the readers over the sources
		if j == o.rank && inPlace {
			continue
		}
		b := blockOf(recv, counts, displs, sz, j, blockBytes)
		s := o.s.slots[j].src
		if len(s) > len(b) {
			err = errTrunc("allgather: %d bytes from rank %d into a block of %d", len(s), j, len(b))
			continue
		}
		mem.Copy(b, s)
	}
	return firstErr(o.barrier(), err)
}

// Alltoallv: send's block j goes to rank j's recv block o.rank. No barrier and no message: every member exposes
// its send and receive buffers by publishing the operation's sequence number in its slot; then block i->j may be
// copied by i (push) or by j (pull), whoever claims it first (an atomic claim per block and operation), so one copy
// per byte, and a member that comes late copies its blocks both ways itself instead of waiting for the others to be
// scheduled again to fetch them. A member walks its peers in ring order, taking whichever has published, and
// returns once every block into its receive buffer and out of its send buffer has been copied (two counters per
// member, which whoever copies a block bumps).
func (o shmOp) Alltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int, sz, blockBytes int) error {
	n := o.s.n
	g := o.next()
	o.me.a2aBlocks += uint64(n)
	target := o.me.a2aBlocks
	o.s.claimsOnce.Do(func() { o.s.claims = make([]atomic.Uint64, n*n) })
	sl := &o.s.slots[o.rank]
	sl.src, sl.counts, sl.displs, sl.blk = send, scounts, sdispls, blockBytes
	sl.dst, sl.rcounts, sl.rdispls, sl.coll = recv, rcounts, rdispls, "alltoall"
	sl.call.Store(o.me.calls)
	o.publish(g)
	var err error
	// move copies block i->j if this member claims it first; both have published operation g
	move := func(i, j int) {
		c := &o.s.claims[i*n+j]
		for {
			cur := c.Load()
			if cur >= g {
				return // taken (or done) by another member
			}
			if c.CompareAndSwap(cur, g) {
				break
			}
		}
		from, to := &o.s.slots[i], &o.s.slots[j]
		peer := i
		if peer == o.rank {
			peer = j
		}
		// A peer that has finished this call took all its blocks with this member, so a claim won here is of a
		// peer in this call; unless the members' calls are out of step, and then it may be rewriting its slot for a
		// later one (see sameCall).
		switch c := o.s.slots[peer].call.Load(); {
		case c != o.me.calls:
			err = o.outOfStep(peer, c)
		case o.s.slots[peer].coll != "alltoall": // another collective, published in the same call (see rootIs)
			err = Broken(o.c, Mismatch(o.rank, "alltoall", peer, o.s.slots[peer].coll))
		case from.counts == nil && len(from.src) < n*from.blk:
			err = errArg("alltoall: rank %d sends %d bytes, not %d blocks of %d", i, len(from.src), n, from.blk)
		case to.rcounts == nil && len(to.dst) < n*to.blk:
			err = errTrunc("alltoall: rank %d receives into %d bytes, not %d blocks of %d", j, len(to.dst), n, to.blk)
		default:
			s := blockOf(from.src, from.counts, from.displs, sz, j, from.blk)
			b := blockOf(to.dst, to.rcounts, to.rdispls, sz, i, to.blk)
			if len(s) > len(b) {
				err = errTrunc("alltoall: %d bytes from rank %d into a block of %d at rank %d", len(s), i, len(b), j)
			} else {
				mem.Copy(b, s)
			}
		}
		// counted even when in error, so that nobody waits for it
		if to.recvDone.Add(1) == target {
			o.s.ev.notify()
		}
		if from.sendDone.Add(1) == target {
			o.s.ev.notify()
		}
	}
	move(o.rank, o.rank)
	left := n - 1
	done := o.me.scratchBools(n)
	for left > 0 {
		progress := false
		for k := 1; k < n; k++ {
			j := (o.rank + k) % n // the next rank first: spreads the copies over the buffers
			if done[k] || o.s.slots[j].gen.Load() < g {
				continue
			}
			move(j, o.rank)
			move(o.rank, j)
			done[k] = true
			left--
			progress = true
		}
		if !progress {
			if werr := o.wait(func() bool {
				for k := 1; k < n; k++ {
					if !done[k] && o.s.slots[(o.rank+k)%n].gen.Load() >= g {
						return true
					}
				}
				return false
			}); werr != nil {
				return werr
			}
		}
	}
	rd, sd := &sl.recvDone, &sl.sendDone
	if rd.Load() < target || sd.Load() < target {
		if werr := o.wait(func() bool { return rd.Load() >= target && sd.Load() >= target }); werr != nil {
			return werr
		}
	}
	return err
}

// scratchBools returns n cleared flags owned by this rank.
func (r *shmRank) scratchBools(n int) []bool {
	if cap(r.flags) < n {
		r.flags = make([]bool, n)
	}
	f := r.flags[:n]
	clear(f)
	return f
}

// --- reductions ---

const (
	reduceBlock    = 4 << 10  // bytes combined at a time, in L1
	minReduceChunk = 16 << 10 // smallest share of a reduction given to one rank
	stageLimit     = 4 << 10  // allreduce through staging copies (one barrier) up to this size
	stageSpare     = 5 << 10  // see stagedAllreduce
)

// stagedAllreduce reports whether an allreduce of total bytes (above inlineMax) goes through staging copies: one
// barrier, after which every member combines all n copies itself, n*n*total bytes of combining in all. Otherwise it
// goes chunked: a second barrier, and each byte combined once (by few members, at these sizes) and copied to every
// member. Where the members outnumber the processors, the n*n work is done n/procs members to a processor, in
// turn: 16 ranks on 2 processors spent 42 us in a 4 KiB allreduce, against 22 chunked (gompj bench allreduce -np 16,
// 5 interleaved pairs). Staging costs (n/procs - 2) * total bytes of combining a member more than chunking, at about
// 0.1 ns a byte here, and a barrier among members that outnumber the processors costs about 0.5 us a member: so
// staging stays while (n - 2*procs) * total <= stageSpare * procs. Every member must decide alike, so procs is the
// shared state's, not each member's own look at GOMAXPROCS.
func (s *shmComm) stagedAllreduce(total int) bool {
	return total <= stageLimit && (s.n-2*s.procs)*total <= stageSpare*s.procs
}

// combineInto computes, for bytes [lo, hi) of the members' published srcs, src[0] op src[1] op ... op src[n-1]
// (rank order), block by block through acc, and writes each block at its offset less base into dst, or, with dst
// nil, into every member's published dst (starting with this member's).
func (o shmOp) combineInto(k kernel, lo, hi, sz int, acc []byte, base int, dst []byte) {
	n := o.s.n
	bs := (reduceBlock / sz) * sz
	if bs == 0 {
		bs = sz
	}
	for a := lo; a < hi; a += bs {
		b := min(a+bs, hi)
		t := acc[:b-a]
		mem.Copy(t, o.s.slots[n-1].src[a:b])
		for i := n - 2; i >= 0; i-- {
			k(t, o.s.slots[i].src[a:b])
		}
		if dst != nil {
			mem.Copy(dst[a-base:b-base], t)
			continue
		}
		for j := 0; j < n; j++ {
			mem.Copy(o.s.slots[(o.rank+j)%n].dst[a-base:b-base], t)
		}
	}
}

// chunk returns the byte range of the reduction of total bytes (elements of sz) that member i computes, with n
// members sharing it in chunks of at least minReduceChunk, starting at member first.
func chunk(total, sz, n, i, first int) (lo, hi int) {
	parts := min(n, max(1, total/minReduceChunk))
	p := (i - first + n) % n
	if p >= parts {
		return 0, 0
	}
	elems := total / sz
	per, extra := elems/parts, elems%parts
	loE := p*per + min(p, extra)
	hiE := loE + per
	if p < extra {
		hiE++
	}
	return loE * sz, hiE * sz
}

func (o shmOp) checkLengths(what string, total int) error {
	for j := range o.s.slots {
		if l := len(o.s.slots[j].src); l != total {
			return errArg("%s: rank %d contributes %d bytes, rank %d %d", what, o.rank, total, j, l)
		}
	}
	return nil
}

// Reduce combines every member's src into the root's dst. At the root, src may alias dst (in place).
func (o shmOp) Reduce(k kernel, src, dst []byte, sz, root int, st *commState) error {
	n := o.s.n
	total := len(src)
	if total <= stageLimit {
		o.forkOn(pathStaged)
		par := o.stage(src)
		if err := o.barrier(); err != nil {
			return err
		}
		if o.rank != root {
			return nil
		}
		if err := o.checkStaged("reduce", par, total); err != nil {
			return err
		}
		if len(dst) < total {
			return errTrunc("reduce: %d bytes into a root buffer of %d", total, len(dst))
		}
		out := dst[:total]
		mem.Copy(out, o.s.slots[n-1].stage[par])
		for i := n - 2; i >= 0; i-- {
			k(out, o.s.slots[i].stage[par])
		}
		return nil
	}
	o.forkOn(pathDirect)
	sl := &o.s.slots[o.rank]
	sl.src, sl.root = src, root
	if o.rank == root {
		sl.dst = dst
	}
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.samePath(); err != nil {
		return err
	}
	err := firstErr(o.sameRoot(root), o.checkLengths("reduce", total))
	if err == nil && len(o.s.slots[root].dst) < total {
		err = errTrunc("reduce: %d bytes into a root buffer of %d", total, len(o.s.slots[root].dst))
	}
	if err == nil {
		if lo, hi := chunk(total, sz, n, o.rank, root); hi > lo {
			o.combineInto(k, lo, hi, sz, st.scratch(scrShm, reduceBlock+sz), 0, o.s.slots[root].dst)
		}
	}
	return firstErr(o.barrier(), err)
}

// inlinePublish puts src (at most inlineMax bytes) in this rank's inline slot for the next round.
func (o shmOp) inlinePublish(src []byte) (k uint64, par int) {
	o.me.inlineSeq++
	k = o.me.inlineSeq
	par = int(k & 1)
	sl := &o.s.inline[o.rank][par]
	sl.len = mem.Copy(sl.data[:], src)
	sl.seq.Store(k)
	o.s.ev.notify()
	return k, par
}

// inlineGet waits for member j's contribution to round k.
func (o shmOp) inlineGet(j int, k uint64, par int) ([]byte, error) {
	sl := &o.s.inline[j][par]
	if sl.seq.Load() < k {
		if err := o.wait(func() bool { return sl.seq.Load() >= k }); err != nil {
			return nil, err
		}
	}
	return sl.data[:sl.len], nil
}

// stage copies src into this rank's staging buffer for the coming barrier phase and returns the phase parity.
// Staged data is read between that barrier and the next, and the buffer of the other parity is the one the next
// staging op writes, so no rank ever overwrites staged data still being read: one barrier per op, no acks.
func (o shmOp) stage(src []byte) uint64 {
	sl := &o.s.slots[o.rank]
	par := (o.me.phase + 1) & 1
	if cap(sl.stage[par]) < len(src) {
		sl.stage[par] = make([]byte, len(src), max(len(src), 64))
	}
	sl.stage[par] = sl.stage[par][:len(src)]
	mem.Copy(sl.stage[par], src)
	return par
}

// sameRoot checks, after a direct reduce's first barrier, that every member named the same root. Of two members that
// each took themselves for the root, each had its members' shares combined into its own buffer and returned part of
// the sum without an error; now every member fails with ErrArg, and the closing barrier still holds them together.
// (On the staged path each such root combines every contribution itself, and returns the whole sum.)
func (o shmOp) sameRoot(root int) error {
	for j := range o.s.slots {
		if r := o.s.slots[j].root; r != root {
			return errArg("reduce: rank %d names root %d, rank %d root %d: the members disagree about the root", o.rank,
				root, j, r)
		}
	}
	return nil
}

func (o shmOp) checkStaged(what string, par uint64, total int) error {
	for j := range o.s.slots {
		if l := len(o.s.slots[j].stage[par]); l != total {
			return errArg("%s: rank %d contributes %d bytes, rank %d %d", what, o.rank, total, j, l)
		}
	}
	return nil
}

// Allreduce: every member's dst gets the combination of all srcs. src may alias dst (in place).
func (o shmOp) Allreduce(k kernel, src, dst []byte, sz int, st *commState) error {
	n := o.s.n
	total := len(src)
	if len(dst) < total {
		return errTrunc("allreduce: %d bytes into a buffer of %d", total, len(dst))
	}
	if total <= inlineMax {
		o.forkOn(pathInline)
		round, par := o.inlinePublish(src)
		out := dst[:total]
		var err error
		for i := n - 1; i >= 0; i-- {
			in, werr := o.inlineGet(i, round, par)
			if werr != nil {
				return werr
			}
			switch {
			case len(in) != total:
				err = errArg("allreduce: rank %d contributes %d bytes, rank %d %d", o.rank, total, i, len(in))
			case err != nil:
			case i == n-1:
				mem.Copy(out, in)
			default:
				k(out, in)
			}
		}
		return err
	}
	sl := &o.s.slots[o.rank]
	if o.s.stagedAllreduce(total) {
		o.forkOn(pathStaged)
		par := o.stage(src)
		if err := o.barrier(); err != nil {
			return err
		}
		if err := o.checkStaged("allreduce", par, total); err != nil {
			return err
		}
		out := dst[:total]
		mem.Copy(out, o.s.slots[n-1].stage[par])
		for i := n - 2; i >= 0; i-- {
			k(out, o.s.slots[i].stage[par])
		}
		return nil
	}
	o.forkOn(pathDirect)
	sl.src, sl.dst = src, dst
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.samePath(); err != nil {
		return err
	}
	err := o.checkLengths("allreduce", total)
	if err == nil {
		for j := range o.s.slots {
			if len(o.s.slots[j].dst) < total {
				err = errTrunc("allreduce: %d bytes into rank %d's buffer of %d", total, j, len(o.s.slots[j].dst))
			}
		}
	}
	if err == nil {
		if lo, hi := chunk(total, sz, n, o.rank, 0); hi > lo {
			o.combineInto(k, lo, hi, sz, st.scratch(scrShm, reduceBlock+sz), 0, nil)
		}
	}
	return firstErr(o.barrier(), err)
}

// ReduceScatter: member i's dst gets block i (counts in elements) of the combination of all srcs. In place (src
// is the member's dst), the others read a member's src until the last barrier, so the block is combined into
// scratch memory and copied to the start of dst after it.
func (o shmOp) ReduceScatter(k kernel, src, dst []byte, counts []int, sz int, inPlace bool, st *commState) error {
	o.forkOn(pathDirect)
	o.s.slots[o.rank].src = src
	if err := o.barrier(); err != nil {
		return err
	}
	if err := o.samePath(); err != nil { // as in Allgatherv
		return err
	}
	err := o.checkLengths("reduce_scatter", len(src))
	var out []byte
	if err == nil {
		lo := 0
		for j := 0; j < o.rank; j++ {
			lo += counts[j] * sz
		}
		hi := lo + counts[o.rank]*sz
		if hi > len(src) {
			err = errArg("reduce_scatter: counts add up to more than the %d bytes sent", len(src))
		} else if hi-lo > len(dst) {
			err = errTrunc("reduce_scatter: %d bytes into a buffer of %d", hi-lo, len(dst))
		} else if hi > lo {
			acc := reduceBlock + sz
			tmp := st.scratch(scrShm, acc+hi-lo)
			out = dst[:hi-lo]
			if inPlace {
				out = tmp[acc:]
			}
			o.combineInto(k, lo, hi, sz, tmp[:acc], lo, out)
		}
	}
	err = firstErr(o.barrier(), err)
	if inPlace && err == nil && len(out) > 0 {
		mem.Copy(dst, out)
	}
	return err
}

// Scan (inclusive, or exclusive): a chain; rank i combines rank i-1's prefix with its own contribution, reading
// it straight from rank i-1's memory. src may alias dst (in place).
func (o shmOp) Scan(k kernel, src, dst []byte, exclusive bool) error {
	n := o.s.n
	g := o.next()
	coll := "scan"
	if exclusive {
		coll = "exscan"
	}
	for j := 0; j < n-1; j++ {
		o.expectAcks(j, 1)
	}
	total := len(src)
	if len(dst) < total {
		return errTrunc("scan: %d bytes into a buffer of %d", total, len(dst))
	}
	dst = dst[:total]
	var err error
	var mine []byte // what this rank publishes: its inclusive prefix
	if !exclusive {
		if total > 0 && &src[0] != &dst[0] {
			mem.Copy(dst, src)
		}
		if o.rank > 0 {
			if err := o.waitPublished(o.rank-1, g); err != nil {
				return err
			}
			if err := o.rootIs(o.rank-1, coll); err != nil {
				return err // no acknowledgement: the job ends (rootIs)
			}
			prev := o.s.slots[o.rank-1].dst
			if len(prev) != total {
				err = errArg("scan: rank %d contributes %d bytes, rank %d %d", o.rank, total, o.rank-1, len(prev))
			} else {
				k(dst, prev)
			}
			o.ack(o.rank - 1)
		}
		mine = dst
	} else {
		mine = src
		if o.rank > 0 {
			if err := o.waitPublished(o.rank-1, g); err != nil {
				return err
			}
			if err := o.rootIs(o.rank-1, coll); err != nil {
				return err
			}
			prev := o.s.slots[o.rank-1].dst
			if len(prev) != total {
				err = errArg("exscan: rank %d contributes %d bytes, rank %d %d", o.rank, total, o.rank-1, len(prev))
			} else {
				mem.Copy(dst, prev)
			}
			o.ack(o.rank - 1)
			if o.rank < n-1 && err == nil {
				if cap(o.me.pref) < total {
					o.me.pref = make([]byte, total)
				}
				mine = o.me.pref[:total]
				mem.Copy(mine, src)
				k(mine, dst)
			}
		}
	}
	if o.rank < n-1 {
		o.s.slots[o.rank].dst, o.s.slots[o.rank].coll = mine, coll
		o.s.slots[o.rank].call.Store(o.me.calls)
		o.publish(g)
		err = firstErr(o.waitAcks(), err)
	}
	return err
}
