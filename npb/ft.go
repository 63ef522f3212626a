package npb

import (
	"errors"
	"fmt"
	"math"

	"github.com/gompj/gompj"
)

// FT: solve a 3-D diffusion equation spectrally: forward 3-D FFT of random
// initial data, then per time step multiply by exp(-4 alpha pi^2 |k|^2 t),
// inverse FFT and a checksum. The grid is decomposed in slabs: z-slabs for
// the x and y transforms, y-slabs for the z transform, and Alltoall moves
// between them (NPB's 1-D layout).
//
// Both slab layouts are stored in the order the Alltoall delivers, so no
// local transposition is ever needed: element (x, y, z) lives at row
// (b*zl + zloc)*yl + yloc, column x, where in the z-slab layout b is the
// y-block (y = b*yl + yloc, z = me*zl + zloc) and in the y-slab layout b is
// the z-block (z = b*zl + zloc, y = me*yl + yloc).

const (
	ftSeed  = 314159265
	ftAlpha = 1e-6
	ftEps   = 1e-12
	// Lines are transformed in batches gathered side by side, up to
	// ftBatchElems elements (256 KiB of complex128, so the batch and its
	// scratch stay in L2), at most ftRowBatch rows along x and ftColBatch
	// columns along y and z: wide enough that the column gathers read whole
	// cache lines in long runs.
	ftBatchElems = 1 << 14
	ftRowBatch   = 32
	ftColBatch   = 64
)

type ftClass struct {
	nx, ny, nz, niter int
	re, im            []float64
}

func ftParams(class byte) (ftClass, bool) {
	switch class {
	case 'S':
		return ftClass{64, 64, 64, 6,
			[]float64{5.546087004964e+02, 5.546385409189e+02, 5.546148406171e+02, 5.545423607415e+02, 5.544255039624e+02, 5.542683411902e+02},
			[]float64{4.845363331978e+02, 4.865304269511e+02, 4.883910722336e+02, 4.901273169046e+02, 4.917475857993e+02, 4.932597244941e+02}}, true
	case 'W':
		return ftClass{128, 128, 32, 6,
			[]float64{5.673612178944e+02, 5.631436885271e+02, 5.594024089970e+02, 5.560698047020e+02, 5.530898991250e+02, 5.504159734538e+02},
			[]float64{5.293246849175e+02, 5.282149986629e+02, 5.270996558037e+02, 5.260027904925e+02, 5.249400845633e+02, 5.239212247086e+02}}, true
	case 'A':
		return ftClass{256, 256, 128, 6,
			[]float64{5.046735008193e+02, 5.059412319734e+02, 5.069376896287e+02, 5.077892868474e+02, 5.085233095391e+02, 5.091487099959e+02},
			[]float64{5.114047905510e+02, 5.098809666433e+02, 5.098144042213e+02, 5.101336130759e+02, 5.104914655194e+02, 5.107917842803e+02}}, true
	case 'B':
		return ftClass{512, 256, 256, 20,
			[]float64{5.177643571579e+02, 5.154521291263e+02, 5.146409228649e+02, 5.142378756213e+02, 5.139626667737e+02,
				5.137423460082e+02, 5.135547056878e+02, 5.133910925466e+02, 5.132470705390e+02, 5.131197729984e+02,
				5.130070319283e+02, 5.129070537032e+02, 5.128182883502e+02, 5.127393733383e+02, 5.126691062020e+02,
				5.126064276004e+02, 5.125504076570e+02, 5.125002331720e+02, 5.124551951846e+02, 5.124146770029e+02},
			[]float64{5.077803458597e+02, 5.088249431599e+02, 5.096208912659e+02, 5.101023387619e+02, 5.103976610617e+02,
				5.105948019802e+02, 5.107404165783e+02, 5.108576573661e+02, 5.109577278523e+02, 5.110460304483e+02,
				5.111252433800e+02, 5.111968077718e+02, 5.112616233064e+02, 5.113203605551e+02, 5.113735928093e+02,
				5.114218460548e+02, 5.114656139760e+02, 5.115053595966e+02, 5.115415130407e+02, 5.115744692211e+02}}, true
	case 'C':
		return ftClass{512, 512, 512, 20,
			[]float64{5.195078707457e+02, 5.155422171134e+02, 5.144678022222e+02, 5.140150594328e+02, 5.137550426810e+02,
				5.135811056728e+02, 5.134569343165e+02, 5.133651975661e+02, 5.132955192805e+02, 5.132410471738e+02,
				5.131971141679e+02, 5.131605205716e+02, 5.131290734194e+02, 5.131012720314e+02, 5.130760908195e+02,
				5.130528295923e+02, 5.130310107773e+02, 5.130103090133e+02, 5.129905029333e+02, 5.129714421109e+02},
			[]float64{5.149019699238e+02, 5.127578201997e+02, 5.122251847514e+02, 5.121090289018e+02, 5.121143685824e+02,
				5.121496764568e+02, 5.121870921893e+02, 5.122193250322e+02, 5.122454735794e+02, 5.122663649603e+02,
				5.122830879827e+02, 5.122965869718e+02, 5.123075927445e+02, 5.123166486553e+02, 5.123241541685e+02,
				5.123304037599e+02, 5.123356167976e+02, 5.123399592211e+02, 5.123435588985e+02, 5.123465164008e+02}}, true
	}
	return ftClass{}, false
}

type ftRank struct {
	c                  *gompj.Comm
	p                  ftClass
	np, me             int
	nx, ny, nz, yl, zl int
	planX, planY       *fftPlan
	planZ              *fftPlan
	u0, u1, u2         []complex128 // u0, u1: y-slab layout; u2: z-slab layout
	tw                 []float64    // y-slab layout
	rowBatch, colBatch int          // lines per batch along x, along y and z
	gin, gout          []complex128 // gathered columns and FFT scratch
	rowOff             []int        // row offsets of the lines being transformed
	randRow            []float64
	sums               []complex128
}

func newFTRank(c *gompj.Comm, p ftClass) (*ftRank, error) {
	np := c.Size()
	f := &ftRank{c: c, p: p, np: np, me: c.Rank(), nx: p.nx, ny: p.ny, nz: p.nz}
	f.yl, f.zl = p.ny/np, p.nz/np
	f.planX, f.planY, f.planZ = newFFTPlan(p.nx), newFFTPlan(p.ny), newFFTPlan(p.nz)
	local := p.nx * p.ny * p.nz / np
	// u0, u1 and u2 are what Alltoall moves: memory from gompj.Alloc (see lend.go).
	for _, u := range []*[]complex128{&f.u0, &f.u1, &f.u2} {
		var err error
		if *u, err = gompj.Alloc[complex128](c, local); err != nil {
			f.free()
			return nil, err
		}
	}
	f.tw = make([]float64, local)
	maxn := max(p.nx, p.ny, p.nz)
	f.rowBatch = max(1, min(ftRowBatch, ftBatchElems/p.nx))
	f.colBatch = max(1, min(ftColBatch, ftBatchElems/max(p.ny, p.nz)))
	g := max(p.nx*f.rowBatch, max(p.ny, p.nz)*f.colBatch)
	f.gin = make([]complex128, g)
	f.gout = make([]complex128, g)
	f.randRow = make([]float64, 2*p.nx)
	f.rowOff = make([]int, maxn)
	f.sums = make([]complex128, p.niter)
	return f, nil
}

// free gives back the exchange buffers.
func (f *ftRank) free() error {
	return errors.Join(gompj.Free(f.c, f.u0), gompj.Free(f.c, f.u1), gompj.Free(f.c, f.u2))
}

// row returns the offset of row (b, zloc, yloc).
func (f *ftRank) row(b, zloc, yloc int) int {
	return ((b*f.zl+zloc)*f.yl + yloc) * f.nx
}

// indexMap fills the exponent table in the y-slab layout:
// exp(-4 alpha pi^2 (kx^2+ky^2+kz^2)), wave numbers folded to [-n/2, n/2).
func (f *ftRank) indexMap() {
	ap := -4 * ftAlpha * math.Pi * math.Pi
	fold := func(i, n int) float64 {
		k := (i+n/2)%n - n/2
		return float64(k * k)
	}
	kx2 := make([]float64, f.nx)
	for x := range kx2 {
		kx2[x] = fold(x, f.nx)
	}
	for b := 0; b < f.np; b++ {
		for zloc := 0; zloc < f.zl; zloc++ {
			kz2 := fold(b*f.zl+zloc, f.nz)
			for yloc := 0; yloc < f.yl; yloc++ {
				ky2 := fold(f.me*f.yl+yloc, f.ny)
				o := f.row(b, zloc, yloc)
				t := f.tw[o : o+f.nx]
				for x := range t {
					t[x] = math.Exp(ap * (kx2[x] + ky2 + kz2))
				}
			}
		}
	}
}

// initialConditions fills u2 (z-slab layout) with the NPB random field:
// the real and imaginary parts of (x, y, z) are deviates 2*(x+nx*(y+ny*z))+1
// and +2 of the sequence.
func (f *ftRank) initialConditions() {
	const a = uint64(RandA)
	rowStep := pow46(a, int64(2*f.nx))
	for zloc := 0; zloc < f.zl; zloc++ {
		z := f.me*f.zl + zloc
		s := skip46(ftSeed, a, int64(2*f.nx)*int64(f.ny)*int64(z))
		for y := 0; y < f.ny; y++ {
			vranlc46(s, a, f.randRow)
			s = (s * rowStep) & mask46
			o := f.row(y/f.yl, zloc, y%f.yl)
			u := f.u2[o : o+f.nx]
			rr := f.randRow[:2*len(u)]
			for x := range u {
				u[x] = complex(rr[2*x], rr[2*x+1])
			}
		}
	}
}

// fftRows transforms rows [r0, r0+nrows) of u along x, rowBatch rows at a
// time gathered side by side.
func (f *ftRank) fftRows(u []complex128, r0, nrows int, inverse bool) {
	nx := f.nx
	g := f.gin
	for r := r0; r < r0+nrows; r += f.rowBatch {
		bs := min(f.rowBatch, r0+nrows-r)
		gb := g[:nx*bs]
		for b := 0; b < bs; b++ {
			row := u[(r+b)*nx : (r+b+1)*nx]
			for x, v := range row {
				gb[x*bs+b] = v
			}
		}
		f.planX.transform(gb, f.gout, bs, inverse)
		for b := 0; b < bs; b++ {
			row := u[(r+b)*nx : (r+b+1)*nx]
			for x := range row {
				row[x] = gb[x*bs+b]
			}
		}
	}
}

// fftCols transforms u along a dimension whose k-th element starts at
// offset rowOff[k] (one line per x), colBatch columns at a time.
func (f *ftRank) fftCols(u []complex128, rowOff []int, pl *fftPlan, inverse bool) {
	nx := f.nx
	g := f.gin
	for x0 := 0; x0 < nx; x0 += f.colBatch {
		bs := min(f.colBatch, nx-x0)
		for k, o := range rowOff {
			copy(g[k*bs:k*bs+bs], u[o+x0:o+x0+bs])
		}
		pl.transform(g, f.gout, bs, inverse)
		for k, o := range rowOff {
			copy(u[o+x0:o+x0+bs], g[k*bs:k*bs+bs])
		}
	}
}

// planeXY transforms z-slab plane zloc (z = me*zl + zloc) of u along x and
// y: x first going forward, y first going back. Doing both while the plane
// is in cache saves a pass over memory.
func (f *ftRank) planeXY(u []complex128, zloc int, inverse bool) {
	if !inverse {
		f.planeRows(u, zloc, false)
	}
	off := f.rowOff[:f.ny]
	for y := range off {
		off[y] = f.row(y/f.yl, zloc, y%f.yl)
	}
	f.fftCols(u, off, f.planY, inverse)
	if inverse {
		f.planeRows(u, zloc, true)
	}
}

// planeRows transforms the rows of z-slab plane zloc along x: np runs of yl
// consecutive rows, one per y-block.
func (f *ftRank) planeRows(u []complex128, zloc int, inverse bool) {
	for b := 0; b < f.np; b++ {
		f.fftRows(u, (b*f.zl+zloc)*f.yl, f.yl, inverse)
	}
}

// fftZ transforms along z in the y-slab layout, line yloc at a time (z is
// at row z*yl + yloc).
func (f *ftRank) fftZ(u []complex128, inverse bool) {
	off := f.rowOff[:f.nz]
	for yloc := 0; yloc < f.yl; yloc++ {
		for z := range off {
			off[z] = (z*f.yl + yloc) * f.nx
		}
		f.fftCols(u, off, f.planZ, inverse)
	}
}

// forward: u2 (z-slabs) -> u0 (y-slabs), transformed in x, y, z.
func (f *ftRank) forward() error {
	for zloc := 0; zloc < f.zl; zloc++ {
		f.planeXY(f.u2, zloc, false)
	}
	if err := f.c.Alltoall(f.u2, f.u0); err != nil {
		return err
	}
	f.fftZ(f.u0, false)
	return nil
}

// inverse: u1 (y-slabs) -> u2 (z-slabs), inverse-transformed.
func (f *ftRank) inverse() error {
	f.fftZ(f.u1, true)
	if err := f.c.Alltoall(f.u1, f.u2); err != nil {
		return err
	}
	for zloc := 0; zloc < f.zl; zloc++ {
		f.planeXY(f.u2, zloc, true)
	}
	return nil
}

// evolve advances u0 by one time step and copies it to u1.
func (f *ftRank) evolve() {
	u0, u1, tw := f.u0, f.u1[:len(f.u0)], f.tw[:len(f.u0)]
	for i, v := range u0 {
		t := tw[i]
		v = complex(real(v)*t, imag(v)*t)
		u0[i] = v
		u1[i] = v
	}
}

// checksum sums 1024 fixed elements of u2 over all ranks.
func (f *ftRank) checksum(it int) error {
	var chk complex128
	for j := 1; j <= 1024; j++ {
		x, y, z := j%f.nx, (3*j)%f.ny, (5*j)%f.nz
		if z/f.zl == f.me {
			chk += f.u2[f.row(y/f.yl, z%f.zl, y%f.yl)+x]
		}
	}
	send := []float64{real(chk), imag(chk)}
	recv := []float64{0, 0}
	if err := f.c.Allreduce(send, recv, gompj.Sum); err != nil {
		return err
	}
	ntotal := float64(f.nx) * float64(f.ny) * float64(f.nz)
	f.sums[it-1] = complex(recv[0]/ntotal, recv[1]/ntotal)
	return nil
}

// RunFT runs the FT kernel; the number of ranks must be a power of two
// dividing both ny and nz.
func RunFT(c *gompj.Comm, class byte) (*Result, error) {
	p, ok := ftParams(class)
	if !ok {
		return nil, badClass("FT", class)
	}
	np := c.Size()
	if err := needPow2("FT", np); err != nil {
		return nil, err
	}
	if np > p.ny || np > p.nz {
		return nil, fmt.Errorf("%w: FT class %c allows at most %d ranks", ErrProcs, class, min(p.ny, p.nz))
	}
	f, err := newFTRank(c, p)
	if err != nil {
		return nil, err
	}
	defer f.free()

	// Untimed pass over setup and the forward transform, as NPB does, and
	// a first touch of u1 (NPB's untimed pass writes all three arrays).
	f.indexMap()
	f.initialConditions()
	if err := f.forward(); err != nil {
		return nil, err
	}
	clear(f.u1)

	if err := c.Barrier(); err != nil {
		return nil, err
	}
	t0 := gompj.Wtime()
	f.indexMap()
	f.initialConditions()
	if err := f.forward(); err != nil {
		return nil, err
	}
	for it := 1; it <= p.niter; it++ {
		f.evolve()
		if err := f.inverse(); err != nil {
			return nil, err
		}
		if err := f.checksum(it); err != nil {
			return nil, err
		}
	}
	elapsed := gompj.Wtime() - t0

	res := &Result{
		Kernel: "FT", Class: class,
		Size:       fmt.Sprintf("%dx%dx%d", p.nx, p.ny, p.nz),
		Iterations: p.niter,
		OpType:     "floating point",
	}
	for i := 0; i < p.niter; i++ {
		res.Checks = append(res.Checks,
			Check{Name: fmt.Sprintf("re(sum %d)", i+1), Computed: real(f.sums[i]), Reference: p.re[i], Tolerance: ftEps},
			Check{Name: fmt.Sprintf("im(sum %d)", i+1), Computed: imag(f.sums[i]), Reference: p.im[i], Tolerance: ftEps})
	}
	ntotal := float64(p.nx) * float64(p.ny) * float64(p.nz)
	ops := ntotal * (14.8157 + 7.19641*math.Log(ntotal) + (5.23518+7.21113*math.Log(ntotal))*float64(p.niter))
	if err := finish(c, res, elapsed, ops); err != nil {
		return nil, err
	}
	return res, nil
}
