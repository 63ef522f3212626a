package npb

// The NPB pseudo-random generator is the linear congruential sequence
//
//	x(k+1) = a * x(k) mod 2^46,   r(k) = x(k) * 2^-46,
//
// with a = 5^13 for every kernel. The reference implementation does the
// 46-bit product exactly in double precision by splitting the operands into
// 23-bit halves; here the product is done in 64-bit unsigned integers, whose
// wrap-around keeps the low 46 bits exact, so the sequence is bit-identical
// and much cheaper.

const (
	// RandA is the NPB multiplier 5^13.
	RandA = 1220703125.0

	mask46 = 1<<46 - 1
	r46    = 1.0 / (1 << 46)
)

// Randlc advances the seed x by one step of the NPB generator with
// multiplier a and returns the new value scaled to (0, 1). x and a must be
// integers in [1, 2^46), as the NPB specification requires.
func Randlc(x *float64, a float64) float64 {
	s := uint64(*x)
	s = (s * uint64(a)) & mask46
	*x = float64(s)
	return float64(s) * r46
}

// Vranlc fills y[:n] with the next n numbers of the NPB generator started
// from seed x with multiplier a, and leaves x at the last seed produced.
func Vranlc(n int, x *float64, a float64, y []float64) {
	s := uint64(*x)
	s = vranlc46(s, uint64(a), y[:n])
	*x = float64(s)
}

// vranlc46 is Vranlc on integer seeds: it fills y and returns the last seed.
func vranlc46(s, a uint64, y []float64) uint64 {
	for i := range y {
		s = (s * a) & mask46
		y[i] = float64(s) * r46
	}
	return s
}

// randlc46 is Randlc on integer seeds.
func randlc46(s *uint64, a uint64) float64 {
	*s = (*s * a) & mask46
	return float64(*s) * r46
}

// Pow46 returns a^n mod 2^46 (a^0 = 1): the multiplier that advances the
// generator by n steps at once.
func Pow46(a float64, n int64) float64 {
	return float64(pow46(uint64(a), n))
}

func pow46(a uint64, n int64) uint64 {
	r := uint64(1)
	q := a & mask46
	for n > 0 {
		if n&1 == 1 {
			r = (r * q) & mask46
		}
		q = (q * q) & mask46
		n >>= 1
	}
	return r
}

// skip46 returns the seed reached from s after n steps with multiplier a.
func skip46(s, a uint64, n int64) uint64 {
	return (s * pow46(a, n)) & mask46
}
