package ranks

// Intercommunicators: two disjoint groups, each rank a member of one (its local group), talking to the other (its
// remote group). Point-to-point ranks name the remote group: a send to rank j goes to the remote group's rank j,
// and a message's Status.Source is the sender's rank in its own group. Rank and Size are the local group's.
//
// An intercommunicator has one context, agreed among both groups (agree.go), for its point-to-point and
// collective traffic, and a local intracommunicator of its own (the next context number) on which its collectives
// run their local phases. Collectives on intercommunicators live in package collectives.

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
