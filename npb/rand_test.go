package npb

import (
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// randlcSplit is the NPB reference algorithm: the 46-bit product done in
// double precision with 23-bit halves. The integer implementation must agree
// with it bit for bit.
func randlcSplit(x *float64, a float64) float64 {
	const (
		r23 = 1.0 / (1 << 23)
		t23 = 1 << 23
		r46 = 1.0 / (1 << 46)
		t46 = 1 << 46
	)
	a1 := math.Trunc(r23 * a)
	a2 := a - t23*a1
	x1 := math.Trunc(r23 * *x)
	x2 := *x - t23*x1
	t1 := a1*x2 + a2*x1
	t2 := math.Trunc(r23 * t1)
	z := t1 - t23*t2
	t3 := t23*z + a2*x2
	t4 := math.Trunc(r46 * t3)
	*x = t3 - t46*t4
	return r46 * *x
}

func TestRandlcKnownValues(t *testing.T) {
	// x1 = seed * 5^13 mod 2^46 for the CG/IS/MG/FT seed and the EP seed,
	// worked out with exact integers.
	cases := []struct {
		seed float64
		want []float64
	}{
		{314159265, []float64{55909509111989, 61155031930969, 45573031421645}},
		{271828183, []float64{32883653486115, 55063727434591, 39106144873291}},
	}
	for _, c := range cases {
		x := c.seed
		for i, w := range c.want {
			r := Randlc(&x, RandA)
			if x != w || r != w/(1<<46) {
				t.Fatalf("seed %.0f step %d: got x=%.0f r=%v, want x=%.0f", c.seed, i+1, x, r, w)
			}
		}
	}
	x := 314159265.0
	if r := Randlc(&x, RandA); r != 0.7945219111887383 {
		t.Fatalf("first CG deviate %v, want 0.7945219111887383", r)
	}
	if got := Pow46(RandA, 1<<17); got != 62362532446209 {
		t.Fatalf("a^(2^17) mod 2^46 = %.0f, want 62362532446209", got)
	}
}

func TestRandlcMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	mod := new(big.Int).Lsh(big.NewInt(1), 46)
	for i := 0; i < 20000; i++ {
		x := float64(rng.Int63n(1<<46-1) + 1)
		a := RandA
		if i%2 == 1 {
			a = float64(rng.Int63n(1<<46-1) | 1) // any odd multiplier
		}
		x1, x2 := x, x
		r1 := Randlc(&x1, a)
		r2 := randlcSplit(&x2, a)
		want := new(big.Int).Mul(big.NewInt(int64(x)), big.NewInt(int64(a)))
		want.Mod(want, mod)
		if x1 != x2 || r1 != r2 || x1 != float64(want.Int64()) {
			t.Fatalf("x=%.0f a=%.0f: got %.0f, split %.0f, exact %v", x, a, x1, x2, want)
		}
	}
}

func TestVranlcAndSkip(t *testing.T) {
	x := 314159265.0
	y := make([]float64, 1000)
	Vranlc(len(y), &x, RandA, y)
	z := 314159265.0
	for i := range y {
		if r := Randlc(&z, RandA); r != y[i] {
			t.Fatalf("vranlc[%d] = %v, randlc gives %v", i, y[i], r)
		}
	}
	if x != z {
		t.Fatalf("vranlc left seed %.0f, want %.0f", x, z)
	}
	s := skip46(314159265, uint64(RandA), 1000)
	if float64(s) != z {
		t.Fatalf("skip46 by 1000 = %d, want %.0f", s, z)
	}
	if Pow46(RandA, 0) != 1 {
		t.Fatal("a^0 != 1")
	}
}

// TestVranlcLengths checks the interleaved generator against single steps
// for every length around its unrolling, and the seed it leaves.
func TestVranlcLengths(t *testing.T) {
	for n := 0; n < 40; n++ {
		for _, a := range []uint64{uint64(RandA), 1<<45 + 12345} {
			y := make([]float64, n)
			got := vranlc46(271828183, a, y)
			s := uint64(271828183)
			for i := range y {
				want := randlc46(&s, a)
				if y[i] != want {
					t.Fatalf("n=%d a=%d: y[%d] = %v, want %v", n, a, i, y[i], want)
				}
			}
			if got != s {
				t.Fatalf("n=%d a=%d: seed %d, want %d", n, a, got, s)
			}
		}
	}
}

func BenchmarkVranlc(b *testing.B) {
	y := make([]float64, 1<<16)
	s := uint64(314159265)
	for i := 0; i < b.N; i++ {
		s = vranlc46(s, uint64(RandA), y)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(y)), "ns/number")
}
