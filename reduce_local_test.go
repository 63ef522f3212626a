package gompj_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	. "github.com/gompj/gompj"
)

// ReduceLocal applies an op on one rank as a reduction would: inout[i] = in[i] op inout[i], for the predefined ops
// over their types, Loc pairs, user ops in their order (in is the lower rank), and Views; and refuses what a
// reduction refuses.
func TestReduceLocal(t *testing.T) {
	in, inout := []float64{1, 5, 3}, []float64{4, 2, 6}
	if err := ReduceLocal(in, inout, Sum); err != nil || !slices.Equal(inout, []float64{5, 7, 9}) {
		t.Fatalf("Sum: %v %v", inout, err)
	}
	ints := []int32{7, -2, 9}
	if err := ReduceLocal([]int32{3, 4, 10}, ints, Max); err != nil || !slices.Equal(ints, []int32{7, 4, 10}) {
		t.Fatalf("Max: %v %v", ints, err)
	}
	locs := []ValueIndex{{Value: 1, Index: 3}, {Value: 8, Index: 1}}
	if err := ReduceLocal([]ValueIndex{{Value: 2, Index: 0}, {Value: 8, Index: 0}}, locs, MaxLoc); err != nil ||
		locs[0] != (ValueIndex{Value: 2, Index: 0}) || locs[1] != (ValueIndex{Value: 8, Index: 0}) {
		t.Fatalf("MaxLoc: %v %v", locs, err)
	}
	// A non-commutative op: in comes first.
	concat := NewOp(func(in, inout []int) {
		for i := range inout {
			inout[i] = in[i]*10 + inout[i]
		}
	}, false)
	digits := []int{2, 4}
	if err := ReduceLocal([]int{1, 3}, digits, concat); err != nil || !slices.Equal(digits, []int{12, 34}) {
		t.Fatalf("user op: %v %v", digits, err)
	}
	// Views: a column of a 3x2 grid into another.
	grid, out := []float64{1, 0, 2, 0, 3, 0}, []float64{0, 10, 0, 20, 0, 30}
	a, err := Vector(grid, 3, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Vector(out[1:], 3, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReduceLocal(a, b, Sum); err != nil || !slices.Equal(out, []float64{0, 11, 0, 22, 0, 33}) {
		t.Fatalf("views: %v %v", out, err)
	}
	// What a reduction refuses.
	for _, c := range []struct {
		name      string
		in, inout any
		op        Op
		want      error
	}{
		{"types", []float64{1}, []int{1}, Sum, ErrType},
		{"lengths", []float64{1, 2}, []float64{1}, Sum, ErrArg},
		{"an op of another type", []float64{1}, []float64{1}, concat, ErrOp},
		{"Band of floats", []float64{1}, []float64{1}, Band, ErrOp},
		{"the zero Op", []float64{1}, []float64{1}, Op{}, ErrOp},
		{"a struct", &struct{}{}, []float64{1}, Sum, ErrBuffer},
	} {
		if err := ReduceLocal(c.in, c.inout, c.op); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestWtickAndProcessorName(t *testing.T) {
	if tick := Wtick(); tick <= 0 || tick > 1e-6 {
		t.Errorf("Wtick %v", tick)
	}
	host, _ := os.Hostname()
	if name, err := ProcessorName(); err != nil || name != host || name == "" {
		t.Errorf("ProcessorName %q, %v (host %q)", name, err, host)
	}
}
