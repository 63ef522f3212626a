package ranks

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
)

// Tags reserved on the collective context for communicator management. Collectives use tags below these.
const (
	tagGather = MaxTag - iota
	tagBcast
	// ReservedTags is the number of tags at the top of the collective context that the collectives must avoid.
	ReservedTags = 16
)

// abortExit ends the calling goroutine (a rank that called Abort); deferred calls run, so the node sees it finish.
func abortExit() { runtime.Goexit() }

// sideCtx marks the side contexts: communicator c's context with this bit set carries the messages of
// CreateGroup on c (c.ctx|sideCtx) and of IntercommCreate's leaders with c as the peer ((c.ctx+1)|sideCtx), under
// the caller's tag. No communicator has such a context (maxCtxNumber), so these messages never meet user traffic,
// a collective's, or each other's.
const sideCtx = 1 << 31

// newCtx turns an agreed context number into a context id pair (point-to-point 2k, collective 2k+1).
func newCtx(k int64) (uint32, error) {
	if k <= 0 || k > maxCtxNumber {
		return 0, fmt.Errorf("%w: out of communicator contexts", ErrComm)
	}
	return uint32(2 * k), nil
}

// side returns c's addressing (its group, and remote group if any) on context ctx: a transport for the messages of
// communicator management.
func (c *Comm) side(ctx uint32) *Comm {
	return &Comm{r: c.r, w: c.w, rank: c.rank, size: c.size, group: c.group, ctx: ctx, remote: c.remote,
		local: c.local}
}

// agreeColl agrees on span fresh context numbers among all of c (an intracommunicator), collectively; present as
// for agree.
func (c *Comm) agreeColl(t tree, span int64, present bool) (int64, error) {
	return c.r.agree(keyOf(c.id(), c.id(), agreeColl, 0), span, present, t.round)
}

// Dup returns a new communicator with the same group(s), the same topology and a context of its own. Collective
// over c. On an intercommunicator, over both groups.
//
// Context agreement (agree.go): every member proposes the lowest context number it has not used; the group takes
// the largest proposal. No central allocator, so this works across node processes.
func (c *Comm) Dup() (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.IsInter() {
		return c.dupInter()
	}
	c.StartCall() // the call check's (callcheck.go), as a collective's
	k, err := c.agreeColl(c.newTree(0), 1, false)
	if err != nil {
		return nil, err
	}
	ctx, err := newCtx(k)
	if err != nil {
		return nil, err
	}
	return &Comm{r: c.r, w: c.w, rank: c.rank, size: c.size, group: c.group, ctx: ctx, topo: c.topo}, nil
}

// Split partitions c by color; within a color, ranks are ordered by key, then by their rank in c. A rank passing
// color Undefined gets nil. Collective over c.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, fmt.Errorf("%w: split color %d (colors are >= 0, or Undefined)", ErrArg, color)
	}
	c.StartCall()
	return c.split(color, key, nil, nil)
}

// split is Split with extra values gathered beside each member's color and key (every member passes as many):
// verify, if set, sees every member's extras (member i's at all[i*stride:], stride len(extra)) and may refuse the
// call, which the topology constructors use to check that the members passed the same arguments. Every member sees
// the same table, so all of them fail alike, and nobody is left waiting.
func (c *Comm) split(color, key int, extra []int64, verify func(all []int64, stride int) error) (*Comm, error) {
	if err := c.intraOnly("Split"); err != nil {
		return nil, err
	}
	const fixed = 2
	stride := fixed + len(extra)
	t := c.newTree(0)
	all, err := t.allgather(append([]int64{int64(color), int64(key)}, extra...))
	if err != nil {
		return nil, err
	}
	if verify != nil && len(extra) > 0 {
		ext := make([]int64, 0, len(extra)*c.size)
		for i := 0; i < c.size; i++ {
			ext = append(ext, all[stride*i+fixed:stride*(i+1)]...)
		}
		if err := verify(ext, len(extra)); err != nil {
			return nil, err
		}
	}
	// Every rank of c takes part, Undefined or not (disjoint groups share k harmlessly), and the allgather above was
	// the presence barrier.
	k, err := c.agreeColl(t, 1, true)
	if err != nil || color == Undefined {
		return nil, err
	}
	type member struct{ key, rank int }
	var mine []member
	for i := 0; i < c.size; i++ {
		if int(all[stride*i]) == color {
			mine = append(mine, member{int(all[stride*i+1]), i})
		}
	}
	ctx, err := newCtx(k)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(mine, func(a, b int) bool { return mine[a].key < mine[b].key })
	nc := &Comm{r: c.r, w: c.w, size: len(mine), ctx: ctx, group: make([]int32, len(mine))}
	for i, m := range mine {
		nc.group[i] = int32(c.WorldRank(m.rank))
		if m.rank == c.rank {
			nc.rank = i
		}
	}
	return nc, nil
}

// intraOnly is the error of a call that gompj defines on intracommunicators only.
func (c *Comm) intraOnly(what string) error {
	if c.IsInter() {
		return fmt.Errorf("%w: %s of an intercommunicator (gompj defines it on intracommunicators only)", ErrComm, what)
	}
	return nil
}

// ranksIn maps g's members to their ranks in c (an intracommunicator); a member not in c is ErrGroup.
func (c *Comm) ranksIn(what string, g *Group) ([]int, error) {
	idx := c.Group().index()
	out := make([]int, g.Size())
	for i := range out {
		r, ok := idx[g.at(i)]
		if !ok {
			return nil, fmt.Errorf("%w: %s: the group's rank %d (world rank %d) is not in the communicator", ErrGroup,
				what, i, g.at(i))
		}
		out[i] = r
	}
	return out, nil
}

// subComm is the communicator of group g (a subgroup of c, whose ranks in c are in) on context number k, as seen
// by c's rank: nil if it is not a member.
func (c *Comm) subComm(g *Group, in []int, k int64) (*Comm, error) {
	me := slices.Index(in, c.rank)
	if me < 0 {
		return nil, nil
	}
	ctx, err := newCtx(k)
	if err != nil {
		return nil, err
	}
	members := make([]int32, len(in))
	for i := range members {
		members[i] = g.at(i)
	}
	return &Comm{r: c.r, w: c.w, rank: me, size: len(in), group: members, ctx: ctx}, nil
}

// Create returns the communicator of group g, a subgroup of c (MPI_Comm_create): collective over c, every rank
// passing the same g; ranks outside g get nil, nil. As MPI-2.2 allows, ranks may instead pass disjoint subgroups,
// each group getting its own communicator. A member of g that is not in c is ErrGroup.
func (c *Comm) Create(g *Group) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.intraOnly("Create"); err != nil {
		return nil, err
	}
	in, err := c.ranksIn("Create", g)
	if err != nil {
		return nil, err
	}
	c.StartCall()
	k, err := c.agreeColl(c.newTree(0), 1, false)
	if err != nil {
		return nil, err
	}
	return c.subComm(g, in, k)
}

// CreateGroup returns the communicator of group g, a subgroup of c, and is called by the members of g only
// (MPI_Comm_create_group): the ranks of c outside g take no part. Its messages travel among g's members on a
// side context of c under tag, so that concurrent calls on c (from several goroutines, over overlapping groups)
// stay apart when their tags differ, as in MPI. A caller that is not in g, or a member of g not in c, is ErrGroup.
func (c *Comm) CreateGroup(g *Group, tag int) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.intraOnly("CreateGroup"); err != nil {
		return nil, err
	}
	if tag < 0 || tag > MaxTag {
		return nil, errTag(tag)
	}
	in, err := c.ranksIn("CreateGroup", g)
	if err != nil {
		return nil, err
	}
	me := slices.Index(in, c.rank)
	if me < 0 {
		return nil, fmt.Errorf("%w: CreateGroup called by rank %d of the communicator, which is not in the group %v",
			ErrGroup, c.rank, g)
	}
	t := tree{c: c.side(c.ctx | sideCtx), members: in, me: me, n: len(in), up: tag, down: tag}
	k, err := c.r.agree(keyOf(c.id(), c.id(), agreeGroup, tag), 1, false, t.round)
	if err != nil {
		return nil, err
	}
	return c.subComm(g, in, k)
}

// SplitNode returns the communicator of the ranks of c that live on this node (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED), ordered as in c.
func (c *Comm) SplitNode() (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.Split(c.w.nodeOf(c.r.id), c.rank)
}

// Free releases the communicator; using it afterwards is ErrComm. The world communicator cannot be freed.
func (c *Comm) Free() error {
	if c == nil {
		return fmt.Errorf("%w: nil", ErrComm)
	}
	if c.ctx == 0 {
		return fmt.Errorf("%w: the world communicator cannot be freed", ErrComm)
	}
	if !c.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: already freed", ErrComm)
	}
	c.w.dropShared(c)
	c.forgetBins()
	if c.local != nil { // an intercommunicator's local communicator is its own
		c.local.freed.Store(true)
		c.w.dropShared(c.local)
		c.local.forgetBins()
	}
	return nil
}

// forgetBins drops the rank's empty matching bins of c's contexts: point-to-point, collective, and their side
// contexts (sideCtx).
func (c *Comm) forgetBins() {
	r := c.r
	if r == nil {
		return
	}
	pair := c.ctx &^ 1
	mine := func(ctx uint32) bool { return ctx&^sideCtx&^1 == pair }
	r.mu.Lock()
	r.posted.Forget(mine)
	r.unexp.Forget(mine)
	r.mu.Unlock()
}
