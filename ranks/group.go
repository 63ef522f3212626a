package ranks

import (
	"fmt"
	"strings"
)

// Group is an ordered set of ranks, as MPI_Group: the ranks of a communicator (Comm.Group, Comm.RemoteGroup) and
// the groups made from them. A group is a local object of the rank that made it: its members are world ranks, its
// Rank is the caller's place in it. It never changes once made, so the goroutines of one rank may share it. A nil
// *Group is the empty group (MPI_GROUP_EMPTY).
type Group struct {
	m    []int32 // world ranks in group order; nil with n > 0 means 0..n-1 (the world's group, never copied)
	n    int
	me   int32 // the world rank of the rank that owns the group
	rank int   // me's place in the group, or Undefined
}

// Comparison is the result of comparing two groups or two communicators (MPI_IDENT, MPI_CONGRUENT, MPI_SIMILAR,
// MPI_UNEQUAL).
type Comparison int

const (
	// Ident: the same members in the same order (groups), or the very same communicator.
	Ident Comparison = iota
	// Congruent: communicators with the same group(s) in the same order but different contexts.
	Congruent
	// Similar: the same members in another order.
	Similar
	// Unequal: different members.
	Unequal
)

func (c Comparison) String() string {
	switch c {
	case Ident:
		return "Ident"
	case Congruent:
		return "Congruent"
	case Similar:
		return "Similar"
	case Unequal:
		return "Unequal"
	}
	return fmt.Sprintf("Comparison(%d)", int(c))
}

// newGroup makes the group of world ranks m (taken, not copied) owned by world rank me.
func newGroup(m []int32, me int) *Group {
	g := &Group{m: m, n: len(m), me: int32(me), rank: Undefined}
	for i, w := range m {
		if w == int32(me) {
			g.rank = i
			break
		}
	}
	return g
}

// Size is the number of members.
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return g.n
}

// Rank is the caller's rank in the group, or Undefined when it is not a member.
func (g *Group) Rank() int {
	if g == nil {
		return Undefined
	}
	return g.rank
}

// at is the world rank of member i.
func (g *Group) at(i int) int32 {
	if g.m == nil {
		return int32(i)
	}
	return g.m[i]
}

// WorldRanks returns the members' world ranks in group order (a copy).
func (g *Group) WorldRanks() []int {
	out := make([]int, g.Size())
	for i := range out {
		out[i] = int(g.at(i))
	}
	return out
}

func (g *Group) String() string {
	var b strings.Builder
	b.WriteString("Group[")
	for i := 0; i < g.Size(); i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, g.at(i))
	}
	b.WriteByte(']')
	return b.String()
}

// owner is the world rank whose group this is, for the groups made from it (-1 for the nil group: no member
// can be the caller).
func (g *Group) owner() int {
	if g == nil {
		return -1
	}
	return int(g.me)
}

// index maps each member's world rank to its place in g.
func (g *Group) index() map[int32]int {
	idx := make(map[int32]int, g.Size())
	for i := 0; i < g.Size(); i++ {
		idx[g.at(i)] = i
	}
	return idx
}

// checkRanks checks a list of distinct ranks of g (Incl, Excl): in range, no repeats.
func (g *Group) checkRanks(what string, ranks []int) error {
	seen := make([]bool, g.Size())
	for i, r := range ranks {
		if r < 0 || r >= g.Size() {
			return fmt.Errorf("%w: %s: ranks[%d] = %d, group size %d", ErrRank, what, i, r, g.Size())
		}
		if seen[r] {
			return fmt.Errorf("%w: %s: rank %d appears more than once", ErrRank, what, r)
		}
		seen[r] = true
	}
	return nil
}

// Incl returns the group of g's ranks listed, in that order (MPI_Group_incl). A rank out of range or listed twice
// is ErrRank. An empty list gives the empty group.
func (g *Group) Incl(ranks []int) (*Group, error) {
	if err := g.checkRanks("Incl", ranks); err != nil {
		return nil, err
	}
	m := make([]int32, len(ranks))
	for i, r := range ranks {
		m[i] = g.at(r)
	}
	return newGroup(m, g.owner()), nil
}

// Excl returns g without the ranks listed, in g's order (MPI_Group_excl). A rank out of range or listed twice is
// ErrRank.
func (g *Group) Excl(ranks []int) (*Group, error) {
	if err := g.checkRanks("Excl", ranks); err != nil {
		return nil, err
	}
	out := make([]bool, g.Size())
	for _, r := range ranks {
		out[r] = true
	}
	m := make([]int32, 0, g.Size()-len(ranks))
	for i := 0; i < g.Size(); i++ {
		if !out[i] {
			m = append(m, g.at(i))
		}
	}
	return newGroup(m, g.owner()), nil
}

// expandRanges lists the ranks of {first, last, stride} triplets: first, first+stride, ... up to last (MPI's
// ranges). Every rank must be in range and appear once; a zero stride, or one that walks away from last, is
// ErrRank (as Open MPI has it: the triplets name ranks).
func (g *Group) expandRanges(what string, ranges [][3]int) ([]int, error) {
	var ranks []int
	seen := make([]bool, g.Size())
	for i, rg := range ranges {
		first, last, stride := rg[0], rg[1], rg[2]
		switch {
		case stride == 0:
			return nil, fmt.Errorf("%w: %s: range %d %v has stride 0", ErrRank, what, i, rg)
		case first < 0 || first >= g.Size() || last < 0 || last >= g.Size():
			return nil, fmt.Errorf("%w: %s: range %d %v leaves the group of %d ranks", ErrRank, what, i, rg, g.Size())
		case (stride > 0 && first > last) || (stride < 0 && first < last):
			return nil, fmt.Errorf("%w: %s: range %d %v: stride %d never reaches %d from %d", ErrRank, what, i, rg,
				stride, last, first)
		}
		// Counted, not stepped with r += stride: that overflowed for a stride near math.MaxInt and went on with a
		// negative rank, an index out of range (a panic). k*stride stays within |last-first| here.
		for k, count := 0, (last-first)/stride+1; k < count; k++ {
			r := first + k*stride
			if seen[r] {
				return nil, fmt.Errorf("%w: %s: rank %d appears more than once (range %d %v)", ErrRank, what, r, i, rg)
			}
			seen[r] = true
			ranks = append(ranks, r)
		}
	}
	return ranks, nil
}

// RangeIncl is Incl of the ranks that {first, last, stride} triplets list, in order (MPI_Group_range_incl).
func (g *Group) RangeIncl(ranges [][3]int) (*Group, error) {
	ranks, err := g.expandRanges("RangeIncl", ranges)
	if err != nil {
		return nil, err
	}
	return g.Incl(ranks)
}

// RangeExcl is Excl of the ranks that {first, last, stride} triplets list (MPI_Group_range_excl).
func (g *Group) RangeExcl(ranges [][3]int) (*Group, error) {
	ranks, err := g.expandRanges("RangeExcl", ranges)
	if err != nil {
		return nil, err
	}
	return g.Excl(ranks)
}

// setOp keeps, in order, g's members for which keep(in h) holds, then (union) h's members not in g.
func (g *Group) setOp(h *Group, keep bool, union bool) *Group {
	hidx := h.index()
	var m []int32
	for i := 0; i < g.Size(); i++ {
		if _, in := hidx[g.at(i)]; in == keep || union {
			m = append(m, g.at(i))
		}
	}
	if union {
		gidx := g.index()
		for i := 0; i < h.Size(); i++ {
			if _, in := gidx[h.at(i)]; !in {
				m = append(m, h.at(i))
			}
		}
	}
	me := g.owner()
	if me < 0 {
		me = h.owner()
	}
	return newGroup(m, me)
}

// Union returns g's members, then h's members not in g, in order (MPI_Group_union).
func (g *Group) Union(h *Group) *Group { return g.setOp(h, true, true) }

// Intersection returns g's members that are also in h, in g's order (MPI_Group_intersection).
func (g *Group) Intersection(h *Group) *Group { return g.setOp(h, true, false) }

// Difference returns g's members that are not in h, in g's order (MPI_Group_difference).
func (g *Group) Difference(h *Group) *Group { return g.setOp(h, false, false) }

// TranslateRanks maps ranks of g to the ranks of the same members in to: Undefined where a member is not in to,
// ProcNull for ProcNull (MPI_Group_translate_ranks). A rank out of g's range is ErrRank.
func (g *Group) TranslateRanks(ranks []int, to *Group) ([]int, error) {
	out := make([]int, len(ranks))
	var tidx map[int32]int
	for i, r := range ranks {
		switch {
		case r == ProcNull:
			out[i] = ProcNull
			continue
		case r < 0 || r >= g.Size():
			return nil, fmt.Errorf("%w: TranslateRanks: ranks[%d] = %d, group size %d", ErrRank, i, r, g.Size())
		}
		if tidx == nil {
			tidx = to.index()
		}
		if j, ok := tidx[g.at(r)]; ok {
			out[i] = j
		} else {
			out[i] = Undefined
		}
	}
	return out, nil
}

// Compare says whether g and h have the same members in the same order (Ident), in another order (Similar), or not
// the same members (Unequal).
func (g *Group) Compare(h *Group) Comparison {
	if g.Size() != h.Size() {
		return Unequal
	}
	same := true
	for i := 0; i < g.Size() && same; i++ {
		same = g.at(i) == h.at(i)
	}
	if same {
		return Ident
	}
	hidx := h.index()
	for i := 0; i < g.Size(); i++ {
		if _, ok := hidx[g.at(i)]; !ok {
			return Unequal
		}
	}
	return Similar // equal sizes, members distinct, every one of g's in h
}

// Group returns the communicator's group (the local group of an intercommunicator), with the caller's rank.
func (c *Comm) Group() *Group {
	g := &Group{m: c.group, n: c.size, me: int32(c.r.id), rank: c.rank}
	return g
}

// RemoteGroup returns an intercommunicator's remote group (nil, the empty group, on an intracommunicator).
func (c *Comm) RemoteGroup() *Group {
	if c == nil || c.remote == nil {
		return nil
	}
	return &Group{m: c.remote, n: len(c.remote), me: int32(c.r.id), rank: Undefined}
}

// Compare compares two communicators: Ident for the same communicator, Congruent for the same group(s) in the
// same order under another context, Similar for the same members in another order, else Unequal. An
// intercommunicator and an intracommunicator are Unequal; two intercommunicators compare both groups.
func (c *Comm) Compare(d *Comm) Comparison {
	if c == nil || d == nil {
		return Unequal
	}
	if c.IsInter() != d.IsInter() {
		return Unequal
	}
	if c == d || (c.r == d.r && c.ctx == d.ctx) {
		return Ident // a rank's contexts are its own and unique to one communicator each
	}
	res := c.Group().Compare(d.Group())
	if c.IsInter() {
		res = max(res, c.RemoteGroup().Compare(d.RemoteGroup()))
	}
	switch res {
	case Ident:
		return Congruent
	case Similar:
		return Similar
	}
	return Unequal
}
