package npb

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand"
	"testing"
)

func TestFFTAgainstDFT(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, n := range []int{2, 4, 8, 16, 32, 64, 128} {
		for _, batch := range []int{1, 3} {
			pl := newFFTPlan(n)
			x := make([]complex128, n*batch)
			for i := range x {
				x[i] = complex(rng.Float64(), rng.Float64())
			}
			orig := append([]complex128(nil), x...)
			y := make([]complex128, len(x))
			for _, inv := range []bool{false, true} {
				copy(x, orig)
				pl.transform(x, y, batch, inv)
				sign := -1.0
				if inv {
					sign = 1
				}
				for b := 0; b < batch; b++ {
					for k := 0; k < n; k++ {
						var s complex128
						for j := 0; j < n; j++ {
							s += orig[j*batch+b] * cmplx.Exp(complex(0, sign*2*math.Pi*float64(j*k)/float64(n)))
						}
						if cmplx.Abs(s-x[k*batch+b]) > 1e-9*float64(n) {
							t.Fatalf("n=%d batch=%d inv=%v k=%d: got %v want %v", n, batch, inv, k, x[k*batch+b], s)
						}
					}
				}
			}
		}
	}
}

// BenchmarkFFT times one batched transform of the sizes FT uses, 16 lines
// at a time.
func BenchmarkFFT(b *testing.B) {
	for _, n := range []int{128, 256, 512} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			const batch = 16
			pl := newFFTPlan(n)
			x := make([]complex128, n*batch)
			for i := range x {
				x[i] = complex(float64(i%7), float64(i%5))
			}
			y := make([]complex128, len(x))
			for i := 0; i < b.N; i++ {
				pl.transform(x, y, batch, i%2 == 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*batch), "ns/point")
		})
	}
}
