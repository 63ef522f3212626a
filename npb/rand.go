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
//
// One step is a multiply that has to wait for the previous one; four
// interleaved subsequences (each advanced by a^4) keep four multiplies in
// flight. Integer arithmetic mod 2^46 is exact, so the numbers are the same.
// Seeds are below 2^46, so the conversion goes through int64 (one
// instruction; uint64 to float64 is not).
func vranlc46(s, a uint64, y []float64) uint64 {
	if len(y) < 8 {
		for i := range y {
			s = (s * a) & mask46
			y[i] = float64(int64(s)) * r46
		}
		return s
	}
	a2 := (a * a) & mask46
	a4 := (a2 * a2) & mask46
	s0 := (s * a) & mask46
	s1 := (s0 * a) & mask46
	s2 := (s * a2) & mask46
	s2 = (s2 * a) & mask46
	s3 := (s * a4) & mask46
	i := 0
	for ; i+3 < len(y); i += 4 {
		y[i] = float64(int64(s0)) * r46
		y[i+1] = float64(int64(s1)) * r46
		y[i+2] = float64(int64(s2)) * r46
		y[i+3] = float64(int64(s3)) * r46
		s = s3
		s0 = (s0 * a4) & mask46
		s1 = (s1 * a4) & mask46
		s2 = (s2 * a4) & mask46
		s3 = (s3 * a4) & mask46
	}
	for ; i < len(y); i++ {
		s = (s * a) & mask46
		y[i] = float64(int64(s)) * r46
	}
	return s
}

// randlc46 is Randlc on integer seeds.
func randlc46(s *uint64, a uint64) float64 {
	*s = (*s * a) & mask46
	return float64(int64(*s)) * r46
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
