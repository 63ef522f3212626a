package ranks

import (
	"errors"
	"fmt"
)

// Intercommunicators: two disjoint groups, each rank a member of one (its local group), talking to the other (its
// remote group). Point-to-point ranks name the remote group: a send to rank j goes to the remote group's rank j,
// and a message's Status.Source is the sender's rank in its own group. Rank and Size are the local group's.
//
// An intercommunicator has one context, agreed among both groups (agree.go), for its point-to-point and
// collective traffic, and a local intracommunicator of its own (the next context number) on which its collectives
// run their local phases. Collectives on intercommunicators live in package collectives.

// Root is the root's own root argument in an intercommunicator collective (MPI_ROOT). The other ranks of the
// root's group pass ProcNull, and the ranks of the other group pass the root's rank in their remote group.
const Root = -3

// IsInter reports whether c is an intercommunicator.
func (c *Comm) IsInter() bool { return c != nil && c.remote != nil }

// RemoteSize is the size of an intercommunicator's remote group (0 on an intracommunicator).
func (c *Comm) RemoteSize() int {
	if c == nil {
		return 0
	}
	return len(c.remote)
}

// RemoteWorldRank maps a rank of an intercommunicator's remote group to its world rank.
func (c *Comm) RemoteWorldRank(r int) int { return int(c.remote[r]) }

// Local returns an intercommunicator's local group as an intracommunicator with a context of its own (nil on an
// intracommunicator). The collectives run their local phases on it; it is freed with c.
func (c *Comm) Local() *Comm { return c.local }

// peers is the number of ranks point-to-point calls address: the remote group's on an intercommunicator.
func (c *Comm) peers() int {
	if c.remote != nil {
		return len(c.remote)
	}
	return c.size
}

// peerWorld maps a point-to-point rank of c to its world rank.
func (c *Comm) peerWorld(r int) int {
	if c.remote != nil {
		return int(c.remote[r])
	}
	return c.WorldRank(r)
}

// The classes a leader broadcasts to its group when it finds an error, so that the whole group returns it.
var leaderErrs = []error{nil, ErrComm, ErrRank, ErrTag, ErrArg, ErrGroup, ErrInternal}

func errClass(err error) int64 {
	for i, e := range leaderErrs[1:] {
		if errors.Is(err, e) {
			return int64(i + 1)
		}
	}
	return int64(len(leaderErrs) - 1)
}

// IntercommCreate makes an intercommunicator between c's group and another, disjoint group
// (MPI_Intercomm_create). Collective over c and the other group's local communicator: each group names a leader
// among its ranks (localLeader, the same on all of the group's ranks), and the two leaders reach each other
// through peer, a communicator they both belong to, where the other leader is remoteLeader; peer and remoteLeader
// matter at the leader only. The leaders' messages travel on a side context of peer under tag, apart from any
// other traffic on peer. The new communicator's context is agreed among both groups, with no central allocator.
//
// Bad input: a localLeader out of c's range is ErrRank on every rank. At the leader, a nil or freed peer, or one
// that is another rank's (the leader is not in it), is ErrComm; a remoteLeader out of peer's range, or one that is
// in c's own group, is ErrRank; a bad tag is ErrTag. The leader reports these to its whole group, which returns
// the same class; the other group cannot hear of them and waits for the job to end (as the failing rank's error
// ends it). Groups found to overlap are ErrGroup on both sides.
func (c *Comm) IntercommCreate(localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.intraOnly("IntercommCreate (as the local communicator)"); err != nil {
		return nil, err
	}
	if localLeader < 0 || localLeader >= c.size {
		return nil, fmt.Errorf("%w: IntercommCreate: local leader %d, communicator size %d", ErrRank, localLeader, c.size)
	}
	t := c.newTree(localLeader)
	leader := c.rank == localLeader
	hdr := make([]int64, 3) // error class, remote size, remote communicator's id
	var remote []int64
	var x *Comm // the leader's way to the other leader
	var lerr error
	if leader {
		if x, lerr = c.checkPeer(peer, remoteLeader, tag); lerr == nil {
			var rid uint64
			remote, rid, lerr = c.exchangeGroups(x, remoteLeader, tag)
			hdr[1], hdr[2] = int64(len(remote)), int64(rid)
		}
		hdr[0] = errClass(lerr)
		if lerr == nil {
			hdr[0] = 0
		}
	}
	if err := t.bcast(hdr); err != nil {
		return nil, err
	}
	if hdr[0] != 0 {
		if lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("%w: IntercommCreate failed at the local leader (rank %d)", leaderErrs[hdr[0]], localLeader)
	}
	if !leader {
		remote = make([]int64, hdr[1])
	}
	if err := t.bcast(remote); err != nil {
		return nil, err
	}
	rg := make([]int32, len(remote))
	for i, w := range remote {
		rg[i] = int32(w)
	}
	k, err := c.r.agree(keyOf(c.id(), uint64(hdr[2]), agreeIntercomm, 0), 2, false,
		interRound(t, leader, x, remoteLeader, tag))
	if err != nil {
		return nil, err
	}
	return c.newInter(rg, k)
}

// checkPeer checks the leader's arguments and returns its transport to the other leader: peer's addressing on a
// side context of peer.
func (c *Comm) checkPeer(peer *Comm, remoteLeader, tag int) (*Comm, error) {
	switch {
	case peer == nil || peer.freed.Load():
		return nil, fmt.Errorf("%w: IntercommCreate: the peer communicator is nil or freed", ErrComm)
	case peer.r != c.r:
		return nil, fmt.Errorf("%w: IntercommCreate: the local leader (world rank %d) is not in the peer communicator",
			ErrComm, c.r.id)
	case remoteLeader < 0 || remoteLeader >= peer.peers():
		return nil, fmt.Errorf("%w: IntercommCreate: remote leader %d, peer communicator size %d", ErrRank,
			remoteLeader, peer.peers())
	case tag < 0 || tag > MaxTag:
		return nil, errTag(tag)
	}
	rw := peer.peerWorld(remoteLeader)
	for i := 0; i < c.size; i++ {
		if c.WorldRank(i) == rw {
			return nil, fmt.Errorf("%w: IntercommCreate: remote leader %d of the peer communicator is rank %d of the "+
				"local group (the groups must be disjoint)", ErrRank, remoteLeader, i)
		}
	}
	return peer.side((peer.ctx + 1) | sideCtx), nil
}

// exchangeGroups swaps the groups' world ranks and communicator ids between the leaders, and checks that the
// groups are disjoint.
func (c *Comm) exchangeGroups(x *Comm, remoteLeader, tag int) ([]int64, uint64, error) {
	mine := []int64{int64(c.size), int64(c.id())}
	theirs := make([]int64, 2)
	if _, err := x.Sendrecv(mine, remoteLeader, tag, theirs, remoteLeader, tag); err != nil {
		return nil, 0, err
	}
	if theirs[0] <= 0 || theirs[0] > int64(c.w.size) {
		return nil, 0, fmt.Errorf("%w: IntercommCreate: the remote leader announced a group of %d ranks", ErrInternal,
			theirs[0])
	}
	grp := make([]int64, c.size)
	in := make(map[int64]bool, c.size)
	for i := range grp {
		grp[i] = int64(c.WorldRank(i))
		in[grp[i]] = true
	}
	remote := make([]int64, theirs[0])
	if _, err := x.Sendrecv(grp, remoteLeader, tag, remote, remoteLeader, tag); err != nil {
		return nil, 0, err
	}
	for i, w := range remote {
		if w < 0 || w >= int64(c.w.size) {
			return nil, 0, fmt.Errorf("%w: IntercommCreate: remote rank %d is world rank %d", ErrInternal, i, w)
		}
		if in[w] {
			return nil, 0, fmt.Errorf("%w: IntercommCreate: world rank %d is in both groups (they must be disjoint)",
				ErrGroup, w)
		}
	}
	return remote, uint64(theirs[1]), nil
}

// interRound is a round of an agreement across two groups: each group reduces to its leader over t, the leaders
// swap their results through x (the other leader is peer there, under tag), and each leader broadcasts the
// combined result over t.
func interRound(t tree, leader bool, x *Comm, peer, tag int) roundFunc {
	return func(held bool, p int64) (bool, int64, error) {
		v, err := t.reduce(roundVec(held, p), combineRound)
		if err != nil {
			return false, 0, err
		}
		if leader {
			in := make([]int64, 2)
			if _, err := x.Sendrecv(v, peer, tag, in, peer, tag); err != nil {
				return false, 0, err
			}
			combineRound(v, in)
		}
		if err := t.bcast(v); err != nil {
			return false, 0, err
		}
		return v[0] == 1, v[1], nil
	}
}

// newInter makes the intercommunicator of c's group (as local group) and remote on context number k, with its
// local communicator on k+1.
func (c *Comm) newInter(remote []int32, k int64) (*Comm, error) {
	ctx, err := newCtx(k)
	if err != nil {
		return nil, err
	}
	lctx, err := newCtx(k + 1)
	if err != nil {
		return nil, err
	}
	local := &Comm{r: c.r, w: c.w, rank: c.rank, size: c.size, group: c.group, ctx: lctx}
	return &Comm{r: c.r, w: c.w, rank: c.rank, size: c.size, group: c.group, ctx: ctx, remote: remote, local: local}, nil
}

// leaderRound is the agreement round of an intercommunicator's two groups: over its local communicator, and
// between the rank 0s on its collective context.
func (c *Comm) leaderRound() (tree, roundFunc) {
	t := c.local.newTree(0)
	return t, interRound(t, c.rank == 0, c.Coll(), 0, tagGather)
}

func (c *Comm) dupInter() (*Comm, error) {
	_, round := c.leaderRound()
	k, err := c.r.agree(keyOf(c.id(), c.id(), agreeInter, 0), 2, false, round)
	if err != nil {
		return nil, err
	}
	return c.newInter(c.remote, k)
}

// Merge makes an intracommunicator of an intercommunicator's two groups (MPI_Intercomm_merge): collective over
// both. The group whose ranks pass high=false comes first; if both pass the same, the group holding the lower
// world rank 0 comes first. Each group's leader (rank 0) decides for its group. On an intracommunicator it is
// ErrComm.
func (c *Comm) Merge(high bool) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if !c.IsInter() {
		return nil, fmt.Errorf("%w: Merge of an intracommunicator", ErrComm)
	}
	t, round := c.leaderRound()
	hdr := []int64{0, 0} // the high of this group, of the other
	if high {
		hdr[0] = 1
	}
	if c.rank == 0 {
		if _, err := c.Coll().Sendrecv(hdr[:1], 0, tagBcast, hdr[1:], 0, tagBcast); err != nil {
			return nil, err
		}
	}
	if err := t.bcast(hdr); err != nil {
		return nil, err
	}
	first := hdr[0] < hdr[1] || (hdr[0] == hdr[1] && c.WorldRank(0) < int(c.remote[0]))
	k, err := c.r.agree(keyOf(c.id(), c.id(), agreeInter, 1), 1, false, round)
	if err != nil {
		return nil, err
	}
	ctx, err := newCtx(k)
	if err != nil {
		return nil, err
	}
	mine := c.Group()
	n := c.size + len(c.remote)
	m := &Comm{r: c.r, w: c.w, size: n, ctx: ctx, group: make([]int32, 0, n)}
	add := func(g *Group) {
		for i := 0; i < g.Size(); i++ {
			m.group = append(m.group, g.at(i))
		}
	}
	if first {
		add(mine)
		add(c.RemoteGroup())
		m.rank = c.rank
	} else {
		add(c.RemoteGroup())
		add(mine)
		m.rank = len(c.remote) + c.rank
	}
	return m, nil
}
