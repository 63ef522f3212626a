package ranks

import (
	"sync/atomic"
	"unsafe"
)

// Request is the handle of a nonblocking operation: a send, a receive, or an Operation; persistent or not.
//
// A handle stands for one run of a request's state (request, below). Go has no MPI_REQUEST_NULL: the handle a
// program holds stays valid after Wait (Wait again returns an empty Status, Waitany skips it, Free releases it), so
// a state that the handle alone owned could never be reused. The split lets it be: once a completion call has
// reported a run (a small collective's, CollRequest, or a one-shot send's or receive's), its state goes back to its
// rank and serves the rank's next one, under a new generation, and the old handle, whose generation no longer
// matches, reads as inactive. Every transition of the state's life cycle compares the generation with the state, in
// one word, so a stale handle can never report, free or wait on another run. That state was a 256-byte request per
// call, carved from a block of 15: an 8-byte Iallreduce and its Wait on 2 ranks spent a fifth to a quarter of their
// time in the allocation and the collections it brought, and in the cold memory of each new block.
//
// A handle is 16 bytes, from its rank's block of handles (newHandle), or made with its state: a persistent
// request's, whose state is never reused, and an operation's first run's (opRequest; its later runs get one of
// their own, see OpRequest). An object receive's state is not reused either: its completer still looks at it after
// the flag (completeObject).
type Request struct {
	s   *request
	gen uint32 // the run of s this handle stands for (the generation in s.life)
	// freed: Free released this handle after its run was reported, so that a later use is ErrRequest, as for any
	// freed request, though its state may serve another handle by then.
	freed atomic.Bool
}

// gone reports whether Free released h after its run was reported.
func (h *Request) gone() bool { return h.freed.Load() }

// A reported run's state may serve the rank's next run at once (reuse), while another goroutine of the rank is
// still looking at the old run through its handle: completing one request from several goroutines at once, as
// Waitany over a shared list does. That goroutine would read the state's plain fields as the next run writes them
// (a data race), or go on waiting on the next run's flag (and a deadlock, if that run needs it). So every completion
// call counts itself into each rank whose requests it looks at (Rank.completing) before it looks at any, and
// reuse gives a state back only when its reporter is the one goroutine counted on its rank. One that counts itself
// in after that sees the run inactive in the life word, which it reads before anything else of the state; the
// fields it reads before that (owner, w) never change.

// enter counts the calling completion call into the rank of h (none for nil or the zero Request), which leave
// counts it out of.
func (h *Request) enter() *Rank {
	if h == nil || h.s == nil {
		return nil
	}
	rk := h.s.owner
	if rk != nil {
		rk.completing.Add(1)
	}
	return rk
}

// leave counts a completion call out of rk (see enter).
func leave(rk *Rank) {
	if rk != nil {
		rk.completing.Add(-1)
	}
}

// callRanks is the set of ranks a completion call on a list has counted itself into (enterAll): each once.
type callRanks struct {
	rks   [2]*Rank
	n     int
	extra []*Rank
}

// enterAll counts the calling completion call into the rank of every request of reqs, once each.
func enterAll(reqs []*Request) (in callRanks) {
	for _, h := range reqs {
		if h == nil || h.s == nil || h.s.owner == nil {
			continue
		}
		rk := h.s.owner
		if in.has(rk) {
			continue
		}
		if in.n < len(in.rks) {
			in.rks[in.n] = rk
			in.n++
		} else {
			in.extra = append(in.extra, rk)
		}
		rk.completing.Add(1)
	}
	return in
}

func (in *callRanks) has(rk *Rank) bool {
	for _, r := range in.rks[:in.n] {
		if r == rk {
			return true
		}
	}
	for _, r := range in.extra {
		if r == rk {
			return true
		}
	}
	return false
}

// leave counts the call out of the ranks enterAll counted it into.
func (in *callRanks) leave() {
	for _, rk := range in.rks[:in.n] {
		rk.completing.Add(-1)
	}
	for _, rk := range in.extra {
		rk.completing.Add(-1)
	}
}

// genShift: request.life holds the life-cycle state (lifeActive ... lifeFreed) in its low bits and the state's
// generation above them.
const (
	genShift = 3
	lifeMask = 1<<genShift - 1
)

// lifeOf returns the life word of generation gen in life-cycle state st.
func lifeOf(gen, st uint32) uint32 { return gen<<genShift | st }

// lifeState returns the life-cycle state of a life word.
func lifeState(v uint32) uint32 { return v & lifeMask }

// is reports whether h's run is in life-cycle state st (false once its state has gone on to another run).
func (h *Request) is(st uint32) bool { return h.s.life.Load() == lifeOf(h.gen, st) }

// cas moves h's run from life-cycle state a to b, if it is in a.
func (h *Request) cas(a, b uint32) bool {
	return h.s.life.CompareAndSwap(lifeOf(h.gen, a), lifeOf(h.gen, b))
}

// set puts h's run in life-cycle state st. Only for the goroutine that holds the run in lifeBusy, or that made it.
func (h *Request) set(st uint32) { h.s.life.Store(lifeOf(h.gen, st)) }

// stale reports whether h's state has gone on to another run: h's own run was reported (inactive).
func (h *Request) stale() bool { return h.s.life.Load()>>genShift != h.gen }

// handleChunkLen is how many handles a rank allocates at once: 1 KiB.
const handleChunkLen = 64

// handleChunk is a block of handles that a rank hands out one at a time, as reqChunk is for states.
type handleChunk struct {
	hs   [handleChunkLen]Request
	used atomic.Int32
}

// newHandle returns a new handle of rank rk (nil: none, a handle of its own) for run gen of state s.
func (rk *Rank) newHandle(s *request, gen uint32) *Request {
	if rk == nil {
		return &Request{s: s, gen: gen}
	}
	for {
		ch := rk.handles.Load()
		if ch != nil {
			if i := ch.used.Add(1) - 1; i < handleChunkLen {
				h := &ch.hs[i]
				h.s, h.gen = s, gen
				return h
			}
		}
		rk.handles.CompareAndSwap(ch, new(handleChunk))
	}
}

// handle returns a new handle for s's current run, on s's owner's block (nil for nil).
func (s *request) handle() *Request {
	if s == nil {
		return nil
	}
	return s.owner.newHandle(s, s.life.Load()>>genShift)
}

// collRecentLen is how many of a communicator's latest small-collective runs CollRequest looks among for a state to
// reuse: as many as a rank has outstanding on one communicator in a loop that starts a few and waits for them all.
const collRecentLen = 8

// collReqs is a communicator handle's share of its rank's small-collective requests (CollRequest): the handles of
// its latest runs, whose states its next runs take again once reported, and a block of handles to make new ones
// from. Only the communicator's collective starts touch it, and MPI orders those (a rank's collective calls on one
// communicator are never concurrent), so it is plain memory: the rank's ring of reported states that it replaces
// took a swap to take a state and a CAS to give it back, and the state's life word a store at each end (an 8-byte
// Ibcast and Wait, with its CollRequest, made 9 locked instructions; now 4).
type collReqs struct {
	recent [collRecentLen]*Request
	last   int // recent[last] is the latest run's handle
	hs     *[handleChunkLen]Request
	used   int      // of hs
	gate   *gateRef // the gate of the latest barrier's run (GateRequest), for the next
	_      [collReqsPad]byte
}

// collReqsPad makes collReqs 128 bytes, a size class whose objects start on a 128-byte boundary, so that no other
// object shares its lines: every run writes it, and 96 bytes (its size unpadded) put it beside another rank's in
// the lines of their size class. The two arrays below fail the build unless the size is 128 exactly.
const collReqsPad = 128 - collRecentLen*8 - 4*8

var (
	_ [unsafe.Sizeof(collReqs{}) - 128]byte
	_ [128 - unsafe.Sizeof(collReqs{})]byte
)

// spare returns the state of h (a handle in recent; nil for none) for the communicator's next run, reset, if h's
// run was reported and nothing can look at the state any more; else nil. report moved it on to the next
// generation, active (so that the new handle is made under it), and what the rule of reuse asks (see reuse) holds
// if no completion call is counted on rank rk now: one that still looked at h's run was counted before it read the
// life word, which it read before report moved it on, which this load saw. The error is the reporter's to read
// until it leaves, so it is reset only then. A run that is over at its start (done) keeps the flag as its last run
// left it, done, which nobody watches.
func (h *Request) spare(rk *Rank, done bool) *request {
	if h == nil {
		return nil
	}
	s := h.s
	v := s.life.Load()
	// A run freed while active (MPI_Request_free) is over once its flag is set, or its gate reached, and nobody
	// reports it: its state is taken back from there (else each such run would leave its state behind for good).
	freed := v == lifeOf(h.gen, lifeFreeing) && s.over()
	if (v != lifeOf(nextGen(h.gen), lifeActive) && !freed) || !s.done.Unwatched() || rk.completing.Load() != 0 {
		return nil
	}
	if freed && !s.life.CompareAndSwap(v, lifeOf(nextGen(h.gen), lifeActive)) {
		return nil
	}
	if !done {
		s.done.Reset()
	} else if !s.done.Done() {
		s.done.Complete()
	}
	if s.err != nil { // written only when set: a Wait that lost its report to another call may be reading it (waitColl)
		s.err = nil
	}
	return s
}

// takeRun returns a state for the next small-collective run of the communicator whose share q is, on rank rk: the
// latest run's if spare (in a loop of one call and its Wait, the one just reported, its lines still in this core's
// cache), else the oldest run's if spare, else a new one; and records the run's handle. A run that is over at its
// start (done) gets its state with the flag done.
func (q *collReqs) takeRun(rk *Rank, done bool) *Request {
	i := q.last
	s := q.recent[i].spare(rk, done)
	if s == nil {
		i = (i + 1) % collRecentLen
		if s = q.recent[i].spare(rk, done); s == nil {
			s = rk.newReq(kindColl)
			if done {
				s.done.Complete()
			}
		}
	}
	if q.hs == nil || q.used == handleChunkLen {
		q.hs, q.used = new([handleChunkLen]Request), 0
	}
	h := &q.hs[q.used]
	q.used++
	h.s, h.gen = s, s.life.Load()>>genShift
	q.recent[i], q.last = h, i
	return h
}

// nextGen returns the generation after gen, as the life word holds it (its high bits).
func nextGen(gen uint32) uint32 { return (gen + 1) & (1<<(32-genShift) - 1) }

// nextRun makes reported state s active for its next run, under the next generation: its flag, error and life
// word reset (all an operation's state needs; see newOp).
func (s *request) nextRun() {
	gen := s.life.Load()>>genShift + 1
	s.done.Reset()
	s.err, s.finished = nil, false
	s.life.Store(lifeOf(gen, lifeActive))
}

// reuse gives h's state back to its rank once a completion call has reported h's run, if reusable said it may go
// (before the report) and nothing else can still look at it: no other completion call is counted on its rank
// (see enter), and its completer reads nothing of it after the flag's swap but the flag's waker, which must be
// empty (no waiter parked on the run, no hook armed on it), since the next run resets it. A send's or receive's
// goes to the pool that the rank's blocking calls share (nbReq). (A small collective's run is reported otherwise:
// its communicator's next CollRequest takes its state again, see collReqs.)
func (h *Request) reuse() {
	s := h.s
	if !s.done.Unwatched() || s.owner.completing.Load() != 1 {
		return
	}
	if s.kind == kindOp {
		reuseOp(s)
		return
	}
	s.owner.putReq(s)
}

// reusable reports whether s may go back to its rank once reported: a small collective's child (Child.Collect), a
// one-shot operation's (reuseOp), or a one-shot send's or receive's that is not of an object (an object receive's
// completer may still look at it after its flag: completeObject) and has no View's scratch. Persistent states are
// never reused: their handle is made with them.
//
// An operation's request may be completed by two parties (CompleteOp counts the first): the run that finishes the
// operation, and a completion call or sweep whose Progress reports it finished (pollOp). The run's comes before the
// flag, so before any report. A completion call's is counted on the rank (see enter), so none is under way when
// the state goes back; and a sweep looks only at the rank's listed requests, under the list's lock, which reuseOp
// takes to forget the state first. (Package nbc's operations never report themselves finished through Progress.)
func (s *request) reusable() bool {
	if s.owner == nil {
		return false
	}
	if s.ext != nil {
		return s.kind == kindOp && s.ext.persist == nil
	}
	switch s.kind {
	case kindColl:
		return true
	case kindSend, kindRecv:
		return s.target == nil && s.held == nil && s.scratch == nil && s.box == nil
	}
	return false
}

// Target is what completes a request's run, for the party that completes it on another rank's behalf (package
// nbc's small collectives, whose last member to arrive completes every member's request): the state, not the
// handle. The completer, on another core, then reads nothing of the handle's line, which its owner writes as it
// makes its next handles. The zero Target is none.
type Target struct{ r *request }

// TargetOf returns the target of h's run (the zero Target for nil).
func TargetOf(h *Request) Target {
	if h == nil {
		return Target{}
	}
	return Target{h.s}
}

// None reports whether t is the zero Target.
func (t Target) None() bool { return t.r == nil }

// CompleteColl is CompleteColl on t's request.
func (t Target) CompleteColl(err error) { completeColl(t.r, err) }

// CompleteOp is CompleteOp on t's request.
func (t Target) CompleteOp(err error) { t.r.completeOp(err) }

// CompletePersistentColl is CompletePersistentColl on t's request.
func (t Target) CompletePersistentColl(err error) { completePersistentColl(t.r, err) }
