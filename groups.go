package gompj

import "github.com/gompj/gompj/ranks"

// Group is an ordered set of ranks (MPI_Group), local to the rank that made it. A nil *Group is the empty group.
type Group = ranks.Group

// Comparison is the result of Group.Compare and Comm.Compare.
type Comparison = ranks.Comparison

// Results of Group.Compare and Comm.Compare.
const (
	Ident     = ranks.Ident     // the same members in the same order; for communicators, the same communicator
	Congruent = ranks.Congruent // communicators: the same group(s) in the same order, another context
	Similar   = ranks.Similar   // the same members in another order
	Unequal   = ranks.Unequal   // different members
)

// Root is the root's own root argument in an intercommunicator collective (MPI_ROOT); the other ranks of its
// group pass ProcNull, and the other group passes the root's rank in its remote group.
const Root = ranks.Root

// ErrGroup is the class of errors about groups: a group that is not a subgroup of the communicator, a caller of
// CreateGroup outside the group, groups of an intercommunicator that overlap.
var ErrGroup = ranks.ErrGroup

// Group returns the communicator's group (an intercommunicator's local group).
func (c *Comm) Group() *Group { return c.rc().Group() }

// Compare compares two communicators: Ident (the same one), Congruent (the same group(s) in the same order),
// Similar (the same members in another order) or Unequal.
func (c *Comm) Compare(d *Comm) Comparison {
	if d == nil {
		return Unequal
	}
	return c.rc().Compare(d.c)
}

// Create returns the communicator of g, a subgroup of c (MPI_Comm_create). Collective over c; ranks outside g get
// nil, nil.
func (c *Comm) Create(g *Group) (*Comm, error) {
	n, err := c.call(ranks.CallComm, 0).Create(g)
	return wrap(n), err
}

// CreateGroup returns the communicator of g, a subgroup of c; only the members of g call it
// (MPI_Comm_create_group). Concurrent calls over overlapping groups need distinct tags.
func (c *Comm) CreateGroup(g *Group, tag int) (*Comm, error) {
	n, err := c.rc().CreateGroup(g, tag)
	return wrap(n), err
}

// IntercommCreate makes an intercommunicator between c's group and another, disjoint group
// (MPI_Intercomm_create): localLeader is the group's leader in c; at the leader, peer is a communicator holding
// both leaders and remoteLeader the other leader's rank in it; tag keeps the leaders' messages apart.
func (c *Comm) IntercommCreate(localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	var p *ranks.Comm
	if peer != nil {
		p = peer.c
	}
	n, err := c.rc().IntercommCreate(localLeader, p, remoteLeader, tag)
	return wrap(n), err
}

// IsInter reports whether c is an intercommunicator.
func (c *Comm) IsInter() bool { return c.rc().IsInter() }

// RemoteSize is the size of an intercommunicator's remote group (0 on an intracommunicator).
func (c *Comm) RemoteSize() int { return c.rc().RemoteSize() }

// RemoteGroup returns an intercommunicator's remote group (nil on an intracommunicator).
func (c *Comm) RemoteGroup() *Group { return c.rc().RemoteGroup() }

// Merge makes an intracommunicator of an intercommunicator's two groups (MPI_Intercomm_merge); the group passing
// high=false comes first.
func (c *Comm) Merge(high bool) (*Comm, error) {
	m, err := c.rc().Merge(high)
	return wrap(m), err
}
