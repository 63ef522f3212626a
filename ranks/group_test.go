package ranks

import (
	"errors"
	"math/rand"
	"slices"
	"testing"
)

// refGroup is the reference model of a group: a plain list of world ranks.
type refGroup []int

func (g refGroup) indexOf(w int) int { return slices.Index(g, w) }

func refUnion(g, h refGroup) refGroup {
	out := slices.Clone(g)
	for _, w := range h {
		if g.indexOf(w) < 0 {
			out = append(out, w)
		}
	}
	return out
}

func refFilter(g, h refGroup, keep bool) refGroup {
	var out refGroup
	for _, w := range g {
		if (h.indexOf(w) >= 0) == keep {
			out = append(out, w)
		}
	}
	return out
}

func refCompare(g, h refGroup) Comparison {
	switch {
	case slices.Equal(g, h):
		return Ident
	case len(g) == len(h) && len(refFilter(g, h, true)) == len(g):
		return Similar
	}
	return Unequal
}

// randGroup draws a random group of distinct world ranks below np, as a Group owned by me and its model.
func randGroup(rng *rand.Rand, np, me int) (*Group, refGroup) {
	perm := rng.Perm(np)[:rng.Intn(np+1)]
	m := make([]int32, len(perm))
	for i, w := range perm {
		m[i] = int32(w)
	}
	return newGroup(m, me), refGroup(perm)
}

func checkGroup(t *testing.T, what string, g *Group, want refGroup, me int) {
	t.Helper()
	if !slices.Equal(g.WorldRanks(), []int(want)) && !(g.Size() == 0 && len(want) == 0) {
		t.Fatalf("%s = %v, want %v", what, g.WorldRanks(), want)
	}
	wantRank := want.indexOf(me)
	if wantRank < 0 {
		wantRank = Undefined
	}
	if g.Rank() != wantRank || g.Size() != len(want) {
		t.Fatalf("%s: Rank %d Size %d, want %d %d", what, g.Rank(), g.Size(), wantRank, len(want))
	}
}

// The set operations, Incl/Excl (plain and by ranges), TranslateRanks and Compare, on random groups, against the
// list model.
func TestGroupOpsRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for iter := 0; iter < 3000; iter++ {
		np := 1 + rng.Intn(12)
		me := rng.Intn(np)
		g, rg := randGroup(rng, np, me)
		h, rh := randGroup(rng, np, me)
		if rng.Intn(8) == 0 { // the world's group, stored as the identity
			g, rg = (&Comm{r: &Rank{id: me}, rank: me, size: np}).Group(), nil
			for i := 0; i < np; i++ {
				rg = append(rg, i)
			}
		}
		checkGroup(t, "g", g, rg, me)
		checkGroup(t, "Union", g.Union(h), refUnion(rg, rh), me)
		checkGroup(t, "Intersection", g.Intersection(h), refFilter(rg, rh, true), me)
		checkGroup(t, "Difference", g.Difference(h), refFilter(rg, rh, false), me)
		if got, want := g.Compare(h), refCompare(rg, rh); got != want {
			t.Fatalf("%v.Compare(%v) = %v, want %v", rg, rh, got, want)
		}
		if g.Compare(g.Union(nil)) != Ident {
			t.Fatalf("%v is not Ident to itself", rg)
		}

		// Incl of a random selection, Excl of it, and the same by ranges of stride ±1..3.
		sel := rng.Perm(len(rg))[:rng.Intn(len(rg)+1)]
		var wantIncl, wantExcl refGroup
		for _, r := range sel {
			wantIncl = append(wantIncl, rg[r])
		}
		for r, w := range rg {
			if !slices.Contains(sel, r) {
				wantExcl = append(wantExcl, w)
			}
		}
		inc, err := g.Incl(sel)
		if err != nil {
			t.Fatal(err)
		}
		checkGroup(t, "Incl", inc, wantIncl, me)
		exc, err := g.Excl(sel)
		if err != nil {
			t.Fatal(err)
		}
		checkGroup(t, "Excl", exc, wantExcl, me)
		if len(rg) > 0 {
			var ranges [][3]int
			var listed []int
			used := make([]bool, len(rg))
			for k := rng.Intn(3); k >= 0; k-- {
				first, stride := rng.Intn(len(rg)), 1+rng.Intn(3)
				if rng.Intn(2) == 0 {
					stride = -stride
				}
				last := first
				for n := rng.Intn(4); n > 0 && last+stride >= 0 && last+stride < len(rg); n-- {
					last += stride
				}
				clash := false
				for r := first; (stride > 0 && r <= last) || (stride < 0 && r >= last); r += stride {
					clash = clash || used[r]
				}
				if clash {
					continue
				}
				for r := first; (stride > 0 && r <= last) || (stride < 0 && r >= last); r += stride {
					used[r] = true
					listed = append(listed, r)
				}
				ranges = append(ranges, [3]int{first, last, stride})
			}
			ri, err := g.RangeIncl(ranges)
			if err != nil {
				t.Fatalf("RangeIncl(%v) of %v: %v", ranges, rg, err)
			}
			want, _ := g.Incl(listed)
			checkGroup(t, "RangeIncl", ri, refGroup(want.WorldRanks()), me)
			re, err := g.RangeExcl(ranges)
			if err != nil {
				t.Fatalf("RangeExcl(%v) of %v: %v", ranges, rg, err)
			}
			want, _ = g.Excl(listed)
			checkGroup(t, "RangeExcl", re, refGroup(want.WorldRanks()), me)
		}

		// TranslateRanks of every rank of g, and ProcNull, into h.
		ranks := []int{ProcNull}
		for r := range rg {
			ranks = append(ranks, r)
		}
		rng.Shuffle(len(ranks), func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
		tr, err := g.TranslateRanks(ranks, h)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range ranks {
			want := ProcNull
			if r != ProcNull {
				if want = rh.indexOf(rg[r]); want < 0 {
					want = Undefined
				}
			}
			if tr[i] != want {
				t.Fatalf("%v.TranslateRanks(%v, %v) = %v; [%d] want %d", rg, ranks, rh, tr, i, want)
			}
		}
	}
}

// The nil group is the empty group everywhere.
func TestGroupNilIsEmpty(t *testing.T) {
	var e *Group
	g := newGroup([]int32{4, 2, 7}, 2)
	if e.Size() != 0 || e.Rank() != Undefined || e.Compare(nil) != Ident || e.Compare(g) != Unequal {
		t.Fatal("nil group is not the empty group")
	}
	if u := e.Union(g); u.Compare(g) != Ident || u.Rank() != 1 {
		t.Fatalf("nil ∪ g = %v rank %d", u, u.Rank())
	}
	if g.Intersection(nil).Size() != 0 || g.Difference(nil).Compare(g) != Ident {
		t.Fatal("set operations with the empty group")
	}
	if tr, err := g.TranslateRanks([]int{0, 2}, nil); err != nil || tr[0] != Undefined || tr[1] != Undefined {
		t.Fatalf("TranslateRanks into the empty group: %v %v", tr, err)
	}
	if _, err := e.Incl([]int{0}); !errors.Is(err, ErrRank) {
		t.Fatalf("Incl of rank 0 of the empty group: %v", err)
	}
	if x, err := e.Incl(nil); err != nil || x.Size() != 0 {
		t.Fatalf("Incl(nil) of the empty group: %v %v", x, err)
	}
}

// Every bad rank list is ErrRank, and the group is not touched.
func TestGroupErrors(t *testing.T) {
	g := newGroup([]int32{10, 11, 12, 13, 14}, 12)
	cases := []struct {
		name string
		call func() error
	}{
		{"Incl out of range", func() error { _, err := g.Incl([]int{0, 5}); return err }},
		{"Incl negative", func() error { _, err := g.Incl([]int{-1}); return err }},
		{"Incl ProcNull", func() error { _, err := g.Incl([]int{ProcNull}); return err }},
		{"Incl repeat", func() error { _, err := g.Incl([]int{1, 3, 1}); return err }},
		{"Excl out of range", func() error { _, err := g.Excl([]int{7}); return err }},
		{"Excl repeat", func() error { _, err := g.Excl([]int{2, 2}); return err }},
		{"RangeIncl stride 0", func() error { _, err := g.RangeIncl([][3]int{{0, 4, 0}}); return err }},
		{"RangeIncl first out of range", func() error { _, err := g.RangeIncl([][3]int{{5, 4, -1}}); return err }},
		{"RangeIncl last out of range", func() error { _, err := g.RangeIncl([][3]int{{0, 6, 2}}); return err }},
		{"RangeIncl negative", func() error { _, err := g.RangeIncl([][3]int{{-1, 2, 1}}); return err }},
		{"RangeIncl never ends up", func() error { _, err := g.RangeIncl([][3]int{{3, 1, 1}}); return err }},
		{"RangeIncl never ends down", func() error { _, err := g.RangeIncl([][3]int{{1, 3, -1}}); return err }},
		{"RangeIncl overlapping ranges", func() error { _, err := g.RangeIncl([][3]int{{0, 2, 1}, {2, 4, 2}}); return err }},
		{"RangeExcl stride 0", func() error { _, err := g.RangeExcl([][3]int{{1, 1, 0}}); return err }},
		{"RangeExcl out of range", func() error { _, err := g.RangeExcl([][3]int{{0, 5, 1}}); return err }},
		{"RangeExcl never ends", func() error { _, err := g.RangeExcl([][3]int{{4, 0, 2}}); return err }},
		{"RangeExcl overlapping ranges", func() error { _, err := g.RangeExcl([][3]int{{4, 0, -2}, {1, 2, 1}, {0, 0, 1}}); return err }},
		{"TranslateRanks out of range", func() error { _, err := g.TranslateRanks([]int{0, 5}, g); return err }},
		{"TranslateRanks negative", func() error { _, err := g.TranslateRanks([]int{-5}, g); return err }},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, ErrRank) {
			t.Errorf("%s: %v, want ErrRank", tc.name, err)
		}
	}
	if got := g.WorldRanks(); !slices.Equal(got, []int{10, 11, 12, 13, 14}) || g.Rank() != 2 {
		t.Fatalf("the group changed: %v rank %d", got, g.Rank())
	}
	// A stride that overshoots last stops before it; single-rank ranges of any stride sign are fine.
	if x, err := g.RangeIncl([][3]int{{0, 4, 3}, {4, 4, -7}}); err != nil || !slices.Equal(x.WorldRanks(), []int{10, 13, 14}) {
		t.Fatalf("RangeIncl {0,4,3},{4,4,-7} = %v, %v", x, err)
	}
}
