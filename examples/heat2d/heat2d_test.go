package main

import (
	"fmt"
	"math"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// TestHeat2D runs the solver in the harness's modes, on process grids of 1, 2x2 and 3x2 ranks (uneven blocks of a
// 37x37 plate), with each halo exchange, and compares every rank's block with a sequential run of the same grid:
// point for point, bit for bit (each point's update adds the same four numbers in the same order), and the
// residual to rounding (its sum runs in another order).
func TestHeat2D(t *testing.T) {
	const n, iters = 37, 60
	ref, refRes := sequential(n, iters)
	for _, np := range []int{1, 4, 6} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			harness.Run(t, np, func(c *gompj.Comm) error {
				for _, halo := range []string{"sendrecv", "neighbor", "persistent"} {
					b, err := solve(c, n, iters, halo)
					if err != nil {
						return fmt.Errorf("%s: %w", halo, err)
					}
					if math.Abs(b.residual-refRes) > 1e-12*refRes {
						return fmt.Errorf("%s: residual %v, sequential %v", halo, b.residual, refRes)
					}
					for i := 0; i < b.rows; i++ {
						for j := 0; j < b.cols; j++ {
							got := b.u[b.at(i+1, j+1)]
							want := ref[(b.row0+i+1)*(n+2)+b.col0+j+1]
							if got != want {
								return fmt.Errorf("%s: rank %d point (%d, %d): %v, sequential %v", halo, c.Rank(), b.row0+i, b.col0+j, got, want)
							}
						}
					}
					b.cart.Free()
				}
				return nil
			})
		})
	}
}
