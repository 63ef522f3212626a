package npb

// MG's stencil operators on one block with one ghost layer, x fastest:
// element (i1, i2, i3) of an m1 x m2 x m3 block is a[i1 + m1*(i2 + m2*i3)].
// They leave the ghosts to comm3.
//
// resid and psinv use NPB's formulation: for each point the four face
// neighbours in the y-z plane are summed into u1 and the four corner
// neighbours into u2, and the x neighbours then share those sums. Two more
// sums are shared here, which is where most of the time goes in scalar code:
//
//   - u1 and u2 roll along x in registers instead of NPB's line buffers;
//   - the z-pair sum zs(i2) = u(i2, i3-1) + u(i2, i3+1) of a row is used
//     three times: in u1 of row i2 and in u2 of rows i2-1 and i2+1
//     (u2(i2) = zs(i2-1) + zs(i2+1)). Three rolling row buffers hold it, so
//     a point costs 10 additions instead of 12 (resid) and 11 instead of 13
//     (psinv).
//
// The sums are reassociated ((a+b)+(c+d) for ((a+b)+c)+d), which changes the
// results in the last bits only; MG's verification tolerance is 1e-8.

// mgZPairRow sets s[i] = lo[i] + hi[i] for the whole row.
func mgZPairRow(s, lo, hi []float64) {
	lo = lo[:len(s)]
	hi = hi[:len(s)]
	for i := range s {
		s[i] = lo[i] + hi[i]
	}
}

// mgResid computes r = v - A u on the interior (a[1] is zero and skipped).
// v and r may be the same slice. b0, b1, b2 are scratch rows of at least m1
// elements.
func mgResid(u, v, r []float64, m1, m2, m3 int, a *[4]float64, b0, b1, b2 []float64) {
	a0, a2, a3 := a[0], a[2], a[3]
	pl := m1 * m2
	n := m1 - 2
	for i3 := 1; i3 < m3-1; i3++ {
		// zs rows of i2 = 0 and 1; the loop adds row i2+1 as it goes.
		sm, sc, sp := b0[:m1], b1[:m1], b2[:m1]
		lo, hi := pl*(i3-1), pl*(i3+1)
		mgZPairRow(sm, u[lo:lo+m1], u[hi:hi+m1])
		mgZPairRow(sc, u[lo+m1:lo+2*m1], u[hi+m1:hi+2*m1])
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + pl*i3
			ym := u[o-m1 : o]
			yp := u[o+m1 : o+2*m1]
			zmn := u[o+m1-pl : o+2*m1-pl] // row i2+1, plane i3-1
			zpn := u[o+m1+pl : o+2*m1+pl] // row i2+1, plane i3+1
			yp, zmn, zpn = yp[:len(ym)], zmn[:len(ym)], zpn[:len(ym)]
			sm, sc, sp = sm[:len(ym)], sc[:len(ym)], sp[:len(ym)]
			sp[0] = zmn[0] + zpn[0]
			sp[1] = zmn[1] + zpn[1]
			u1m := ym[0] + yp[0] + sc[0]
			u2m := sm[0] + sp[0]
			u1c := ym[1] + yp[1] + sc[1]
			u2c := sm[1] + sp[1]
			rc := r[o+1 : o+1+n]
			vc := v[o+1 : o+1+n]
			uc := u[o+1 : o+1+n]
			vc, uc = vc[:len(rc)], uc[:len(rc)]
			// Element i of these is at i1 = i+2, the point ahead.
			ym2, yp2 := ym[2:2+len(rc)], yp[2:2+len(rc)]
			zm2, zp2 := zmn[2:2+len(rc)], zpn[2:2+len(rc)]
			sm2, sc2, sp2 := sm[2:2+len(rc)], sc[2:2+len(rc)], sp[2:2+len(rc)]
			for i := range rc {
				s := zm2[i] + zp2[i]
				sp2[i] = s
				u1p := ym2[i] + yp2[i] + sc2[i]
				u2p := sm2[i] + s
				rc[i] = vc[i] - a0*uc[i] - a2*(u2c+u1m+u1p) - a3*(u2m+u2p)
				u1m, u1c = u1c, u1p
				u2m, u2c = u2c, u2p
			}
			sm, sc, sp = sc, sp, sm
		}
	}
}

// mgPsinv applies the smoother u = u + C r on the interior (c[3] is zero
// and skipped). b0, b1, b2 are scratch rows of at least m1 elements.
func mgPsinv(r, u []float64, m1, m2, m3 int, c *[4]float64, b0, b1, b2 []float64) {
	c0, c1, c2 := c[0], c[1], c[2]
	pl := m1 * m2
	n := m1 - 2
	for i3 := 1; i3 < m3-1; i3++ {
		sm, sc, sp := b0[:m1], b1[:m1], b2[:m1]
		lo, hi := pl*(i3-1), pl*(i3+1)
		mgZPairRow(sm, r[lo:lo+m1], r[hi:hi+m1])
		mgZPairRow(sc, r[lo+m1:lo+2*m1], r[hi+m1:hi+2*m1])
		for i2 := 1; i2 < m2-1; i2++ {
			o := m1*i2 + pl*i3
			ym := r[o-m1 : o]
			yp := r[o+m1 : o+2*m1]
			zmn := r[o+m1-pl : o+2*m1-pl]
			zpn := r[o+m1+pl : o+2*m1+pl]
			rr := r[o : o+m1]
			yp, zmn, zpn, rr = yp[:len(ym)], zmn[:len(ym)], zpn[:len(ym)], rr[:len(ym)]
			sm, sc, sp = sm[:len(ym)], sc[:len(ym)], sp[:len(ym)]
			sp[0] = zmn[0] + zpn[0]
			sp[1] = zmn[1] + zpn[1]
			r1m := ym[0] + yp[0] + sc[0]
			r1c := ym[1] + yp[1] + sc[1]
			spc := sp[1] // zs(i2+1) at the current point
			rm, rcur := rr[0], rr[1]
			uc := u[o+1 : o+1+n]
			ym2, yp2 := ym[2:2+len(uc)], yp[2:2+len(uc)]
			zm2, zp2 := zmn[2:2+len(uc)], zpn[2:2+len(uc)]
			sm1, sc2, sp2 := sm[1:1+len(uc)], sc[2:2+len(uc)], sp[2:2+len(uc)]
			rr2 := rr[2 : 2+len(uc)]
			for i := range uc {
				s := zm2[i] + zp2[i]
				sp2[i] = s
				r1p := ym2[i] + yp2[i] + sc2[i]
				r2c := sm1[i] + spc
				rp := rr2[i]
				uc[i] = uc[i] + c0*rcur + c1*(rm+rp+r1c) + c2*(r2c+r1m+r1p)
				r1m, r1c = r1c, r1p
				rm, rcur = rcur, rp
				spc = s
			}
			sm, sc, sp = sc, sp, sm
		}
	}
}

// mgRprj3 restricts the fine residual r (m1k x m2k x m3k) to the coarse
// grid s (m1j x m2j x m3j) with the 27-point full-weighting stencil; coarse
// point j sits on fine point 2j. The face and corner sums at the odd fine
// points are shared by neighbouring coarse points and roll in registers.
func mgRprj3(r []float64, m1k, m2k, m3k int, s []float64, m1j, m2j, m3j int) {
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
			ym, yp, zm, zp = ym[:len(c)], yp[:len(c)], zm[:len(c)], zp[:len(c)]
			ymzm, ymzp, ypzm, ypzp = ymzm[:len(c)], ymzp[:len(c)], ypzm[:len(c)], ypzp[:len(c)]
			so := m1j*j2 + plj*j3
			srow := s[so+1 : so+m1j-1]
			x1m := ym[1] + yp[1] + zm[1] + zp[1]
			y1m := ymzm[1] + ymzp[1] + ypzm[1] + ypzp[1]
			j := 0
			for i := 2; i < len(c)-1; i += 2 {
				x1p := ym[i+1] + yp[i+1] + zm[i+1] + zp[i+1]
				y1p := ymzm[i+1] + ymzp[i+1] + ypzm[i+1] + ypzp[i+1]
				y2 := ymzm[i] + ymzp[i] + ypzm[i] + ypzp[i]
				x2 := ym[i] + yp[i] + zm[i] + zp[i]
				srow[j] = 0.5*c[i] + 0.25*(c[i-1]+c[i+1]+x2) + 0.125*(x1m+x1p+y2) + 0.0625*(y1m+y1p)
				x1m, y1m = x1p, y1p
				j++
			}
		}
	}
}

// mgInterp adds the trilinear interpolation of the coarse z (mm1 x mm2 x
// mm3) to the fine u (n1 x n2 x n3), ghosts included; with add false it
// stores it instead, which is NPB's zero-then-add on a fresh level without
// the pass that zeroes it (every fine point is written). The x-direction
// sums of the coarse rows roll in registers, and the four fine rows fed by
// one coarse row are updated in a single pass.
func mgInterp(z []float64, mm1, mm2, mm3 int, u []float64, n1, n2, n3 int, add bool) {
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
			fo := n1*(2*i2) + plu*(2*i3)
			nf := 2 * (mm1 - 1)
			u00 := u[fo : fo+nf]
			u10 := u[fo+n1 : fo+n1+nf]
			u01 := u[fo+plu : fo+plu+nf]
			u11 := u[fo+n1+plu : fo+n1+plu+nf]
			u10, u01, u11 = u10[:len(u00)], u01[:len(u00)], u11[:len(u00)]
			z0 := zc[0]
			z1 := zy[0] + z0
			z2 := zz[0] + z0
			z3 := zyz[0] + zz[0] + z1
			j := 1
			if add {
				for k := 0; k < len(u00)-1; k += 2 {
					z0n := zc[j]
					z1n := zy[j] + z0n
					z2n := zz[j] + z0n
					z3n := zyz[j] + zz[j] + z1n
					u00[k] += z0
					u00[k+1] += 0.5 * (z0n + z0)
					u10[k] += 0.5 * z1
					u10[k+1] += 0.25 * (z1 + z1n)
					u01[k] += 0.5 * z2
					u01[k+1] += 0.25 * (z2 + z2n)
					u11[k] += 0.25 * z3
					u11[k+1] += 0.125 * (z3 + z3n)
					z0, z1, z2, z3 = z0n, z1n, z2n, z3n
					j++
				}
				continue
			}
			for k := 0; k < len(u00)-1; k += 2 {
				z0n := zc[j]
				z1n := zy[j] + z0n
				z2n := zz[j] + z0n
				z3n := zyz[j] + zz[j] + z1n
				u00[k] = z0
				u00[k+1] = 0.5 * (z0n + z0)
				u10[k] = 0.5 * z1
				u10[k+1] = 0.25 * (z1 + z1n)
				u01[k] = 0.5 * z2
				u01[k+1] = 0.25 * (z2 + z2n)
				u11[k] = 0.25 * z3
				u11[k+1] = 0.125 * (z3 + z3n)
				z0, z1, z2, z3 = z0n, z1n, z2n, z3n
				j++
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
				row := u[o : o+m1]
				row[0] = row[m1-2]
				row[m1-1] = row[1]
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
