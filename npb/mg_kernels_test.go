package npb

import (
	"math"
	"math/rand"
	"testing"
)

// The MG operators are checked against their definitions written point by
// point: a 27-point stencil whose weight depends only on how many of the
// three offsets are non-zero (0: centre, 1: face, 2: edge, 3: corner).

func mgRandBlock(rng *rand.Rand, m [3]int) []float64 {
	a := make([]float64, m[0]*m[1]*m[2])
	for i := range a {
		a[i] = rng.Float64() - 0.5
	}
	return a
}

// mgStencil returns sum over the 27 neighbours of (i1, i2, i3) of
// w[class]*a[neighbour].
func mgStencil(a []float64, m [3]int, i1, i2, i3 int, w [4]float64) float64 {
	s := 0.0
	for d3 := -1; d3 <= 1; d3++ {
		for d2 := -1; d2 <= 1; d2++ {
			for d1 := -1; d1 <= 1; d1++ {
				cls := abs(d1) + abs(d2) + abs(d3)
				s += w[cls] * a[(i1+d1)+m[0]*((i2+d2)+m[1]*(i3+d3))]
			}
		}
	}
	return s
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func closeTo(got, want, scale float64) bool {
	return math.Abs(got-want) <= 1e-13*scale
}

var mgTestShapes = [][3]int{{3, 3, 3}, {4, 5, 6}, {10, 10, 10}, {18, 6, 34}, {7, 9, 4}}

func TestMGResidMatchesStencil(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	a := [4]float64{-8.0 / 3.0, 0, 1.0 / 6.0, 1.0 / 12.0}
	for _, m := range mgTestShapes {
		u, v := mgRandBlock(rng, m), mgRandBlock(rng, m)
		r := mgRandBlock(rng, m)
		ghosts := append([]float64(nil), r...)
		b := [3][]float64{make([]float64, m[0]), make([]float64, m[0]), make([]float64, m[0])}
		mgResid(u, v, r, m[0], m[1], m[2], &a, b[0], b[1], b[2])
		// in place (v and r the same slice) must give the same answer
		vr := append([]float64(nil), v...)
		mgResid(u, vr, vr, m[0], m[1], m[2], &a, b[0], b[1], b[2])
		forEachPoint(m, func(i1, i2, i3 int, interior bool) {
			k := i1 + m[0]*(i2+m[1]*i3)
			if !interior {
				if r[k] != ghosts[k] {
					t.Fatalf("%v: ghost (%d,%d,%d) written", m, i1, i2, i3)
				}
				return
			}
			want := v[k] - mgStencil(u, m, i1, i2, i3, a)
			if !closeTo(r[k], want, 10) || !closeTo(vr[k], want, 10) {
				t.Fatalf("%v (%d,%d,%d): got %v / %v, want %v", m, i1, i2, i3, r[k], vr[k], want)
			}
		})
	}
}

func TestMGPsinvMatchesStencil(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	c := [4]float64{-3.0 / 17.0, 1.0 / 33.0, -1.0 / 61.0, 0}
	for _, m := range mgTestShapes {
		r, u := mgRandBlock(rng, m), mgRandBlock(rng, m)
		u0 := append([]float64(nil), u...)
		b := [3][]float64{make([]float64, m[0]), make([]float64, m[0]), make([]float64, m[0])}
		mgPsinv(r, u, m[0], m[1], m[2], &c, b[0], b[1], b[2])
		forEachPoint(m, func(i1, i2, i3 int, interior bool) {
			k := i1 + m[0]*(i2+m[1]*i3)
			want := u0[k]
			if interior {
				want += mgStencil(r, m, i1, i2, i3, c)
			}
			if !closeTo(u[k], want, 10) {
				t.Fatalf("%v (%d,%d,%d): got %v, want %v", m, i1, i2, i3, u[k], want)
			}
		})
	}
}

func TestMGRprj3MatchesStencil(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	w := [4]float64{0.5, 0.25, 0.125, 0.0625}
	for _, mj := range [][3]int{{3, 3, 3}, {4, 5, 6}, {10, 10, 10}, {6, 18, 4}} {
		mk := [3]int{2*mj[0] - 2, 2*mj[1] - 2, 2*mj[2] - 2}
		r := mgRandBlock(rng, mk)
		s := mgRandBlock(rng, mj)
		s0 := append([]float64(nil), s...)
		mgRprj3(r, mk[0], mk[1], mk[2], s, mj[0], mj[1], mj[2])
		forEachPoint(mj, func(j1, j2, j3 int, interior bool) {
			k := j1 + mj[0]*(j2+mj[1]*j3)
			want := s0[k]
			if interior {
				want = mgStencil(r, mk, 2*j1, 2*j2, 2*j3, w)
			}
			if !closeTo(s[k], want, 10) {
				t.Fatalf("%v (%d,%d,%d): got %v, want %v", mj, j1, j2, j3, s[k], want)
			}
		})
	}
}

func TestMGInterpMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for _, mm := range [][3]int{{3, 3, 3}, {4, 5, 6}, {10, 10, 10}, {6, 18, 4}} {
		n := [3]int{2*mm[0] - 2, 2*mm[1] - 2, 2*mm[2] - 2}
		z := mgRandBlock(rng, mm)
		u := mgRandBlock(rng, n)
		u0 := append([]float64(nil), u...)
		want := append([]float64(nil), u...)
		// Fine point 2i+d (d = 0 or 1 per axis, i < mm-1) gets the mean
		// of the coarse points i+e, e in {0} (d = 0) or {0, 1} (d = 1).
		for i3 := 0; i3 < mm[2]-1; i3++ {
			for i2 := 0; i2 < mm[1]-1; i2++ {
				for i1 := 0; i1 < mm[0]-1; i1++ {
					for d := 0; d < 8; d++ {
						d1, d2, d3 := d&1, (d>>1)&1, d>>2
						sum, cnt := 0.0, 0
						for e3 := 0; e3 <= d3; e3++ {
							for e2 := 0; e2 <= d2; e2++ {
								for e1 := 0; e1 <= d1; e1++ {
									sum += z[(i1+e1)+mm[0]*((i2+e2)+mm[1]*(i3+e3))]
									cnt++
								}
							}
						}
						want[(2*i1+d1)+n[0]*((2*i2+d2)+n[1]*(2*i3+d3))] += sum / float64(cnt)
					}
				}
			}
		}
		set := append([]float64(nil), u...)
		mgInterp(z, mm[0], mm[1], mm[2], u, n[0], n[1], n[2], true)
		mgInterp(z, mm[0], mm[1], mm[2], set, n[0], n[1], n[2], false)
		for k := range u {
			if !closeTo(u[k], want[k], 10) {
				t.Fatalf("%v: element %d got %v, want %v", mm, k, u[k], want[k])
			}
			if !closeTo(set[k], want[k]-u0[k], 10) {
				t.Fatalf("%v: set: element %d got %v, want %v", mm, k, set[k], want[k]-u0[k])
			}
		}
	}
}

func forEachPoint(m [3]int, f func(i1, i2, i3 int, interior bool)) {
	for i3 := 0; i3 < m[2]; i3++ {
		for i2 := 0; i2 < m[1]; i2++ {
			for i1 := 0; i1 < m[0]; i1++ {
				in := i1 > 0 && i1 < m[0]-1 && i2 > 0 && i2 < m[1]-1 && i3 > 0 && i3 < m[2]-1
				f(i1, i2, i3, in)
			}
		}
	}
}

// BenchmarkMGKernels times each operator on a class A top-level block
// (258^3 with ghosts; 130^3 for the coarse side).
func BenchmarkMGKernels(b *testing.B) {
	rng := rand.New(rand.NewSource(5))
	m := [3]int{258, 258, 258}
	mc := [3]int{130, 130, 130}
	u, v, r := mgRandBlock(rng, m), mgRandBlock(rng, m), mgRandBlock(rng, m)
	zc := mgRandBlock(rng, mc)
	bufs := [3][]float64{make([]float64, m[0]), make([]float64, m[0]), make([]float64, m[0])}
	a := [4]float64{-8.0 / 3.0, 0, 1.0 / 6.0, 1.0 / 12.0}
	c := [4]float64{-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0}
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
		})
	}
	run("resid", func() { mgResid(u, v, r, m[0], m[1], m[2], &a, bufs[0], bufs[1], bufs[2]) })
	run("psinv", func() { mgPsinv(r, u, m[0], m[1], m[2], &c, bufs[0], bufs[1], bufs[2]) })
	run("rprj3", func() { mgRprj3(r, m[0], m[1], m[2], zc, mc[0], mc[1], mc[2]) })
	run("interp", func() { mgInterp(zc, mc[0], mc[1], mc[2], u, m[0], m[1], m[2], true) })
}
