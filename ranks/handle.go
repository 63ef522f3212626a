package ranks

import (
	"sync/atomic"
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
// their own, see OpRequest). An object receive's state is not reused either: its completer still looks at it after the flag
// (completeObject).
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

// collFreeLen is how many reported small-collective states a rank keeps for reuse (see reuse): as many as a rank
// has outstanding in a loop that starts a few and waits for them all; more are left to the collector.
const collFreeLen = 8

// collState returns a state for a CollRequest of rk: a reported one of rk's, reset for its next generation, or a
// new one. States never move between ranks (see getReq). A ring of its own rather than the pool sends and receives
// share (nbReq): a small collective's state needs only its flag, error and life word reset, where putReq and pooled
// reset a point-to-point request's every field; through the pool, an 8-byte Iallreduce and Wait on 2 ranks took
// 0.925 us against 0.885 (medians of 8 alternated runs).
func (rk *Rank) collState() *request {
	for i := range rk.collFree {
		// A load first: most slots are empty, and a swap is a locked instruction even then (8 of them on every
		// CollRequest of a node-aware collective's phase, whose hooked states are never reused: an 8-byte
		// Iallreduce among 4 ranks of 2 node processes took 3.40 us against 3.18 with the load, medians of 6).
		if rk.collFree[i].Load() == nil {
			continue
		}
		if s := rk.collFree[i].Swap(nil); s != nil {
			s.nextRun()
			return s
		}
	}
	return rk.newReq(kindColl)
}

// nextRun makes reported state s active for its next run, under the next generation: its flag, error and life
// word reset (all a small collective's or an operation's state needs; see collState, newOp).
func (s *request) nextRun() {
	gen := s.life.Load()>>genShift + 1
	s.done.Reset()
	s.err, s.finished = nil, false
	s.life.Store(lifeOf(gen, lifeActive))
}

// reuse gives h's state back to its rank once a completion call has reported h's run, if reusable said it may go
// (before the report) and nothing else can still look at it: no other completion call is counted on its rank
// (see enter), and its completer reads nothing of it after the flag's swap but the flag's waker, which must be
// empty (no waiter parked on the run, no hook armed on it), since the next run resets it. A small collective's
// state goes to the rank's ring for CollRequest; a send's or receive's to the pool that the rank's blocking calls
// share (nbReq).
func (h *Request) reuse() {
	s := h.s
	if !s.done.Unwatched() || s.owner.completing.Load() != 1 {
		return
	}
	if s.kind == kindOp {
		reuseOp(s)
		return
	}
	if s.kind != kindColl {
		s.owner.putReq(s)
		return
	}
	for i := range s.owner.collFree {
		if s.owner.collFree[i].CompareAndSwap(nil, s) {
			return
		}
	}
}

// reusable reports whether s may go back to its rank once reported: a one-shot small collective's, a one-shot
// operation's (reuseOp), or a one-shot send's or receive's that is not of an object (an object receive's completer
// may still look at it after its flag: completeObject) and has no View's scratch. Persistent states are never
// reused: their handle is made with them.
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
