package sweep

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Point is one point of a series: a process count and a value.
type Point struct {
	NP    int
	Value float64
}

// Series is the rows of one (kernel, class, label): one line of a chart.
type Series struct {
	Kernel, Class, Label string
	Rows                 []Row // sorted by NP, one per NP (the one with the highest Mop/s when a label repeats one)
}

// Group splits rows into series, in the order their labels first appear, one row per process count. Rows that
// did not verify, and rows with no Mop/s figure, are left out: their numbers mean nothing.
func Group(rows []Row) []Series {
	type key struct{ kernel, class, label string }
	var order []key
	by := map[key]map[int]Row{}
	for _, r := range rows {
		if !r.Verified || math.IsNaN(r.MopsTotal) || r.MopsTotal <= 0 || r.NP <= 0 {
			continue
		}
		k := key{r.Kernel, r.Class, r.Label}
		if by[k] == nil {
			by[k] = map[int]Row{}
			order = append(order, k)
		}
		if old, ok := by[k][r.NP]; !ok || r.MopsTotal > old.MopsTotal {
			by[k][r.NP] = r
		}
	}
	out := make([]Series, 0, len(order))
	for _, k := range order {
		s := Series{Kernel: k.kernel, Class: k.class, Label: k.label}
		for _, r := range by[k] {
			s.Rows = append(s.Rows, r)
		}
		slices.SortFunc(s.Rows, func(a, b Row) int { return cmp.Compare(a.NP, b.NP) })
		out = append(out, s)
	}
	return out
}

// Mops is the series' Mop/s total against np.
func (s Series) Mops() []Point {
	pts := make([]Point, len(s.Rows))
	for i, r := range s.Rows {
		pts[i] = Point{r.NP, r.MopsTotal}
	}
	return pts
}

// Speedup is the series' speedup against np, relative to its own np=1 row or, when it has none, to its
// smallest np, which is taken as perfectly scaled (see SpeedupFrom). Plot uses Bases to find a better base.
func (s Series) Speedup() []Point {
	if len(s.Rows) == 0 {
		return nil
	}
	return s.SpeedupFrom(s.Rows[0]) // the smallest np, which is 1 when there is an np=1 row
}

// SpeedupFrom is the series' speedup against np relative to base: speedup(np) = base.NP × Mop/s(np) /
// Mop/s(base). Every run of a kernel and class does the same operations, so the ratio of Mop/s is the inverse
// ratio of times, and reference rows need no time.
func (s Series) SpeedupFrom(base Row) []Point {
	pts := make([]Point, len(s.Rows))
	for i, r := range s.Rows {
		pts[i] = Point{r.NP, float64(base.NP) * r.MopsTotal / base.MopsTotal}
	}
	return pts
}

// Bases picks the row each series' speedup is measured from: its own np=1 row; else the np=1 row of another
// series of the same kernel and class and the same source, the first word of the label ("gompj nodes=2" takes
// "gompj onenode"'s: one rank runs alike whatever the placement); else its own smallest np, taken as perfectly
// scaled.
func Bases(ss []Series) []Row {
	bases := make([]Row, len(ss))
	source := func(label string) string { w, _, _ := strings.Cut(label, " "); return w }
	for i, s := range ss {
		if len(s.Rows) == 0 {
			continue
		}
		bases[i] = s.Rows[0]
		if s.Rows[0].NP == 1 {
			continue
		}
		for _, o := range ss {
			if o.Kernel == s.Kernel && o.Class == s.Class && source(o.Label) == source(s.Label) &&
				len(o.Rows) > 0 && o.Rows[0].NP == 1 {
				bases[i] = o.Rows[0]
				break
			}
		}
	}
	return bases
}
