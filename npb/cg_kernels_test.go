package npb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCGMakeAMatchesReference checks the block-local matrix build against
// the straightforward one (every vector kept by every rank) on every rank
// of several process grids: same structure, bit-identical values.
func TestCGMakeAMatchesReference(t *testing.T) {
	for _, class := range []byte{'S', 'W'} {
		p, _ := cgParams(class)
		for _, np := range []int{1, 2, 4, 8, 32} {
			for me := 0; me < np; me++ {
				g := newCGGrid(p.na, np, me)
				got, want := cgMakeA(p, g), cgMakeARef(p, g)
				name := fmt.Sprintf("class %c np=%d rank %d", class, np, me)
				if !slices.Equal(got.rowstr, want.rowstr) || !slices.Equal(got.cols(), want.cols()) {
					t.Fatalf("%s: structure differs", name)
				}
				for k := range got.a {
					if math.Float64bits(got.a[k]) != math.Float64bits(want.a[k]) {
						t.Fatalf("%s: a[%d] = %v, want %v", name, k, got.a[k], want.a[k])
					}
				}
				if len(got.a) == 0 {
					t.Fatalf("%s: empty block", name)
				}
			}
		}
	}
}

// cgMakeARef is the original build (all vectors kept), the reference for
// TestCGMakeAMatchesReference. It builds the rank's block of NPB's CG matrix
//
//	A = sum_i size_i * v_i v_i^T + (rcond - shift) I,  size_i = rcond^((i-1)/n),
//
// where v_i is the i-th random sparse vector (with 0.5 at position i). The
// contributions to each element are summed in increasing i, the order NPB's
// makea uses, so the block is bit-identical to NPB's.
func cgMakeARef(p cgClass, g *cgGrid) *cgMatrix {
	n, nonzer := p.na, p.nonzer
	const a = uint64(RandA)
	tran := uint64(cgSeed)
	randlc46(&tran, a) // main program draws zeta first

	nn1 := 1
	for nn1 < n {
		nn1 *= 2
	}
	// The n sparse vectors, flat.
	vOff := make([]int, n+1)
	vCol := make([]int32, 0, n*(nonzer+1))
	vVal := make([]float64, 0, n*(nonzer+1))
	for i := 1; i <= n; i++ {
		start := len(vCol)
		for nzv := 0; nzv < nonzer; {
			vecelt := randlc46(&tran, a)
			vecloc := randlc46(&tran, a)
			col := int32(int(float64(nn1)*vecloc) + 1)
			if int(col) > n {
				continue
			}
			if slices.Contains(vCol[start:], col) {
				continue
			}
			vCol = append(vCol, col)
			vVal = append(vVal, vecelt)
			nzv++
		}
		// vecset: position i gets 0.5
		set := false
		for k := start; k < len(vCol); k++ {
			if int(vCol[k]) == i {
				vVal[k] = 0.5
				set = true
			}
		}
		if !set {
			vCol = append(vCol, int32(i))
			vVal = append(vVal, 0.5)
		}
		vOff[i] = len(vCol)
	}
	// vOff[i] is the end of vector i; its start is vOff[i-1] (vOff[0]=0).

	sizes := make([]float64, n+1)
	ratio := math.Pow(cgRcond, 1.0/float64(n))
	size := 1.0
	for i := 1; i <= n; i++ {
		sizes[i] = size
		size *= ratio
	}

	// For each local row j, the vectors i containing j, in increasing i,
	// with the position of j in vector i.
	nrows := g.lastrow - g.firstrow + 1
	cnt := make([]int, nrows+1)
	for k, col := range vCol {
		_ = k
		if int(col) >= g.firstrow && int(col) <= g.lastrow {
			cnt[int(col)-g.firstrow+1]++
		}
	}
	for j := 1; j <= nrows; j++ {
		cnt[j] += cnt[j-1]
	}
	fill := slices.Clone(cnt[:nrows])
	rowVec := make([]int32, cnt[nrows])
	rowPos := make([]int32, cnt[nrows])
	for i := 1; i <= n; i++ {
		for k := vOff[i-1]; k < vOff[i]; k++ {
			col := int(vCol[k])
			if col >= g.firstrow && col <= g.lastrow {
				r := col - g.firstrow
				rowVec[fill[r]] = int32(i)
				rowPos[fill[r]] = int32(k)
				fill[r]++
			}
		}
	}

	ncols := g.lastcol - g.firstcol + 1
	acc := make([]float64, ncols)
	mark := make([]int32, ncols)
	for i := range mark {
		mark[i] = -1
	}
	touched := make([]int32, 0, 4*(nonzer+1)*(nonzer+1))
	m := &cgMatrix{rowstr: make([]int, nrows+1), ncols: ncols}
	est := nrows * (nonzer + 1) * (nonzer + 1) * ncols / n
	m.col32 = make([]int32, 0, est+est/4)
	m.a = make([]float64, 0, est+est/4)
	for r := 0; r < nrows; r++ {
		j := r + g.firstrow
		touched = touched[:0]
		for t := cnt[r]; t < cnt[r+1]; t++ {
			i := int(rowVec[t])
			scale := sizes[i] * vVal[rowPos[t]]
			for k := vOff[i-1]; k < vOff[i]; k++ {
				jcol := int(vCol[k])
				if jcol < g.firstcol || jcol > g.lastcol {
					continue
				}
				va := vVal[k] * scale
				if jcol == j && j == i {
					va = va + cgRcond - p.shift
				}
				lc := jcol - g.firstcol
				if mark[lc] != int32(r) {
					mark[lc] = int32(r)
					acc[lc] = va
					touched = append(touched, int32(lc))
				} else {
					acc[lc] += va
				}
			}
		}
		slices.Sort(touched)
		for _, lc := range touched {
			m.col32 = append(m.col32, int32(lc))
			m.a = append(m.a, acc[lc])
		}
		m.rowstr[r+1] = len(m.col32)
	}
	return m
}

// TestCGMulMatchesPlainSum checks both index widths of the matrix-vector
// product against the plain row loop bit for bit, on NPB blocks and on
// random rows of every length from 0 to 40 (the unrolled loop's tails), and
// that a block takes 16-bit indices exactly when it is at most 1<<16 wide.
func TestCGMulMatchesPlainSum(t *testing.T) {
	plain := func(m *cgMatrix, p, w []float64) {
		cols := m.cols()
		for j := range w {
			s := 0.0
			for k := m.rowstr[j]; k < m.rowstr[j+1]; k++ {
				s += m.a[k] * p[cols[k]]
			}
			w[j] = s
		}
	}
	check := func(name string, m *cgMatrix) {
		t.Helper()
		nrows := len(m.rowstr) - 1
		p := m.newSource(m.ncols)
		for i := range p {
			p[i] = 1 + math.Sin(float64(i))/3
		}
		got, want := make([]float64, nrows), make([]float64, nrows)
		m.mul(p, got)
		plain(m, p, want)
		for j := range want {
			if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
				t.Fatalf("%s: row %d = %v, want %v", name, j, got[j], want[j])
			}
		}
	}
	for _, class := range []byte{'S', 'W'} {
		p, _ := cgParams(class)
		for _, np := range []int{1, 2, 8} {
			g := newCGGrid(p.na, np, np-1)
			m := cgMakeA(p, g)
			if m.col16 == nil || m.col32 != nil {
				t.Fatalf("class %c np=%d: a block %d wide did not take 16-bit indices", class, np, m.ncols)
			}
			check(fmt.Sprintf("class %c np=%d", class, np), m)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ncols := range []int{1, 300, cgNarrow, cgNarrow + 1, 3 * cgNarrow} {
		var rows [][]int32
		nnz := 0
		for n := 0; n <= 40; n++ {
			for rep := 0; rep < 3; rep++ {
				r := make([]int32, n)
				for k := range r {
					r[k] = int32(rng.IntN(ncols))
				}
				if rep == 0 {
					// the extreme columns
					for k := range r {
						r[k] = int32((ncols - 1) * (k % 2))
					}
				}
				rows = append(rows, r)
				nnz += n
			}
		}
		m := newCGMatrix(len(rows), ncols, nnz)
		if (m.col16 != nil) != (ncols <= cgNarrow) {
			t.Fatalf("%d columns: 16-bit indices %v", ncols, m.col16 != nil)
		}
		o := 0
		for j, r := range rows {
			for _, c := range r {
				m.setCol(o, c)
				m.a[o] = rng.NormFloat64()
				o++
			}
			m.rowstr[j+1] = o
		}
		check(fmt.Sprintf("random, %d columns", ncols), m)
	}
}

// BenchmarkCGMul times one matrix-vector product of rank 0's block of class
// A at two ranks (the CG kernel's inner loop), in ns per nonzero. For a
// figure that load does not move, count instructions instead:
//
//	CGO_ENABLED=0 go test -c -o /tmp/npb.test ./npb
//	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --toggle-collect='*cgMatrix*mul' \
//	    /tmp/npb.test -test.run '^$' -test.bench CGMul -test.benchtime 10x
func BenchmarkCGMul(b *testing.B) {
	p, _ := cgParams('A')
	g := newCGGrid(p.na, 2, 0)
	m := cgMakeA(p, g)
	src := m.newSource(m.ncols)
	for i := range src {
		src[i] = 1
	}
	w := make([]float64, len(m.rowstr)-1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.mul(src, w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(m.a)), "ns/nonzero")
}
