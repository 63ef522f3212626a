package npb

// MG's stencil operators on one block with one ghost layer, x fastest:
// element (i1, i2, i3) of an m1 x m2 x m3 block is a[i1 + m1*(i2 + m2*i3)].
// They follow NPB's formulation (the partial sums u1/u2 along x are shared
// between neighbouring points), and leave the ghosts to comm3.

// mgResid computes r = v - A u on the interior (a[1] is zero and skipped).
// v and r may be the same slice.
func mgResid(u, v, r []float64, m1, m2, m3 int, a *[4]float64, u1, u2 []float64) {
	a0, a2, a3 := a[0], a[2], a[3]
	pl := m1 * m2
	n := m1 - 2
	for i3 := 1; i3 < m3-1; i3++ {
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + pl*i3
			// Row windows starting at i1 = 0; the partial sums u1 (edge
			// neighbours) and u2 (corner neighbours) along x roll in
			// registers instead of NPB's line buffers, same arithmetic.
			ym := u[o-m1 : o]
			yp := u[o+m1 : o+2*m1]
			zm := u[o-pl : o-pl+m1]
			zp := u[o+pl : o+pl+m1]
			ymzm := u[o-m1-pl : o-pl]
			ypzm := u[o+m1-pl : o+2*m1-pl]
			ymzp := u[o-m1+pl : o+pl]
			ypzp := u[o+m1+pl : o+2*m1+pl]
			rc := r[o+1 : o+1+n]
			vc := v[o+1 : o+1+n]
			uc := u[o+1 : o+1+n]
			vc, uc = vc[:len(rc)], uc[:len(rc)]
			// shifted by +2: element i of these is at i1 = i+2
			ym2, yp2, zm2, zp2 := ym[2:2+len(rc)], yp[2:2+len(rc)], zm[2:2+len(rc)], zp[2:2+len(rc)]
			c1, c2, c3, c4 := ymzm[2:2+len(rc)], ypzm[2:2+len(rc)], ymzp[2:2+len(rc)], ypzp[2:2+len(rc)]
			u1m := ym[0] + yp[0] + zm[0] + zp[0]
			u2m := ymzm[0] + ypzm[0] + ymzp[0] + ypzp[0]
			u1c := ym[1] + yp[1] + zm[1] + zp[1]
			u2c := ymzm[1] + ypzm[1] + ymzp[1] + ypzp[1]
			for i := range rc {
				u1p := ym2[i] + yp2[i] + zm2[i] + zp2[i]
				u2p := c1[i] + c2[i] + c3[i] + c4[i]
				rc[i] = vc[i] - a0*uc[i] - a2*(u2c+u1m+u1p) - a3*(u2m+u2p)
				u1m, u1c = u1c, u1p
				u2m, u2c = u2c, u2p
			}
		}
	}
}

// mgPsinv applies the smoother u = u + C r on the interior (c[3] is zero
// and skipped).
func mgPsinv(r, u []float64, m1, m2, m3 int, c *[4]float64, r1, r2 []float64) {
	c0, c1, c2 := c[0], c[1], c[2]
	pl := m1 * m2
	n := m1 - 2
	for i3 := 1; i3 < m3-1; i3++ {
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + pl*i3
			// As in mgResid, NPB's line buffers r1 (edge sums) and r2
			// (corner sums) roll in registers.
			ym := r[o-m1 : o]
			yp := r[o+m1 : o+2*m1]
			zm := r[o-pl : o-pl+m1]
			zp := r[o+pl : o+pl+m1]
			ymzm := r[o-m1-pl : o-pl]
			ypzm := r[o+m1-pl : o+2*m1-pl]
			ymzp := r[o-m1+pl : o+pl]
			ypzp := r[o+m1+pl : o+2*m1+pl]
			uc := u[o+1 : o+1+n]
			rc := r[o+1 : o+1+n]
			rl := r[o : o+n]
			rr := r[o+2 : o+2+n]
			rc, rl, rr = rc[:len(uc)], rl[:len(uc)], rr[:len(uc)]
			ym2, yp2, zm2, zp2 := ym[2:2+len(uc)], yp[2:2+len(uc)], zm[2:2+len(uc)], zp[2:2+len(uc)]
			d1, d2, d3, d4 := ymzm[1:1+len(uc)], ypzm[1:1+len(uc)], ymzp[1:1+len(uc)], ypzp[1:1+len(uc)]
			r1m := ym[0] + yp[0] + zm[0] + zp[0]
			r1c := ym[1] + yp[1] + zm[1] + zp[1]
			for i := range uc {
				r1p := ym2[i] + yp2[i] + zm2[i] + zp2[i]
				r2c := d1[i] + d2[i] + d3[i] + d4[i]
				uc[i] = uc[i] + c0*rc[i] + c1*(rl[i]+rr[i]+r1c) + c2*(r2c+r1m+r1p)
				r1m, r1c = r1c, r1p
			}
		}
	}
}

// mgRprj3 restricts the fine residual r (m1k x m2k x m3k) to the coarse
// grid s (m1j x m2j x m3j) with the 27-point full-weighting stencil; coarse
// point j sits on fine point 2j.
func mgRprj3(r []float64, m1k, m2k, m3k int, s []float64, m1j, m2j, m3j int, x1, y1 []float64) {
	plk := m1k * m2k
	plj := m1j * m2j
	_ = m3k
	for j3 := 1; j3 < m3j-1; j3++ {
		i3 := 2 * j3
		for j2 := 1; j2 < m2j-1; j2++ {
			i2 := 2 * j2
			o := m1k*i2 + plk*i3
			c := r[o : o+m1k]
			ym := r[o-m1k : o]
			yp := r[o+m1k : o+2*m1k]
			zm := r[o-plk : o-plk+m1k]
			zp := r[o+plk : o+plk+m1k]
			ymzm := r[o-m1k-plk : o-plk]
			ymzp := r[o-m1k+plk : o+plk]
			ypzm := r[o+m1k-plk : o+2*m1k-plk]
			ypzp := r[o+m1k+plk : o+2*m1k+plk]
			for j1 := 1; j1 < m1j; j1++ {
				i1 := 2*j1 - 1
				x1[i1] = ym[i1] + yp[i1] + zm[i1] + zp[i1]
				y1[i1] = ymzm[i1] + ymzp[i1] + ypzm[i1] + ypzp[i1]
			}
			so := m1j*j2 + plj*j3
			srow := s[so : so+m1j]
			for j1 := 1; j1 < m1j-1; j1++ {
				i1 := 2 * j1
				y2 := ymzm[i1] + ymzp[i1] + ypzm[i1] + ypzp[i1]
				x2 := ym[i1] + yp[i1] + zm[i1] + zp[i1]
				srow[j1] = 0.5*c[i1] + 0.25*(c[i1-1]+c[i1+1]+x2) + 0.125*(x1[i1-1]+x1[i1+1]+y2) + 0.0625*(y1[i1-1]+y1[i1+1])
			}
		}
	}
}

// mgInterp adds the trilinear interpolation of the coarse z (mm1 x mm2 x
// mm3) to the fine u (n1 x n2 x n3), ghosts included.
func mgInterp(z []float64, mm1, mm2, mm3 int, u []float64, n1, n2, n3 int, z1, z2, z3 []float64) {
	plz := mm1 * mm2
	plu := n1 * n2
	_ = n3
	for i3 := 0; i3 < mm3-1; i3++ {
		for i2 := 0; i2 < mm2-1; i2++ {
			o := mm1*i2 + plz*i3
			zc := z[o : o+mm1]
			zy := z[o+mm1 : o+2*mm1]
			zz := z[o+plz : o+plz+mm1]
			zyz := z[o+mm1+plz : o+2*mm1+plz]
			zy, zz, zyz = zy[:len(zc)], zz[:len(zc)], zyz[:len(zc)]
			z1 := z1[:len(zc)]
			z2 := z2[:len(zc)]
			z3 := z3[:len(zc)]
			for i := range zc {
				z1[i] = zy[i] + zc[i]
				z2[i] = zz[i] + zc[i]
				z3[i] = zyz[i] + zz[i] + z1[i]
			}
			fo := n1*(2*i2) + plu*(2*i3)
			u00 := u[fo : fo+n1]
			u10 := u[fo+n1 : fo+2*n1]
			u01 := u[fo+plu : fo+plu+n1]
			u11 := u[fo+n1+plu : fo+2*n1+plu]
			for i1 := 0; i1 < mm1-1; i1++ {
				u00[2*i1] += zc[i1]
				u00[2*i1+1] += 0.5 * (zc[i1+1] + zc[i1])
			}
			for i1 := 0; i1 < mm1-1; i1++ {
				u10[2*i1] += 0.5 * z1[i1]
				u10[2*i1+1] += 0.25 * (z1[i1] + z1[i1+1])
			}
			for i1 := 0; i1 < mm1-1; i1++ {
				u01[2*i1] += 0.5 * z2[i1]
				u01[2*i1+1] += 0.25 * (z2[i1] + z2[i1+1])
			}
			for i1 := 0; i1 < mm1-1; i1++ {
				u11[2*i1] += 0.25 * z3[i1]
				u11[2*i1+1] += 0.125 * (z3[i1] + z3[i1+1])
			}
		}
	}
}

// mgPeriodic fills the ghosts of a block that spans the whole periodic
// domain along axis (0, 1, 2), in NPB's comm3 order.
func mgPeriodic(u []float64, m1, m2, m3, axis int) {
	pl := m1 * m2
	switch axis {
	case 0:
		for i3 := 1; i3 < m3-1; i3++ {
			for i2 := 1; i2 < m2-1; i2++ {
				o := m1*i2 + pl*i3
				u[o] = u[o+m1-2]
				u[o+m1-1] = u[o+1]
			}
		}
	case 1:
		for i3 := 1; i3 < m3-1; i3++ {
			o := pl * i3
			copy(u[o:o+m1], u[o+(m2-2)*m1:o+(m2-1)*m1])
			copy(u[o+(m2-1)*m1:o+m2*m1], u[o+m1:o+2*m1])
		}
	case 2:
		copy(u[0:pl], u[(m3-2)*pl:(m3-1)*pl])
		copy(u[(m3-1)*pl:m3*pl], u[pl:2*pl])
	}
}
