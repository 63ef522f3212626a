package ranks

import (
	"errors"
	"math/big"
	"math/bits"
	"math/rand"
	"slices"
	"testing"
)

// allFactorings lists every non-increasing k-tuple of factors of m with product m.
func allFactorings(m, k, limit int) [][]int {
	if k == 0 {
		if m == 1 {
			return [][]int{{}}
		}
		return nil
	}
	var out [][]int
	for f := min(m, limit); f >= 1; f-- {
		if m%f != 0 {
			continue
		}
		for _, rest := range allFactorings(m/f, k-1, f) {
			out = append(out, append([]int{f}, rest...))
		}
	}
	return out
}

// TestDimsCreateRules checks DimsCreate against MPI's rules by brute force: the product is nnodes, fixed entries
// are kept, the filled ones are non-increasing and the most balanced (lexicographically smallest, largest first)
// of all the factorings.
func TestDimsCreateRules(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 1; n <= 400; n++ {
		for k := 0; k <= 5; k++ {
			dims := make([]int, k)
			if k > 0 && rng.Intn(3) == 0 { // fix one entry to a divisor of n, sometimes
				dims[rng.Intn(k)] = divisors(n)[rng.Intn(len(divisors(n)))]
			}
			got, err := DimsCreate(n, dims)
			fixed, free := 1, 0
			for _, d := range dims {
				if d == 0 {
					free++
				} else {
					fixed *= d
				}
			}
			if free == 0 && fixed != n {
				if !errors.Is(err, ErrDims) {
					t.Fatalf("DimsCreate(%d, %v) = %v, %v; want ErrDims", n, dims, got, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("DimsCreate(%d, %v): %v", n, dims, err)
			}
			prod := 1
			var filled []int
			for i, d := range got {
				prod *= d
				if dims[i] != 0 && d != dims[i] {
					t.Fatalf("DimsCreate(%d, %v) = %v changed a fixed entry", n, dims, got)
				}
				if dims[i] == 0 {
					filled = append(filled, d)
				}
			}
			if prod != n || len(got) != k {
				t.Fatalf("DimsCreate(%d, %v) = %v: product %d", n, dims, got, prod)
			}
			all := allFactorings(n/fixed, free, n)
			best := all[0]
			for _, f := range all {
				if slices.Compare(f, best) < 0 {
					best = f
				}
			}
			if !slices.Equal(filled, best) {
				t.Fatalf("DimsCreate(%d, %v) = %v: filled %v, the most balanced is %v", n, dims, got, filled, best)
			}
		}
	}
}

func TestDimsCreateExamples(t *testing.T) {
	// The examples of the MPI standard (section 8.5.2), and a few more.
	for _, c := range []struct {
		n          int
		dims, want []int
	}{
		{6, []int{0, 0}, []int{3, 2}},
		{7, []int{0, 0}, []int{7, 1}},
		{6, []int{0, 3, 0}, []int{2, 3, 1}},
		{7, []int{0, 3, 0}, nil},
		{12, []int{0, 0, 0}, []int{3, 2, 2}},
		{36, []int{0, 0, 0}, []int{4, 3, 3}},
		{64, []int{0, 0}, []int{8, 8}},
		{1, []int{}, []int{}},
		{2, []int{}, nil},
		{1 << 30, []int{0, 0, 0}, []int{1 << 10, 1 << 10, 1 << 10}},
		{2147483647, []int{0, 0}, []int{2147483647, 1}}, // a prime
		{8, []int{2, 2, 2}, []int{2, 2, 2}},
		{8, []int{2, 2, 3}, nil},
		{8, []int{-1, 0}, nil},
		{8, []int{1 << 40, 1 << 40, 0}, nil}, // must not overflow into a false fit
	} {
		got, err := DimsCreate(c.n, c.dims)
		if c.want == nil {
			if !errors.Is(err, ErrDims) {
				t.Errorf("DimsCreate(%d, %v) = %v, %v; want ErrDims", c.n, c.dims, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("DimsCreate(%d, %v) = %v, %v; want %v", c.n, c.dims, got, err, c.want)
		}
	}
	if _, err := DimsCreate(0, []int{0}); !errors.Is(err, ErrArg) {
		t.Errorf("DimsCreate(0, ...): %v, want ErrArg", err)
	}
	in := []int{0, 2, 0}
	if _, err := DimsCreate(8, in); err != nil || !slices.Equal(in, []int{0, 2, 0}) {
		t.Errorf("DimsCreate modified its argument: %v (%v)", in, err)
	}
}

// TestCartOrder: reorder renumbers into one block per node only when that cuts fewer grid edges between nodes, and
// the result is always a permutation.
func TestCartOrder(t *testing.T) {
	blocks := func(p, q int) []int { // p ranks on q nodes in contiguous blocks
		n := make([]int, p)
		for i := range n {
			n[i] = i / (p / q)
		}
		return n
	}
	check := func(dims []int, periods []bool, node []int) ([]int, int, int) {
		t.Helper()
		o := cartOrder(dims, periods, node)
		if s := slices.Sorted(slices.Values(o)); !slices.Equal(s, identity(len(node))) {
			t.Fatalf("cartOrder(%v, %v) = %v is not a permutation", dims, node, o)
		}
		cellNode := make([]int, len(o))
		for old, cell := range o {
			cellNode[cell] = node[old]
		}
		before := cutEdges(dims, periods, func(c int) int { return node[c] })
		after := cutEdges(dims, periods, func(c int) int { return cellNode[c] })
		if after > before {
			t.Fatalf("cartOrder(%v, %v) cuts %d edges, the identity %d", dims, node, after, before)
		}
		return o, before, after
	}
	// 8x8 on 4 nodes of 16: rows of 2 cut 3x8 = 24 edges, 2x2 blocks of 4x4 cut 16.
	if _, before, after := check([]int{8, 8}, []bool{false, false}, blocks(64, 4)); before != 24 || after != 16 {
		t.Errorf("8x8 on 4 nodes: %d -> %d cut edges, want 24 -> 16", before, after)
	}
	// 4x4 on 2 nodes: the row-major halves are already the best blocks; the order is kept.
	if o, _, _ := check([]int{4, 4}, []bool{true, true}, blocks(16, 2)); !slices.Equal(o, identity(16)) {
		t.Errorf("4x4 on 2 nodes was reordered: %v", o)
	}
	// Uneven nodes, one node, one rank per node: kept.
	for _, node := range [][]int{{0, 0, 0, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		if o, _, _ := check([]int{2, 4}, []bool{false, false}, node); !slices.Equal(o, identity(8)) {
			t.Errorf("layout %v was reordered: %v", node, o)
		}
	}
	// Interleaved (round-robin) nodes: blocks are much better.
	rr := make([]int, 36)
	for i := range rr {
		rr[i] = i % 4
	}
	if _, before, after := check([]int{6, 6}, []bool{true, false}, rr); after >= before {
		t.Errorf("6x6 round-robin on 4 nodes: %d -> %d cut edges", before, after)
	}
	rng := rand.New(rand.NewSource(2))
	for range 200 {
		nd := 1 + rng.Intn(3)
		dims := make([]int, nd)
		periods := make([]bool, nd)
		p := 1
		for i := range dims {
			dims[i] = 1 + rng.Intn(5)
			periods[i] = rng.Intn(2) == 0
			p *= dims[i]
		}
		divs := divisors(p)
		q := divs[rng.Intn(len(divs))]
		node := blocks(p, q)
		rng.Shuffle(len(node), func(i, j int) { node[i], node[j] = node[j], node[i] })
		check(dims, periods, node)
	}
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestPrimeFactors: the factors multiply back to m and each is prime (math/big's test as the reference), for small
// numbers, random 62- and 63-bit ones, large primes, and products of two large primes, which trial division took
// seconds over (DimsCreate of a prime near 2^62 took about 3 s).
func TestPrimeFactors(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	nextPrime := func(x uint64) uint64 {
		for x |= 1; !new(big.Int).SetUint64(x).ProbablyPrime(20); x += 2 {
		}
		return x
	}
	ms := []uint64{1, 2, 3, 4, 97, 1000, 999983, 1000003, 1 << 62, 1<<63 - 1, 1<<64 - 1, 999983 * 999983,
		1000003 * 1000003, 18446744073709551557 /* the largest 64-bit prime */}
	for i := 0; i < 200; i++ {
		ms = append(ms, uint64(rng.Int63()), uint64(rng.Int63())>>uint(rng.Intn(40)))
	}
	for i := 0; i < 20; i++ {
		p, q := nextPrime(uint64(rng.Int63n(1<<31))+1<<30), nextPrime(uint64(rng.Int63n(1<<31))+1<<30)
		ms = append(ms, p*q, nextPrime(uint64(rng.Int63())|1<<62), p*p)
	}
	for _, m := range ms {
		fs := primeFactors(m)
		prod := uint64(1)
		for _, f := range fs {
			if f < 2 || !new(big.Int).SetUint64(f).ProbablyPrime(20) {
				t.Fatalf("primeFactors(%d) = %v: %d is not prime", m, fs, f)
			}
			hi, lo := bits.Mul64(prod, f)
			if hi != 0 {
				t.Fatalf("primeFactors(%d) = %v: the product overflows", m, fs)
			}
			prod = lo
		}
		if prod != m {
			t.Fatalf("primeFactors(%d) = %v: the product is %d", m, fs, prod)
		}
	}
	p := int(nextPrime(1<<62 + 12345))
	if got, err := DimsCreate(p, []int{0, 0}); err != nil || !slices.Equal(got, []int{p, 1}) {
		t.Fatalf("DimsCreate(%d, [0 0]) = %v, %v", p, got, err)
	}
}
