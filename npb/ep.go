package npb

import (
	"fmt"
	"math"

	"github.com/gompj/gompj"
)

// EP: generate pairs of uniform deviates, turn the ones inside the unit
// circle into Gaussian pairs (Marsaglia polar method), and count them by
// annulus. Batches of 2^16 pairs are independent: batch k starts at seed
// S * A^(2*2^16*k), so ranks split the batches and reduce the sums.

const (
	epMK   = 16 // log2 of pairs per batch
	epNK   = 1 << epMK
	epNQ   = 10 // annuli counted
	epSeed = 271828183
	epEps  = 1e-8
)

type epClass struct {
	m      int // log2 of the number of pairs
	sx, sy float64
}

func epParams(class byte) (epClass, bool) {
	switch class {
	case 'S':
		return epClass{24, -3.247834652034740e+3, -6.958407078382297e+3}, true
	case 'W':
		return epClass{25, -2.863319731645753e+3, -6.320053679109499e+3}, true
	case 'A':
		return epClass{28, -4.295875165629892e+3, -1.580732573678431e+4}, true
	case 'B':
		return epClass{30, 4.033815542441498e+4, -2.660669192809235e+4}, true
	case 'C':
		return epClass{32, 4.764367927995374e+4, -8.084072988043731e+4}, true
	}
	return epClass{}, false
}

// epSums accumulates what a rank computes.
type epSums struct {
	sx, sy float64
	q      [epNQ]float64
}

// epBatches runs batches [first, first+count) into s, using x (2*epNK
// elements) as scratch.
func epBatches(first, count int64, x []float64, s *epSums) {
	x = x[:2*epNK]
	const a = uint64(RandA)
	an := pow46(a, 2*epNK) // advances the generator by one batch
	for k := first; k < first+count; k++ {
		// Seed of batch k: S * an^k, by binary powering as NPB does.
		t1 := uint64(epSeed)
		t2 := an
		for kk := k; ; {
			ik := kk / 2
			if 2*ik != kk {
				t1 = (t1 * t2) & mask46
			}
			if ik == 0 {
				break
			}
			t2 = (t2 * t2) & mask46
			kk = ik
		}
		vranlc46(t1, a, x)
		sx, sy := s.sx, s.sy
		for i := 0; i < epNK; i++ {
			x1 := 2*x[2*i] - 1
			x2 := 2*x[2*i+1] - 1
			t := x1*x1 + x2*x2
			if t <= 1 {
				f := math.Sqrt(-2 * math.Log(t) / t)
				t3 := x1 * f
				t4 := x2 * f
				l := int(math.Max(math.Abs(t3), math.Abs(t4)))
				s.q[l]++
				sx += t3
				sy += t4
			}
		}
		s.sx, s.sy = sx, sy
	}
}

// epShare returns the first batch and the batch count of rank me of np for
// nn batches, the way NPB's EP splits them (the first nn mod np ranks take
// one more).
func epShare(nn int64, me, np int) (first, count int64) {
	base := nn / int64(np)
	large := nn % int64(np)
	m := int64(me)
	if m < large {
		return m * (base + 1), base + 1
	}
	return large*(base+1) + (m-large)*base, base
}

// RunEP runs the EP kernel on every rank of c. Any number of ranks works.
func RunEP(c *gompj.Comm, class byte) (*Result, error) {
	p, ok := epParams(class)
	if !ok {
		return nil, badClass("EP", class)
	}
	np, me := c.Size(), c.Rank()
	nn := int64(1) << (p.m - epMK)
	first, count := epShare(nn, me, np)
	x := make([]float64, 2*epNK)

	// Touch the code and data once, untimed, as NPB does with its dummy
	// vranlc call.
	var warm epSums
	epBatches(0, 0, x, &warm)

	if err := c.Barrier(); err != nil {
		return nil, err
	}
	t0 := gompj.Wtime()
	var s epSums
	epBatches(first, count, x, &s)
	local := make([]float64, 2+epNQ)
	local[0], local[1] = s.sx, s.sy
	copy(local[2:], s.q[:])
	global := make([]float64, len(local))
	if err := c.Allreduce(local, global, gompj.Sum); err != nil {
		return nil, err
	}
	elapsed := gompj.Wtime() - t0

	gc := 0.0
	for _, v := range global[2:] {
		gc += v
	}
	r := &Result{
		Kernel: "EP", Class: class,
		Size:   fmt.Sprintf("%.0f", math.Ldexp(1, p.m+1)),
		OpType: "Random numbers generated",
		Checks: []Check{
			{Name: "sx", Computed: global[0], Reference: p.sx, Tolerance: epEps},
			{Name: "sy", Computed: global[1], Reference: p.sy, Tolerance: epEps},
		},
	}
	_ = gc
	if err := finish(c, r, elapsed, math.Ldexp(1, p.m+1)); err != nil {
		return nil, err
	}
	return r, nil
}
