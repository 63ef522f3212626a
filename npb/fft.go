package npb

import "math"

// A radix-4 (with one radix-2 step for odd powers) self-sorting Stockham
// FFT over a batch of interleaved sequences: element k of sequence b is at
// x[k*batch+b]. Interleaving lets the innermost loop run over the batch with
// one twiddle factor, and lets FT transform lines along any axis after
// gathering a few columns side by side.

type fftStage struct {
	ncur int          // length of the sub-transforms at this stage
	fw   []complex128 // forward twiddles w1,w2,w3 per p (radix 4 only)
	iw   []complex128 // inverse twiddles
}

type fftPlan struct {
	n      int
	stages []fftStage
}

func newFFTPlan(n int) *fftPlan {
	pl := &fftPlan{n: n}
	for ncur := n; ncur >= 4; ncur /= 4 {
		n1 := ncur / 4
		st := fftStage{ncur: ncur, fw: make([]complex128, 3*n1), iw: make([]complex128, 3*n1)}
		for p := 0; p < n1; p++ {
			for r := 1; r <= 3; r++ {
				th := 2 * math.Pi * float64(r*p) / float64(ncur)
				c, s := math.Cos(th), math.Sin(th)
				st.fw[3*p+r-1] = complex(c, -s)
				st.iw[3*p+r-1] = complex(c, s)
			}
		}
		pl.stages = append(pl.stages, st)
	}
	return pl
}

// transform replaces x (n*batch elements) by its unnormalised DFT along k,
// with exponent sign - (forward) or + (inverse); y is scratch of the same
// length.
func (pl *fftPlan) transform(x, y []complex128, batch int, inverse bool) {
	n := pl.n
	x = x[:n*batch]
	y = y[:n*batch]
	src, dst := x, y
	s := batch
	ncur := n
	for _, st := range pl.stages {
		tw := st.fw
		if inverse {
			tw = st.iw
		}
		radix4(src, dst, st.ncur, s, tw, inverse)
		src, dst = dst, src
		s *= 4
		ncur /= 4
	}
	if ncur == 2 {
		h := s
		a, b := src[:h], src[h:2*h]
		o0, o1 := dst[:h], dst[h:2*h]
		b = b[:len(a)]
		o0 = o0[:len(a)]
		o1 = o1[:len(a)]
		for q := range a {
			u, v := a[q], b[q]
			o0[q] = u + v
			o1[q] = u - v
		}
		src, dst = dst, src
	}
	if &src[0] != &x[0] {
		copy(x, src)
	}
}

func radix4(x, y []complex128, ncur, s int, tw []complex128, inverse bool) {
	n1 := ncur / 4
	for p := 0; p < n1; p++ {
		w1, w2, w3 := tw[3*p], tw[3*p+1], tw[3*p+2]
		xa := x[s*p : s*p+s]
		xb := x[s*(p+n1) : s*(p+n1)+s]
		xc := x[s*(p+2*n1) : s*(p+2*n1)+s]
		xd := x[s*(p+3*n1) : s*(p+3*n1)+s]
		y0 := y[s*4*p : s*4*p+4*s]
		y1 := y0[s : 2*s]
		y2 := y0[2*s : 3*s]
		y3 := y0[3*s : 4*s]
		y0 = y0[:s]
		xb, xc, xd = xb[:len(xa)], xc[:len(xa)], xd[:len(xa)]
		y0, y1, y2, y3 = y0[:len(xa)], y1[:len(xa)], y2[:len(xa)], y3[:len(xa)]
		if !inverse {
			if p == 0 {
				for q, a := range xa {
					b, c, d := xb[q], xc[q], xd[q]
					apc, amc, bpd, bmd := a+c, a-c, b+d, b-d
					jbmd := complex(-imag(bmd), real(bmd))
					y0[q] = apc + bpd
					y1[q] = amc - jbmd
					y2[q] = apc - bpd
					y3[q] = amc + jbmd
				}
				continue
			}
			for q, a := range xa {
				b, c, d := xb[q], xc[q], xd[q]
				apc, amc, bpd, bmd := a+c, a-c, b+d, b-d
				jbmd := complex(-imag(bmd), real(bmd))
				y0[q] = apc + bpd
				y1[q] = w1 * (amc - jbmd)
				y2[q] = w2 * (apc - bpd)
				y3[q] = w3 * (amc + jbmd)
			}
		} else {
			if p == 0 {
				for q, a := range xa {
					b, c, d := xb[q], xc[q], xd[q]
					apc, amc, bpd, bmd := a+c, a-c, b+d, b-d
					jbmd := complex(imag(bmd), -real(bmd))
					y0[q] = apc + bpd
					y1[q] = amc - jbmd
					y2[q] = apc - bpd
					y3[q] = amc + jbmd
				}
				continue
			}
			for q, a := range xa {
				b, c, d := xb[q], xc[q], xd[q]
				apc, amc, bpd, bmd := a+c, a-c, b+d, b-d
				jbmd := complex(imag(bmd), -real(bmd))
				y0[q] = apc + bpd
				y1[q] = w1 * (amc - jbmd)
				y2[q] = w2 * (apc - bpd)
				y3[q] = w3 * (amc + jbmd)
			}
		}
	}
}
