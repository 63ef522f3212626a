package collectives

import (
	"math/rand"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// The shared-memory alltoall lets either end copy a block, and members run ahead into the next call while others
// still copy: many back-to-back alltoalls and alltoallvs of varying shapes (the same on every rank), more ranks
// than cores, checked against the sequential definition.
func TestShmAlltoallStress(t *testing.T) {
	const np = 12
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	err := node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
		me := c.Rank()
		rng := rand.New(rand.NewSource(7))
		val := func(from, to, i, round int) int32 { return int32(from<<20 | to<<12 | i<<4 | round&15) }
		for round := 0; round < rounds; round++ {
			if rng.Intn(2) == 0 {
				blk := rng.Intn(40)
				s, r := make([]int32, blk*np), make([]int32, blk*np)
				for to := 0; to < np; to++ {
					for i := 0; i < blk; i++ {
						s[to*blk+i] = val(me, to, i, round)
					}
				}
				if err := Alltoall(c, s, r); err != nil {
					return err
				}
				for from := 0; from < np; from++ {
					for i := 0; i < blk; i++ {
						if r[from*blk+i] != val(from, me, i, round) {
							t.Fatalf("round %d alltoall: from %d [%d] = %x", round, from, i, r[from*blk+i])
						}
					}
				}
				continue
			}
			// alltoallv: cnt[i][j] elements from i to j, packed sends, receives with a gap of one
			cnt := make([][]int, np)
			for i := range cnt {
				cnt[i] = make([]int, np)
				for j := range cnt[i] {
					cnt[i][j] = rng.Intn(30)
				}
			}
			sc, rc, rd := make([]int, np), make([]int, np), make([]int, np)
			stot, rtot := 0, 0
			for j := 0; j < np; j++ {
				sc[j] = cnt[me][j]
				stot += sc[j]
				rc[j], rd[j] = cnt[j][me], rtot
				rtot += rc[j] + 1
			}
			s, r := make([]int32, 0, stot), make([]int32, rtot)
			for j := 0; j < np; j++ {
				for i := 0; i < sc[j]; i++ {
					s = append(s, val(me, j, i, round))
				}
			}
			if err := Alltoallv(c, s, sc, nil, r, rc, rd); err != nil {
				return err
			}
			for j := 0; j < np; j++ {
				for i := 0; i < rc[j]; i++ {
					if r[rd[j]+i] != val(j, me, i, round) {
						t.Fatalf("round %d alltoallv: from %d [%d] = %x", round, j, i, r[rd[j]+i])
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
