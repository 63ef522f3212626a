package ranks

import (
	"fmt"
	"runtime"
	"slices"
)

// Context agreement, with no central allocator.
//
// A communicator's context must be unique on each of its members (a rank can never hold two communicators with one
// context), while disjoint groups may share a context harmlessly. Each rank keeps nextCtx, above every context
// number it has used, so a group agrees on a number by taking the largest of its members' nextCtx: no member has
// used it. That needs only messages among the members, so it works across node processes, and CreateGroup runs it
// among the members of a group alone.
//
// Several goroutines of one rank may create communicators at the same time (MPI_THREAD_MULTIPLE; CreateGroup's tag
// is for exactly that). Two agreements that read the same nextCtx on a shared member could pick the same number,
// so a member takes part in one agreement at a time: it holds its rank's right to allocate from reading nextCtx to
// raising it past the agreed number. An agreement runs in rounds: each member tries to take the right and
// contributes its nextCtx if it got it; the round succeeds only if every member got it, else every member lets go
// and the round is repeated. Nobody ever waits for the right, so rounds cannot deadlock.
//
// The right must never be held by an agreement that waits for a member still busy elsewhere: that member may be in
// another agreement which needs this very right (rank r runs X and Y in two goroutines, rank s runs Y, then X; if
// X held r's right while waiting for s, Y could never finish). So an agreement first makes sure every member is
// present (a barrier among them: one empty round, or the caller's own exchange just before) and only then competes
// for rights: from then on, every round it runs ends promptly, and so does every hold.
//
// To exclude livelock, the agreements present on a rank are ordered by a key unique among them and the same on all
// their members: a rank gives the right only to the smallest key among those present and not finished. The
// agreement of the smallest key in the whole job then finds all its members' rights free as soon as the rounds
// under way end, and succeeds.

// agreeKey orders concurrent agreements. parents are the identities (Comm.id) of the communicators the agreement
// runs over, smaller first (two for an agreement across the groups of a future intercommunicator); kind and tag
// tell apart the agreements that one communicator may run at once (a collective constructor and several
// CreateGroup calls with distinct tags).
type agreeKey struct {
	p0, p1 uint64
	kind   uint8
	tag    int64
}

const (
	agreeColl      uint8 = iota // Dup, Split, Create: collective over the parent
	agreeGroup                  // CreateGroup: among a group, by tag
	agreeIntercomm              // IntercommCreate: the two local communicators
	agreeInter                  // Merge and Dup of an intercommunicator
)

func (k agreeKey) less(o agreeKey) bool {
	switch {
	case k.p0 != o.p0:
		return k.p0 < o.p0
	case k.p1 != o.p1:
		return k.p1 < o.p1
	case k.kind != o.kind:
		return k.kind < o.kind
	}
	return k.tag < o.tag
}

func keyOf(a, b uint64, kind uint8, tag int) agreeKey {
	return agreeKey{p0: min(a, b), p1: max(a, b), kind: kind, tag: int64(tag)}
}

// id identifies a live communicator across the job: its context and the world rank of a member that every member
// names the same (an intracommunicator's rank 0; the smaller of an intercommunicator's two rank 0s). That member
// holds no other communicator with this context, so no other live communicator has this id.
func (c *Comm) id() uint64 {
	first := c.WorldRank(0)
	if c.remote != nil {
		first = min(first, int(c.remote[0]))
	}
	return uint64(c.ctx)<<32 | uint64(uint32(first))
}

// agreement is one agreement in flight on a rank.
type agreement struct {
	key agreeKey
}

// maxCtxNumber bounds context numbers: contexts are 2k and 2k+1, below sideCtx, and their side contexts stay below
// checkCtx.
const maxCtxNumber = sideCtx/2 - 2

// present records that all of a's members are taking part: from now on it competes for the rank's right.
func (r *Rank) present(a *agreement) {
	r.ctxMu.Lock()
	r.agreeing = append(r.agreeing, a)
	r.ctxMu.Unlock()
}

// tryHold gives a (present) the rank's right to allocate if it is free and no unfinished agreement present with a
// smaller key, and returns the rank's proposal (nextCtx).
func (r *Rank) tryHold(a *agreement) (bool, int64) {
	r.ctxMu.Lock()
	defer r.ctxMu.Unlock()
	if r.ctxHolder != nil {
		return false, 0
	}
	for _, o := range r.agreeing {
		if o.key.less(a.key) {
			return false, 0
		}
	}
	r.ctxHolder = a
	return true, int64(r.nextCtx)
}

// letGo ends a's round on this rank: it gives back the right (if a held it) and, when a finished with the
// agreed numbers [k, k+span), records them as used and forgets a.
func (r *Rank) letGo(a *agreement, finished bool, k, span int64) {
	r.ctxMu.Lock()
	defer r.ctxMu.Unlock()
	if r.ctxHolder == a {
		r.ctxHolder = nil
	}
	if finished {
		if k >= 0 && uint32(k+span) > r.nextCtx {
			r.nextCtx = uint32(k + span)
		}
		if i := slices.Index(r.agreeing, a); i >= 0 {
			r.agreeing = slices.Delete(r.agreeing, i, i+1)
		}
	}
}

// roundFunc runs one round of an agreement among its members: it combines every member's (held, proposal) into
// (all held, the largest proposal) and returns that on every member.
type roundFunc func(held bool, proposal int64) (allHeld bool, k int64, err error)

// agree runs agreement key among the members that round connects and returns the first of span consecutive
// context numbers unused on every member, now recorded as used. present says that the caller has just run an
// exchange among the same members that none could leave before all had entered it (an allgather): then the
// presence barrier is not needed.
func (r *Rank) agree(key agreeKey, span int64, present bool, round roundFunc) (int64, error) {
	if !present {
		if _, _, err := round(false, 0); err != nil {
			return 0, err
		}
	}
	a := &agreement{key: key}
	r.present(a)
	for {
		held, p := r.tryHold(a)
		all, k, err := round(held, p)
		if err != nil {
			r.letGo(a, true, -1, 0)
			return 0, err
		}
		if all {
			if k+span-1 > maxCtxNumber {
				r.letGo(a, true, -1, 0)
				return 0, fmt.Errorf("%w: out of communicator contexts", ErrComm)
			}
			r.letGo(a, true, k, span)
			return k, nil
		}
		r.letGo(a, false, 0, 0)
		runtime.Gosched() // another agreement holds a member's right; its round is under way
	}
}

// combineRound folds one member's (held, proposal) pair into an accumulated one: held is a logical and, the
// proposal a maximum.
func combineRound(acc, in []int64) {
	acc[0] &= in[0]
	acc[1] = max(acc[1], in[1])
}

func roundVec(held bool, p int64) []int64 {
	v := []int64{0, p}
	if held {
		v[0] = 1
	}
	return v
}

// tree is a binomial tree over some ranks of a transport communicator (a collective or side context), rooted at
// one of them: the rounds and exchanges of communicator management run over it, among its members only.
type tree struct {
	c        *Comm
	members  []int // ranks of c taking part, in order; nil: all of c
	me, root int   // indexes into members
	n        int
	up, down int // tags toward the root and away from it
}

// newTree is the tree over all of c rooted at root, on c's collective context with the management tags.
func (c *Comm) newTree(root int) tree {
	return tree{c: c.Coll(), me: c.rank, root: root, n: c.size, up: tagGather, down: tagBcast}
}

func (t tree) rank(i int) int {
	i = (i + t.root) % t.n
	if t.members == nil {
		return i
	}
	return t.members[i]
}

// reduce combines every member's vector (all of one length) with fn, toward the root; the root's result is
// returned there (others get their partial result, of no use to them).
func (t tree) reduce(mine []int64, fn func(acc, in []int64)) ([]int64, error) {
	acc := slices.Clone(mine)
	in := make([]int64, len(mine))
	vr := (t.me - t.root + t.n) % t.n
	for mask := 1; mask < t.n; mask <<= 1 {
		if vr&mask != 0 {
			return acc, t.c.Send(acc, t.rank(vr-mask), t.up)
		}
		if vr+mask < t.n {
			if _, err := t.c.Recv(in, t.rank(vr+mask), t.up); err != nil {
				return nil, err
			}
			fn(acc, in)
		}
	}
	return acc, nil
}

// gather collects every member's vector (all of length w), in member order, at the root; others get nil.
func (t tree) gather(mine []int64) ([]int64, error) {
	w := len(mine)
	vr := (t.me - t.root + t.n) % t.n
	span := 1 // members vr .. vr+span-1 (virtual) gathered so far
	for mask := 1; mask < t.n && vr&mask == 0; mask <<= 1 {
		span = min(2*mask, t.n-vr)
	}
	buf := make([]int64, span*w)
	copy(buf, mine)
	got := 1
	for mask := 1; mask < t.n; mask <<= 1 {
		if vr&mask != 0 {
			return nil, t.c.Send(buf[:got*w], t.rank(vr-mask), t.up)
		}
		if vr+mask < t.n {
			cnt := min(mask, t.n-vr-mask)
			if _, err := t.c.Recv(buf[mask*w:(mask+cnt)*w], t.rank(vr+mask), t.up); err != nil {
				return nil, err
			}
			got = mask + cnt
		}
	}
	// buf is in virtual order (from the root): put it in member order.
	out := make([]int64, len(buf))
	for v := 0; v < t.n; v++ {
		copy(out[((v+t.root)%t.n)*w:], buf[v*w:(v+1)*w])
	}
	return out, nil
}

// bcast copies the root's v into every member's v (all of one length).
func (t tree) bcast(v []int64) error {
	vr := (t.me - t.root + t.n) % t.n
	mask := 1
	for ; mask < t.n; mask <<= 1 {
		if vr&mask != 0 {
			if _, err := t.c.Recv(v, t.rank(vr-mask), t.down); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < t.n {
			if err := t.c.Send(v, t.rank(vr+mask), t.down); err != nil {
				return err
			}
		}
	}
	return nil
}

// allgather is gather then bcast of the whole table.
func (t tree) allgather(mine []int64) ([]int64, error) {
	all, err := t.gather(mine)
	if err != nil {
		return nil, err
	}
	if all == nil {
		all = make([]int64, len(mine)*t.n)
	}
	return all, t.bcast(all)
}

// round is a roundFunc over the tree: reduce to the root, broadcast the outcome.
func (t tree) round(held bool, p int64) (bool, int64, error) {
	v, err := t.reduce(roundVec(held, p), combineRound)
	if err != nil {
		return false, 0, err
	}
	if err := t.bcast(v); err != nil {
		return false, 0, err
	}
	return v[0] == 1, v[1], nil
}
