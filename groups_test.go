package gompj_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

func checkf(ok bool, format string, a ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, a...)
}

// useComm checks a new communicator against the world ranks it should hold, in order, by an Allreduce of the world
// ranks and a ring of point-to-point messages carrying them.
func useComm(c *gompj.Comm, worldMe int, want []int) error {
	if c == nil {
		return fmt.Errorf("nil communicator, want %v", want)
	}
	if c.Size() != len(want) || want[c.Rank()] != worldMe {
		return fmt.Errorf("rank %d of %d, want world rank %d at its place in %v", c.Rank(), c.Size(), worldMe, want)
	}
	if got := c.Group().WorldRanks(); !slices.Equal(got, want) {
		return fmt.Errorf("group %v, want %v", got, want)
	}
	sum := []int{0}
	if err := c.Allreduce([]int{worldMe}, sum, gompj.Sum); err != nil {
		return err
	}
	total := 0
	for _, w := range want {
		total += w
	}
	if sum[0] != total {
		return fmt.Errorf("allreduce of world ranks %d, want %d", sum[0], total)
	}
	n := c.Size()
	got := []int{-1}
	if _, err := c.Sendrecv([]int{worldMe}, (c.Rank()+1)%n, 3, got, (c.Rank()+n-1)%n, 3); err != nil {
		return err
	}
	return checkf(got[0] == want[(c.Rank()+n-1)%n], "ring: got world rank %d from the left, want %d", got[0],
		want[(c.Rank()+n-1)%n])
}

// Groups, Create and CreateGroup, Compare, and their errors, in the three modes.
func TestModesGroups(t *testing.T) {
	harness.Run(t, 6, func(world *gompj.Comm) error {
		me, np := world.Rank(), world.Size()
		wg := world.Group()
		if err := checkf(wg.Size() == np && wg.Rank() == me, "world group: rank %d of %d", wg.Rank(), wg.Size()); err != nil {
			return err
		}

		// Create: odd ranks, in reverse order; the others get nil.
		odd, err := wg.Incl([]int{5, 3, 1})
		if err != nil {
			return err
		}
		c, err := world.Create(odd)
		if err != nil {
			return err
		}
		if me%2 == 1 {
			if err := useComm(c, me, []int{5, 3, 1}); err != nil {
				return fmt.Errorf("Create(odd): %w", err)
			}
			if err := c.Free(); err != nil {
				return err
			}
		} else if c != nil {
			return fmt.Errorf("Create(odd) gave rank %d a communicator", me)
		}

		// Create with disjoint groups (MPI-2.2): each rank passes its own half; each half gets its communicator.
		half, err := wg.RangeIncl([][3]int{{me % 2, np - 1, 2}})
		if err != nil {
			return err
		}
		hc, err := world.Create(half)
		if err != nil {
			return err
		}
		if err := useComm(hc, me, half.WorldRanks()); err != nil {
			return fmt.Errorf("Create(half): %w", err)
		}

		// Create of the empty group: nil everywhere.
		if none, err := world.Create(wg.Difference(wg)); none != nil || err != nil {
			return fmt.Errorf("Create(empty) = %v, %v", none, err)
		}

		// CreateGroup: only the members call it. Two disjoint groups under one tag, and each rank also in groups
		// that overlap, created at once from several goroutines under distinct tags.
		cg, err := world.CreateGroup(half, 7)
		if err != nil {
			return err
		}
		if err := useComm(cg, me, half.WorldRanks()); err != nil {
			return fmt.Errorf("CreateGroup(half): %w", err)
		}
		var wait sync.WaitGroup
		errs := make([]error, np)
		for j := 0; j < np; j++ {
			// Group j: every rank but j, starting after j.
			var ranks []int
			for k := 1; k < np; k++ {
				ranks = append(ranks, (j+k)%np)
			}
			if j == me {
				continue
			}
			wait.Add(1)
			go func() {
				defer wait.Done()
				g, err := wg.Incl(ranks)
				if err == nil {
					var gc *gompj.Comm
					if gc, err = world.CreateGroup(g, 100+j); err == nil {
						err = useComm(gc, me, ranks)
						err = errors.Join(err, gc.Free())
					}
				}
				errs[j] = err
			}()
		}
		wait.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("concurrent CreateGroup: %w", err)
		}

		// Compare.
		dup, err := world.Dup()
		if err != nil {
			return err
		}
		rev, err := world.Split(0, -me)
		if err != nil {
			return err
		}
		for _, tc := range []struct {
			name string
			a, b *gompj.Comm
			want gompj.Comparison
		}{
			{"world, world", world, world, gompj.Ident},
			{"world, dup", world, dup, gompj.Congruent},
			{"world, reversed", world, rev, gompj.Similar},
			{"world, half", world, hc, gompj.Unequal},
			{"half, CreateGroup(half)", hc, cg, gompj.Congruent},
			{"world, nil", world, nil, gompj.Unequal},
		} {
			if got := tc.a.Compare(tc.b); got != tc.want {
				return fmt.Errorf("Compare(%s) = %v, want %v", tc.name, got, tc.want)
			}
		}
		if got := wg.Compare(rev.Group()); got != gompj.Similar {
			return fmt.Errorf("group of the reversed world: %v", got)
		}
		// Rank 0 of the reversed world is world rank np-1, its last rank world rank 0; each is in this rank's
		// half, at its place there, or not.
		place := func(w int) int {
			if i := slices.Index(half.WorldRanks(), w); i >= 0 {
				return i
			}
			return gompj.Undefined
		}
		tr, err := rev.Group().TranslateRanks([]int{0, np - 1, gompj.ProcNull}, hc.Group())
		if err != nil || !slices.Equal(tr, []int{place(np - 1), place(0), gompj.ProcNull}) {
			return fmt.Errorf("TranslateRanks: %v %v", tr, err)
		}

		// Bad input: every error is local (no rank waits for another), and the job goes on.
		for _, tc := range []struct {
			name string
			call func() error
			want error
		}{
			{"Incl out of range", func() error { _, err := wg.Incl([]int{np}); return err }, gompj.ErrRank},
			{"Incl repeat", func() error { _, err := wg.Incl([]int{0, 0}); return err }, gompj.ErrRank},
			{"Excl out of range", func() error { _, err := wg.Excl([]int{-1}); return err }, gompj.ErrRank},
			{"Excl repeat", func() error { _, err := wg.Excl([]int{1, 2, 1}); return err }, gompj.ErrRank},
			{"RangeIncl stride 0", func() error { _, err := wg.RangeIncl([][3]int{{0, 1, 0}}); return err }, gompj.ErrRank},
			{"RangeIncl out of range", func() error { _, err := wg.RangeIncl([][3]int{{0, np, 1}}); return err }, gompj.ErrRank},
			{"RangeIncl inconsistent", func() error { _, err := wg.RangeIncl([][3]int{{3, 1, 1}}); return err }, gompj.ErrRank},
			{"RangeIncl overlapping", func() error { _, err := wg.RangeIncl([][3]int{{0, 2, 1}, {1, 1, 1}}); return err }, gompj.ErrRank},
			{"RangeExcl inconsistent", func() error { _, err := wg.RangeExcl([][3]int{{1, 3, -1}}); return err }, gompj.ErrRank},
			{"TranslateRanks out of range", func() error { _, err := wg.TranslateRanks([]int{np}, half); return err }, gompj.ErrRank},
			{"Create of a group not in the communicator", func() error { _, err := hc.Create(wg); return err }, gompj.ErrGroup},
			{"CreateGroup of a group not in the communicator", func() error { _, err := hc.CreateGroup(wg, 1); return err }, gompj.ErrGroup},
			{"CreateGroup by a non-member", func() error {
				other, _ := wg.Excl([]int{me})
				_, err := world.CreateGroup(other, 1)
				return err
			}, gompj.ErrGroup},
			{"CreateGroup bad tag", func() error { _, err := world.CreateGroup(wg, -3); return err }, gompj.ErrTag},
			{"CreateGroup on a freed communicator", func() error { _, err := c.CreateGroup(wg, 1); return err }, gompj.ErrComm},
			{"Merge of an intracommunicator", func() error { _, err := world.Merge(false); return err }, gompj.ErrComm},
		} {
			if me%2 == 0 && tc.name == "CreateGroup on a freed communicator" {
				continue // c is nil on the even ranks
			}
			if err := tc.call(); !errors.Is(err, tc.want) {
				return fmt.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if err := useComm(dup, me, wg.WorldRanks()); err != nil {
			return fmt.Errorf("after the errors: %w", err)
		}
		return errors.Join(dup.Free(), rev.Free(), hc.Free(), cg.Free())
	})
}
