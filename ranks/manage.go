package ranks

import (
	"fmt"
	"math"
	"runtime"
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

// allgatherInts gathers every member's vector (all of equal length n) on the collective context: gather to rank 0,
// then rank 0 sends the whole table to everyone. Used only to create communicators.
func (c *Comm) allgatherInts(mine []int64) ([]int64, error) {
	n := len(mine)
	cc := c.Coll()
	all := make([]int64, n*c.size)
	if c.rank == 0 {
		copy(all, mine)
		for i := 1; i < c.size; i++ {
			if _, err := cc.Recv(all[i*n:(i+1)*n], i, tagGather); err != nil {
				return nil, err
			}
		}
		reqs := make([]*Request, 0, c.size-1)
		for i := 1; i < c.size; i++ {
			r, err := cc.Isend(all, i, tagBcast)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
		}
		if err := Waitall(reqs...); err != nil {
			return nil, err
		}
		return all, nil
	}
	if err := cc.Send(mine, 0, tagGather); err != nil {
		return nil, err
	}
	if _, err := cc.Recv(all, 0, tagBcast); err != nil {
		return nil, err
	}
	return all, nil
}

func (r *Rank) proposedCtx() int64 {
	r.ctxMu.Lock()
	defer r.ctxMu.Unlock()
	return int64(r.nextCtx)
}

// takeCtx records that context number k is used, so the next proposal is above it.
func (r *Rank) takeCtx(k int64) {
	r.ctxMu.Lock()
	if uint32(k)+1 > r.nextCtx {
		r.nextCtx = uint32(k) + 1
	}
	r.ctxMu.Unlock()
}

// newCtx turns an agreed context number into a context id pair (point-to-point 2k, collective 2k+1).
func newCtx(k int64) (uint32, error) {
	if k <= 0 || k >= math.MaxUint32/2 {
		return 0, fmt.Errorf("%w: out of communicator contexts", ErrComm)
	}
	return uint32(2 * k), nil
}

// Dup returns a new communicator with the same group, the same topology and a context of its own. Collective
// over c.
//
// Context agreement: every rank proposes the lowest context number it has not used; the group takes the largest
// proposal. A rank can never have two communicators with one context, and disjoint groups may share numbers
// harmlessly, so this needs no central allocator and works across node processes.
func (c *Comm) Dup() (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	all, err := c.allgatherInts([]int64{c.r.proposedCtx()})
	if err != nil {
		return nil, err
	}
	k := all[0]
	for _, v := range all {
		k = max(k, v)
	}
	c.r.takeCtx(k)
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
	return c.split(color, key, nil, nil)
}

// split is Split with extra values gathered beside each member's color, key and context proposal (every member
// passes as many): verify, if set, sees every member's extras (member i's at all[i*stride:], stride len(extra))
// and may refuse the call, which the topology constructors use to check that the members passed the same
// arguments. Every member sees the same table, so all of them fail alike, and nobody is left waiting.
func (c *Comm) split(color, key int, extra []int64, verify func(all []int64, stride int) error) (*Comm, error) {
	const fixed = 3
	stride := fixed + len(extra)
	all, err := c.allgatherInts(append([]int64{int64(color), int64(key), c.r.proposedCtx()}, extra...))
	if err != nil {
		return nil, err
	}
	k := int64(0)
	type member struct{ key, rank int }
	var mine []member
	for i := 0; i < c.size; i++ {
		k = max(k, all[stride*i+2])
		if int(all[stride*i]) == color {
			mine = append(mine, member{int(all[stride*i+1]), i})
		}
	}
	c.r.takeCtx(k)
	if verify != nil && len(extra) > 0 {
		ext := make([]int64, 0, len(extra)*c.size)
		for i := 0; i < c.size; i++ {
			ext = append(ext, all[stride*i+fixed:stride*(i+1)]...)
		}
		if err := verify(ext, len(extra)); err != nil {
			return nil, err
		}
	}
	if color == Undefined {
		return nil, nil
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
	return nil
}

// Group returns the world ranks of the communicator's members, in communicator order.
func (c *Comm) Group() []int {
	g := make([]int, c.size)
	for i := range g {
		g[i] = c.WorldRank(i)
	}
	return g
}
