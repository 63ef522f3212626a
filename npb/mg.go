package npb

import (
	"fmt"
	"math"
	"sort"

	"github.com/gompj/gompj"
)

// MG: four (class S, W, A) or twenty (B, C) V-cycles of a multigrid solver
// for the 3-D Poisson equation on a periodic grid. The grid is split over a
// px x py x pz process grid chosen as NPB's MPI MG does; every operator is
// followed by a halo exchange with the six neighbours (comm3). On levels
// coarser than the process grid (fewer points than ranks along an axis)
// the residual is gathered with Allgather and the coarse part of the cycle
// is done redundantly on every rank, point for point as the serial code.

const (
	mgSeed = 314159265
	mgEps  = 1e-8
	mgLB   = 1 // coarsest level: 2 points per axis
	tagMG  = 300
)

type mgClass struct {
	n, nit int
	verify float64
}

func mgParams(class byte) (mgClass, bool) {
	switch class {
	case 'S':
		return mgClass{32, 4, 0.5307707005734e-04}, true
	case 'W':
		return mgClass{128, 4, 0.6467329375339e-05}, true
	case 'A':
		return mgClass{256, 4, 0.2433365309069e-05}, true
	case 'B':
		return mgClass{256, 20, 0.1800564401355e-05}, true
	case 'C':
		return mgClass{512, 20, 0.5706732285740e-06}, true
	}
	return mgClass{}, false
}

// mgProcGrid is NPB's split of np = 2^l ranks: px = 2^(l/3), py = 2^((l-l/3)/2), pz the rest.
func mgProcGrid(np int) [3]int {
	l := log2int(np)
	dx := l / 3
	dy := (l - dx) / 2
	px, py := 1<<dx, 1<<dy
	return [3]int{px, py, np / (px * py)}
}

// mgLevel is one grid level: a block with ghosts, distributed or (for
// gathered coarse levels) the whole grid.
type mgLevel struct {
	m      [3]int // block size with ghosts
	u, r   []float64
	serial bool // whole periodic grid held locally
}

type mgRank struct {
	c      *gompj.Comm
	p      mgClass
	np, me int
	pg     [3]int // process grid
	coord  [3]int
	lo, hi [3]int // neighbour ranks per axis
	lt, kc int    // finest level; coarsest distributed level
	lv     []*mgLevel
	glv    []*mgLevel // gathered levels mgLB..kc (nil if none)
	v      []float64
	a, cc  [4]float64

	l1, l2, l3          []float64 // row buffers for resid and psinv
	sendLo, sendHi      []float64
	recvLo, recvHi      []float64
	gatherIn, gatherOut []float64
	cand, candAll       []float64
}

func newMGRank(c *gompj.Comm, class byte, p mgClass) (*mgRank, error) {
	np := c.Size()
	g := &mgRank{c: c, p: p, np: np, me: c.Rank(), pg: mgProcGrid(np)}
	g.lt = log2int(p.n)
	maxp := max(g.pg[0], g.pg[1], g.pg[2])
	g.kc = max(mgLB, log2int(maxp))
	if g.kc >= g.lt {
		return nil, fmt.Errorf("%w: MG class %c with %d ranks (grid %v) is finer than the problem", ErrProcs, class, np, g.pg)
	}
	g.coord = [3]int{g.me % g.pg[0], (g.me / g.pg[0]) % g.pg[1], g.me / (g.pg[0] * g.pg[1])}
	for ax := 0; ax < 3; ax++ {
		cl, ch := g.coord, g.coord
		cl[ax] = (cl[ax] - 1 + g.pg[ax]) % g.pg[ax]
		ch[ax] = (ch[ax] + 1) % g.pg[ax]
		g.lo[ax] = g.rankOf(cl)
		g.hi[ax] = g.rankOf(ch)
	}
	g.a = [4]float64{-8.0 / 3.0, 0, 1.0 / 6.0, 1.0 / 12.0}
	if class == 'S' || class == 'W' || class == 'A' {
		g.cc = [4]float64{-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0}
	} else {
		g.cc = [4]float64{-3.0 / 17.0, 1.0 / 33.0, -1.0 / 61.0, 0}
	}
	g.lv = make([]*mgLevel, g.lt+1)
	for k := g.kc; k <= g.lt; k++ {
		n := 1 << k
		l := &mgLevel{}
		for ax := 0; ax < 3; ax++ {
			l.m[ax] = n/g.pg[ax] + 2
		}
		size := l.m[0] * l.m[1] * l.m[2]
		l.u = make([]float64, size)
		if k < g.lt {
			l.r = make([]float64, size)
		}
		g.lv[k] = l
	}
	top := g.lv[g.lt]
	top.r = make([]float64, len(top.u))
	g.v = make([]float64, len(top.u))
	if g.kc > mgLB {
		g.glv = make([]*mgLevel, g.kc+1)
		for k := mgLB; k <= g.kc; k++ {
			m := (1 << k) + 2
			g.glv[k] = &mgLevel{m: [3]int{m, m, m}, u: make([]float64, m*m*m), r: make([]float64, m*m*m), serial: true}
		}
		kl := g.lv[g.kc]
		blk := (kl.m[0] - 2) * (kl.m[1] - 2) * (kl.m[2] - 2)
		g.gatherIn = make([]float64, blk)
		g.gatherOut = make([]float64, blk*np)
	}
	tm := top.m
	row := max(tm[0], (1<<g.kc)+2) // longest row of any level, gathered ones included
	g.l1 = make([]float64, row)
	g.l2 = make([]float64, row)
	g.l3 = make([]float64, row)
	face := max(tm[1]*tm[2], tm[0]*tm[2], tm[0]*tm[1])
	g.sendLo, g.sendHi = make([]float64, face), make([]float64, face)
	g.recvLo, g.recvHi = make([]float64, face), make([]float64, face)
	g.cand = make([]float64, 40)
	g.candAll = make([]float64, 40*np)
	return g, nil
}

func (g *mgRank) rankOf(c [3]int) int {
	return c[0] + g.pg[0]*(c[1]+g.pg[1]*c[2])
}

// comm3 refreshes the ghosts of u (a block of level l) axis by axis.
func (g *mgRank) comm3(u []float64, l *mgLevel) error {
	m1, m2, m3 := l.m[0], l.m[1], l.m[2]
	pl := m1 * m2
	for ax := 0; ax < 3; ax++ {
		if l.serial || g.pg[ax] == 1 {
			mgPeriodic(u, m1, m2, m3, ax)
			continue
		}
		var n int
		switch ax {
		case 0:
			for i3 := 1; i3 < m3-1; i3++ {
				for i2 := 1; i2 < m2-1; i2++ {
					o := m1*i2 + pl*i3
					g.sendLo[n] = u[o+1]
					g.sendHi[n] = u[o+m1-2]
					n++
				}
			}
		case 1:
			for i3 := 1; i3 < m3-1; i3++ {
				o := pl * i3
				copy(g.sendLo[n:n+m1], u[o+m1:o+2*m1])
				copy(g.sendHi[n:n+m1], u[o+(m2-2)*m1:o+(m2-1)*m1])
				n += m1
			}
		case 2:
			copy(g.sendLo[:pl], u[pl:2*pl])
			copy(g.sendHi[:pl], u[(m3-2)*pl:(m3-1)*pl])
			n = pl
		}
		tLo, tHi := tagMG+2*ax, tagMG+2*ax+1
		rLo, err := g.c.Irecv(g.recvLo[:n], g.lo[ax], tLo)
		if err != nil {
			return err
		}
		rHi, err := g.c.Irecv(g.recvHi[:n], g.hi[ax], tHi)
		if err != nil {
			return err
		}
		sHi, err := g.c.Isend(g.sendHi[:n], g.hi[ax], tLo)
		if err != nil {
			return err
		}
		sLo, err := g.c.Isend(g.sendLo[:n], g.lo[ax], tHi)
		if err != nil {
			return err
		}
		if err := gompj.Waitall(rLo, rHi, sHi, sLo); err != nil {
			return err
		}
		n = 0
		switch ax {
		case 0:
			for i3 := 1; i3 < m3-1; i3++ {
				for i2 := 1; i2 < m2-1; i2++ {
					o := m1*i2 + pl*i3
					u[o] = g.recvLo[n]
					u[o+m1-1] = g.recvHi[n]
					n++
				}
			}
		case 1:
			for i3 := 1; i3 < m3-1; i3++ {
				o := pl * i3
				copy(u[o:o+m1], g.recvLo[n:n+m1])
				copy(u[o+(m2-1)*m1:o+m2*m1], g.recvHi[n:n+m1])
				n += m1
			}
		case 2:
			copy(u[0:pl], g.recvLo[:pl])
			copy(u[(m3-1)*pl:m3*pl], g.recvHi[:pl])
		}
	}
	return nil
}

func (g *mgRank) resid(u, v, r []float64, l *mgLevel) error {
	mgResid(u, v, r, l.m[0], l.m[1], l.m[2], &g.a, g.l1, g.l2, g.l3)
	return g.comm3(r, l)
}

func (g *mgRank) psinv(r, u []float64, l *mgLevel) error {
	mgPsinv(r, u, l.m[0], l.m[1], l.m[2], &g.cc, g.l1, g.l2, g.l3)
	return g.comm3(u, l)
}

func (g *mgRank) rprj3(fine, coarse *mgLevel) error {
	mgRprj3(fine.r, fine.m[0], fine.m[1], fine.m[2], coarse.r, coarse.m[0], coarse.m[1], coarse.m[2])
	return g.comm3(coarse.r, coarse)
}

// interp adds the interpolation of coarse.u to fine.u, or with add false
// sets fine.u to it (NPB zeroes the level first).
func (g *mgRank) interp(coarse, fine *mgLevel, add bool) error {
	mgInterp(coarse.u, coarse.m[0], coarse.m[1], coarse.m[2], fine.u, fine.m[0], fine.m[1], fine.m[2], add)
	return g.comm3(fine.u, fine)
}

func zero(a []float64) {
	for i := range a {
		a[i] = 0
	}
}

// coarseCycle does the levels up to and including kc on the gathered grid,
// then hands this rank its block of the level-kc correction.
func (g *mgRank) coarseCycle() error {
	kl := g.lv[g.kc]
	m1, m2, m3 := kl.m[0], kl.m[1], kl.m[2]
	n := 0
	for i3 := 1; i3 < m3-1; i3++ {
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + m1*m2*i3
			n += copy(g.gatherIn[n:], kl.r[o+1:o+m1-1])
		}
	}
	if err := g.c.Allgather(g.gatherIn, g.gatherOut); err != nil {
		return err
	}
	gl := g.glv[g.kc]
	gm := gl.m[0]
	L := [3]int{m1 - 2, m2 - 2, m3 - 2}
	for b := 0; b < g.np; b++ {
		bc := [3]int{b % g.pg[0], (b / g.pg[0]) % g.pg[1], b / (g.pg[0] * g.pg[1])}
		src := g.gatherOut[b*len(g.gatherIn):]
		s := 0
		for i3 := 0; i3 < L[2]; i3++ {
			for i2 := 0; i2 < L[1]; i2++ {
				o := (bc[0]*L[0] + 1) + gm*((bc[1]*L[1]+i2+1)+gm*(bc[2]*L[2]+i3+1))
				copy(gl.r[o:o+L[0]], src[s:s+L[0]])
				s += L[0]
			}
		}
	}
	for ax := 0; ax < 3; ax++ {
		mgPeriodic(gl.r, gm, gm, gm, ax)
	}
	for k := g.kc; k > mgLB; k-- {
		if err := g.rprj3(g.glv[k], g.glv[k-1]); err != nil {
			return err
		}
	}
	b := g.glv[mgLB]
	zero(b.u)
	if err := g.psinv(b.r, b.u, b); err != nil {
		return err
	}
	for k := mgLB + 1; k <= g.kc; k++ {
		l := g.glv[k]
		if err := g.interp(g.glv[k-1], l, false); err != nil {
			return err
		}
		if err := g.resid(l.u, l.r, l.r, l); err != nil {
			return err
		}
		if err := g.psinv(l.r, l.u, l); err != nil {
			return err
		}
	}
	// This rank's block of u with ghosts: global index (with ghost offset
	// 1) off+i for local i in [0, L+1].
	for i3 := 0; i3 < m3; i3++ {
		for i2 := 0; i2 < m2; i2++ {
			o := g.coord[0]*L[0] + gm*((g.coord[1]*L[1]+i2)+gm*(g.coord[2]*L[2]+i3))
			lo := m1 * (i2 + m2*i3)
			copy(kl.u[lo:lo+m1], gl.u[o:o+m1])
		}
	}
	return nil
}

// mg3P is one V-cycle.
func (g *mgRank) mg3P() error {
	for k := g.lt; k > g.kc; k-- {
		if err := g.rprj3(g.lv[k], g.lv[k-1]); err != nil {
			return err
		}
	}
	if g.kc > mgLB {
		if err := g.coarseCycle(); err != nil {
			return err
		}
	} else {
		b := g.lv[mgLB]
		zero(b.u)
		if err := g.psinv(b.r, b.u, b); err != nil {
			return err
		}
	}
	for k := g.kc + 1; k < g.lt; k++ {
		l := g.lv[k]
		if err := g.interp(g.lv[k-1], l, false); err != nil {
			return err
		}
		if err := g.resid(l.u, l.r, l.r, l); err != nil {
			return err
		}
		if err := g.psinv(l.r, l.u, l); err != nil {
			return err
		}
	}
	top := g.lv[g.lt]
	if err := g.interp(g.lv[g.lt-1], top, true); err != nil {
		return err
	}
	if err := g.resid(top.u, g.v, top.r, top); err != nil {
		return err
	}
	return g.psinv(top.r, top.u, top)
}

// norm2u3 returns the L2 norm (root mean square) and the max norm of the
// interior of r over all ranks.
func (g *mgRank) norm2u3(r []float64, l *mgLevel) (float64, float64, error) {
	m1, m2, m3 := l.m[0], l.m[1], l.m[2]
	s, mx := 0.0, 0.0
	for i3 := 1; i3 < m3-1; i3++ {
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + m1*m2*i3
			for _, x := range r[o+1 : o+m1-1] {
				s += x * x
				if a := math.Abs(x); a > mx {
					mx = a
				}
			}
		}
	}
	in := []float64{s}
	out := []float64{0}
	if err := g.c.Allreduce(in, out, gompj.Sum); err != nil {
		return 0, 0, err
	}
	in[0] = mx
	mxg := []float64{0}
	if err := g.c.Allreduce(in, mxg, gompj.Max); err != nil {
		return 0, 0, err
	}
	n := float64(g.p.n)
	return math.Sqrt(out[0] / (n * n * n)), mxg[0], nil
}

// zran3 sets v to zero except +1 at the ten largest and -1 at the ten
// smallest of the NPB random field on the fine grid; the value at global
// (x, y, z) is deviate x + n*(y + n*z) + 1 of the sequence.
func (g *mgRank) zran3() error {
	top := g.lv[g.lt]
	m1, m2, m3 := top.m[0], top.m[1], top.m[2]
	L := [3]int{m1 - 2, m2 - 2, m3 - 2}
	n := g.p.n
	off := [3]int{g.coord[0] * L[0], g.coord[1] * L[1], g.coord[2] * L[2]}
	zero(g.v)
	const a = uint64(RandA)
	for i3 := 1; i3 < m3-1; i3++ {
		for i2 := 1; i2 < m2-1; i2++ {
			lin := off[0] + n*((off[1]+i2-1)+n*(off[2]+i3-1))
			s := skip46(mgSeed, a, int64(lin))
			o := m1*i2 + m1*m2*i3
			vranlc46(s, a, g.v[o+1:o+m1-1])
		}
	}
	// Ten largest and ten smallest, kept sorted: best first.
	const mm = 10
	type cand = mgCand
	big := make([]cand, 0, mm+1)
	small := make([]cand, 0, mm+1)
	for i3 := 1; i3 < m3-1; i3++ {
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + m1*m2*i3
			for i1 := 1; i1 < m1-1; i1++ {
				x := g.v[o+i1]
				if len(big) < mm || x > big[mm-1].val {
					lin := float64((off[0] + i1 - 1) + n*((off[1]+i2-1)+n*(off[2]+i3-1)))
					big = insertCand(big, cand{x, lin}, mm, func(p, q float64) bool { return p > q })
				}
				if len(small) < mm || x < small[mm-1].val {
					lin := float64((off[0] + i1 - 1) + n*((off[1]+i2-1)+n*(off[2]+i3-1)))
					small = insertCand(small, cand{x, lin}, mm, func(p, q float64) bool { return p < q })
				}
			}
		}
	}
	for i := 0; i < mm; i++ {
		g.cand[i], g.cand[mm+i] = math.Inf(-1), -1
		g.cand[2*mm+i], g.cand[3*mm+i] = math.Inf(1), -1
		if i < len(big) {
			g.cand[i], g.cand[mm+i] = big[i].val, big[i].idx
		}
		if i < len(small) {
			g.cand[2*mm+i], g.cand[3*mm+i] = small[i].val, small[i].idx
		}
	}
	if err := g.c.Allgather(g.cand, g.candAll); err != nil {
		return err
	}
	var allBig, allSmall []cand
	for b := 0; b < g.np; b++ {
		cb := g.candAll[b*4*mm:]
		for i := 0; i < mm; i++ {
			if cb[mm+i] >= 0 {
				allBig = append(allBig, cand{cb[i], cb[mm+i]})
			}
			if cb[3*mm+i] >= 0 {
				allSmall = append(allSmall, cand{cb[2*mm+i], cb[3*mm+i]})
			}
		}
	}
	sort.SliceStable(allBig, func(i, j int) bool { return allBig[i].val > allBig[j].val })
	sort.SliceStable(allSmall, func(i, j int) bool { return allSmall[i].val < allSmall[j].val })
	zero(g.v)
	set := func(lin int, val float64) {
		x, y, z := lin%n-off[0], (lin/n)%n-off[1], lin/(n*n)-off[2]
		if x >= 0 && x < L[0] && y >= 0 && y < L[1] && z >= 0 && z < L[2] {
			g.v[(x+1)+m1*((y+1)+m2*(z+1))] = val
		}
	}
	for i := 0; i < mm && i < len(allSmall); i++ {
		set(int(allSmall[i].idx), -1)
	}
	for i := 0; i < mm && i < len(allBig); i++ {
		set(int(allBig[i].idx), 1)
	}
	return g.comm3(g.v, top)
}

type mgCand struct{ val, idx float64 }

// insertCand inserts c into the sorted list l (better first), keeping at
// most mm entries.
func insertCand(l []mgCand, c mgCand, mm int, better func(p, q float64) bool) []mgCand {
	i := len(l)
	for i > 0 && better(c.val, l[i-1].val) {
		i--
	}
	if i >= mm {
		return l
	}
	l = append(l, mgCand{})
	copy(l[i+1:], l[i:])
	l[i] = c
	if len(l) > mm {
		l = l[:mm]
	}
	return l
}

// RunMG runs the MG kernel; the number of ranks must be a power of two.
func RunMG(c *gompj.Comm, class byte) (*Result, error) {
	p, ok := mgParams(class)
	if !ok {
		return nil, badClass("MG", class)
	}
	np := c.Size()
	if err := needPow2("MG", np); err != nil {
		return nil, err
	}
	g, err := newMGRank(c, class, p)
	if err != nil {
		return nil, err
	}
	top := g.lv[g.lt]
	// Untimed start-up iteration, then a fresh start, as NPB does.
	zero(top.u)
	if err := g.zran3(); err != nil {
		return nil, err
	}
	if err := g.resid(top.u, g.v, top.r, top); err != nil {
		return nil, err
	}
	if err := g.mg3P(); err != nil {
		return nil, err
	}
	if err := g.resid(top.u, g.v, top.r, top); err != nil {
		return nil, err
	}
	zero(top.u)
	if err := g.zran3(); err != nil {
		return nil, err
	}

	if err := c.Barrier(); err != nil {
		return nil, err
	}
	t0 := gompj.Wtime()
	if err := g.resid(top.u, g.v, top.r, top); err != nil {
		return nil, err
	}
	if _, _, err := g.norm2u3(top.r, top); err != nil {
		return nil, err
	}
	for it := 1; it <= p.nit; it++ {
		if err := g.mg3P(); err != nil {
			return nil, err
		}
		if err := g.resid(top.u, g.v, top.r, top); err != nil {
			return nil, err
		}
	}
	rnm2, _, err := g.norm2u3(top.r, top)
	if err != nil {
		return nil, err
	}
	elapsed := gompj.Wtime() - t0

	n := float64(p.n)
	res := &Result{
		Kernel: "MG", Class: class,
		Size:       fmt.Sprintf("%dx%dx%d", p.n, p.n, p.n),
		Iterations: p.nit,
		OpType:     "floating point",
		Checks:     []Check{{Name: "L2 norm", Computed: rnm2, Reference: p.verify, Tolerance: mgEps}},
	}
	if err := finish(c, res, elapsed, 58*float64(p.nit)*n*n*n); err != nil {
		return nil, err
	}
	return res, nil
}
