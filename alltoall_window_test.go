package gompj_test

import (
	"fmt"
	"testing"

	"github.com/gompj/gompj"
)

// TestLinearAlltoallWindows runs the linear alltoall and alltoallv, blocking and nonblocking, on more ranks than
// two of its windows of peers (collectives.LinearWindow, 32), so that every rank goes through three windows, the
// last one partial. Each result is checked against the sequential definition; the alltoallv's counts vary per
// pair and include zeros, and its receive blocks leave gaps that must stay untouched.
func TestLinearAlltoallWindows(t *testing.T) {
	const np = 2*32 + 5
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		me := c.Rank()
		for _, coll := range []string{"alltoall", "alltoallv", "ialltoall", "ialltoallv"} {
			if err := c.ForceAlgorithm(coll, "linear"); err != nil {
				return err
			}
		}
		val := func(from, to, i, round int) int32 { return int32(from<<20 | to<<8 | i<<3 | round) }
		for round := 0; round < 4; round++ {
			nonblocking := round%2 == 1
			// alltoall: blocks of round+1 elements
			blk := round + 1
			s, r := make([]int32, blk*np), make([]int32, blk*np)
			for to := 0; to < np; to++ {
				for i := 0; i < blk; i++ {
					s[to*blk+i] = val(me, to, i, round)
				}
			}
			if err := alltoall(c, s, r, nonblocking); err != nil {
				return fmt.Errorf("round %d alltoall: %w", round, err)
			}
			for from := 0; from < np; from++ {
				for i := 0; i < blk; i++ {
					if got, want := r[from*blk+i], val(from, me, i, round); got != want {
						return fmt.Errorf("round %d alltoall (nonblocking %v): block from %d [%d] = %x, want %x", round, nonblocking, from, i, got, want)
					}
				}
			}
			// alltoallv: (from+to+round)%4 elements from rank from to rank to (zeros among them), packed sends,
			// receive blocks one element apart (the gap must stay -1)
			count := func(from, to int) int { return (from + to + round) % 4 }
			sc, sd, rc, rd := make([]int, np), make([]int, np), make([]int, np), make([]int, np)
			stot, rtot := 0, 0
			for j := 0; j < np; j++ {
				sc[j], sd[j] = count(me, j), stot
				stot += sc[j]
				rc[j], rd[j] = count(j, me), rtot
				rtot += rc[j] + 1
			}
			sv, rv := make([]int32, stot), make([]int32, rtot)
			for j := 0; j < np; j++ {
				for i := 0; i < sc[j]; i++ {
					sv[sd[j]+i] = val(me, j, i, round)
				}
			}
			for i := range rv {
				rv[i] = -1
			}
			if err := alltoallv(c, sv, sc, sd, rv, rc, rd, nonblocking); err != nil {
				return fmt.Errorf("round %d alltoallv: %w", round, err)
			}
			for from := 0; from < np; from++ {
				for i := 0; i < rc[from]; i++ {
					if got, want := rv[rd[from]+i], val(from, me, i, round); got != want {
						return fmt.Errorf("round %d alltoallv (nonblocking %v): block from %d [%d] = %x, want %x", round, nonblocking, from, i, got, want)
					}
				}
				if gap := rv[rd[from]+rc[from]]; gap != -1 {
					return fmt.Errorf("round %d alltoallv (nonblocking %v): the gap after the block from %d holds %x", round, nonblocking, from, gap)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// alltoall runs an alltoall of s into r, blocking, or nonblocking and waited for at once.
func alltoall[T any](c *gompj.Comm, s, r []T, nonblocking bool) error {
	if !nonblocking {
		return c.Alltoall(s, r)
	}
	q, err := c.Ialltoall(s, r)
	if err != nil {
		return err
	}
	_, err = q.Wait()
	return err
}

// alltoallv is alltoall's v form.
func alltoallv(c *gompj.Comm, s []int32, sc, sd []int, r []int32, rc, rd []int, nonblocking bool) error {
	if !nonblocking {
		return c.Alltoallv(s, sc, sd, r, rc, rd)
	}
	q, err := c.Ialltoallv(s, sc, sd, r, rc, rd)
	if err != nil {
		return err
	}
	_, err = q.Wait()
	return err
}
