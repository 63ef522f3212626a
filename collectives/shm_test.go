package collectives

import (
	"math/rand"
	"runtime"
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

// Where the members outnumber the processors, an allreduce above the inline size goes chunked rather than through
// staging copies (stagedAllreduce): with GOMAXPROCS 1 and 9 members, sizes on both sides of the switch, in place
// and not, float64 and int32, checked against the sequential sum; and the switch falls where its rule says.
func TestShmAllreduceStagedOrChunked(t *testing.T) {
	const np = 9
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := newShmComm(np)
	if s.procs != 1 {
		t.Fatalf("procs %d, want GOMAXPROCS 1", s.procs)
	}
	for _, c := range []struct {
		total  int
		staged bool
	}{{256, true}, {728, true}, {736, false}, {4096, false}, {4104, false}} {
		if got := s.stagedAllreduce(c.total); got != c.staged {
			t.Errorf("%d members on 1 processor, %d bytes: staged %v, want %v", np, c.total, got, c.staged)
		}
	}
	if wide := (&shmComm{n: np, procs: 8}); !wide.stagedAllreduce(4096) {
		t.Error("9 members on 8 processors, 4096 bytes: not staged")
	}
	counts := []int{31, 91, 92, 93, 512, 513, 1024}
	err := node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
		me := c.Rank()
		for round, n := range counts {
			f, fr := make([]float64, n), make([]float64, n)
			ii := make([]int32, 2*n)
			for i := range f {
				f[i] = float64(me*1000 + i + round)
			}
			for i := range ii {
				ii[i] = int32(me*7 + i)
			}
			if err := Allreduce(c, f, fr, Sum); err != nil {
				return err
			}
			if err := Allreduce(c, InPlace, ii, Sum); err != nil {
				return err
			}
			for i := range fr {
				want := 0.0
				for r := 0; r < np; r++ {
					want += float64(r*1000 + i + round)
				}
				if fr[i] != want {
					t.Errorf("rank %d, %d float64s: [%d] = %v, want %v", me, n, i, fr[i], want)
					return nil
				}
			}
			for i := range ii {
				want := int32(0)
				for r := 0; r < np; r++ {
					want += int32(r*7 + i)
				}
				if ii[i] != want {
					t.Errorf("rank %d, %d int32s in place: [%d] = %d, want %d", me, 2*n, i, ii[i], want)
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
