package ranks

import (
	"errors"
	"math/rand"
	"slices"
	"testing"
	"unsafe"
)

// The reference for a view is the list of the slice indices it selects, in order, computed here from the
// definitions of MPI_Type_vector, MPI_Type_indexed and MPI_Type_create_subarray.

func refVector(count, blockLen, stride int) []int {
	var idx []int
	for b := range count {
		for i := range blockLen {
			idx = append(idx, b*stride+i)
		}
	}
	return idx
}

func refIndexed(lens, displs []int) []int {
	var idx []int
	for b, l := range lens {
		for i := range l {
			idx = append(idx, displs[b]+i)
		}
	}
	return idx
}

func refSubarray(sizes, sub, starts []int) []int {
	var idx []int
	d := len(sizes)
	co := make([]int, d)
	var rec func(k int)
	rec = func(k int) {
		if k == d {
			off := 0
			for i := range d {
				off = off*sizes[i] + starts[i] + co[i]
			}
			idx = append(idx, off)
			return
		}
		for co[k] = 0; co[k] < sub[k]; co[k]++ {
			rec(k + 1)
		}
	}
	rec(0)
	return idx
}

// randomView makes a random view over a slice of n int64 (its values are their indices) and its reference.
func randomView(t *testing.T, rng *rand.Rand, buf []int64) (*View, []int) {
	t.Helper()
	n := len(buf)
	for {
		switch rng.Intn(3) {
		case 0:
			count, bl := rng.Intn(12), rng.Intn(6)
			stride := bl + rng.Intn(7) - 1
			if rng.Intn(5) == 0 {
				stride = bl // contiguous
			}
			v, err := Vector(buf, count, bl, stride)
			ref := refVector(count, bl, stride)
			if err != nil {
				if len(ref) > 0 && (stride < 0 || slices.Max(ref) < n) && !(stride < 0 && count > 1) {
					t.Fatalf("Vector(%d, %d, %d) over %d: %v", count, bl, stride, n, err)
				}
				continue
			}
			return v, ref
		case 1:
			k := rng.Intn(8)
			lens, displs := make([]int, k), make([]int, k)
			for i := range k {
				lens[i] = rng.Intn(5)
				displs[i] = rng.Intn(max(1, n-lens[i]))
				if i > 0 && rng.Intn(4) == 0 { // adjacent blocks, to be merged
					displs[i] = displs[i-1] + lens[i-1]
				}
			}
			v, err := Indexed(buf, lens, displs)
			if err != nil {
				continue
			}
			return v, refIndexed(lens, displs)
		default:
			d := 1 + rng.Intn(4)
			sizes, sub, starts := make([]int, d), make([]int, d), make([]int, d)
			total := 1
			for i := range d {
				sizes[i] = 1 + rng.Intn(5)
				sub[i] = rng.Intn(sizes[i] + 1)
				if rng.Intn(3) == 0 {
					sub[i] = sizes[i] // full extents merge into runs
				}
				starts[i] = rng.Intn(sizes[i] - sub[i] + 1)
				total *= sizes[i]
			}
			if total > n {
				continue
			}
			v, err := Subarray(buf, sizes, sub, starts)
			if err != nil {
				t.Fatalf("Subarray(%v, %v, %v): %v", sizes, sub, starts, err)
			}
			return v, refSubarray(sizes, sub, starts)
		}
	}
}

func iota64(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return s
}

// TestViewModel: random views and windows gather, scatter and copy what the reference says, from any byte
// position.
func TestViewModel(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for iter := range 3000 {
		src := iota64(64)
		v, ref := randomView(t, rng, src)
		if v.Len() != len(ref) {
			t.Fatalf("iter %d: %v has Len %d, reference %d", iter, v, v.Len(), len(ref))
		}
		// a window
		first := rng.Intn(len(ref) + 1)
		n := rng.Intn(len(ref) - first + 1)
		vm, _ := MemOf(v)
		w := vm.Window(first, n)
		want := ref[first : first+n]
		got := make([]int64, n)
		w.CopyTo(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(got))), n*8))
		for i := range got {
			if int(got[i]) != want[i] {
				t.Fatalf("iter %d: %v window [%d, %d) gathers %v, want %v", iter, v, first, first+n, got, want)
			}
		}
		// gather from an arbitrary byte position (the device's view of a partial transfer)
		if n > 0 {
			pos := rng.Intn(n * 8)
			l := rng.Intn(n*8 - pos + 1)
			b := make([]byte, l)
			w.view.gather(b, w.off*8+pos)
			all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), len(src)*8)
			for i := range b {
				e, r := (pos+i)/8, (pos+i)%8
				if b[i] != all[want[e]*8+r] {
					t.Fatalf("iter %d: byte %d from position %d: %d, want %d", iter, i, pos, b[i], all[want[e]*8+r])
				}
			}
		}
		// scatter into a view of another slice (if it does not overlap), and view-to-view copies
		dst := make([]int64, 64)
		dv, dref := randomView(t, rng, dst)
		if dv.Overlaps() {
			continue
		}
		k := min(n, dv.Len())
		dm, _ := MemOf(dv)
		CopyMem(dm, w, k*8)
		expect := make([]int64, 64)
		for i := range k {
			expect[dref[i]] = int64(want[i])
		}
		if !slices.Equal(dst, expect) {
			t.Fatalf("iter %d: copying %v window [%d,%d) into %v: %v, want %v", iter, v, first, first+n, dv, dst, expect)
		}
		// contiguous into a view
		clear(dst)
		plain := iota64(k)
		CopyMem(dm, sliceMem(TypeInt64, plain), k*8)
		clear(expect)
		for i := range k {
			expect[dref[i]] = int64(i)
		}
		if !slices.Equal(dst, expect) {
			t.Fatalf("iter %d: scattering into %v: %v, want %v", iter, dv, dst, expect)
		}
	}
}

// TestViewFastPaths: one element per block, every element size, against the general path.
func TestViewFastPaths(t *testing.T) {
	check := func(name string, buf any, n, stride int) {
		t.Helper()
		v, err := Vector(buf, n, 1, stride)
		if err != nil {
			t.Fatal(err)
		}
		sz := v.d.sz
		got := make([]byte, n*sz)
		v.d.gather(got, 0)
		m, _ := MemOf(buf)
		all := unsafe.Slice((*byte)(m.Ptr), m.N*sz)
		for i := range n {
			if !slices.Equal(got[i*sz:(i+1)*sz], all[i*stride*sz:(i*stride+1)*sz]) {
				t.Fatalf("%s: element %d gathered wrong", name, i)
			}
		}
		for i := range got {
			got[i] = byte(i*7 + 3)
		}
		v.d.scatter(got, 0)
		for i := range n {
			if !slices.Equal(got[i*sz:(i+1)*sz], all[i*stride*sz:(i*stride+1)*sz]) {
				t.Fatalf("%s: element %d scattered wrong", name, i)
			}
		}
	}
	const n, stride = 37, 5
	l := (n-1)*stride + 1
	check("int8", make([]int8, l), n, stride)
	check("bool", make([]bool, l), n, stride)
	check("uint16", make([]uint16, l), n, stride)
	check("float32", make([]float32, l), n, stride)
	check("float64", make([]float64, l), n, stride)
	check("int", make([]int, l), n, stride)
	check("complex64", make([]complex64, l), n, stride)
	check("complex128", make([]complex128, l), n, stride)
}

func TestViewErrors(t *testing.T) {
	buf := make([]float64, 10)
	for _, c := range []struct {
		name  string
		err   func() error
		class error
	}{
		{"vector past the end", func() error { _, err := Vector(buf, 4, 2, 3); return err }, ErrBuffer},
		{"vector of one block past the end", func() error { _, err := Vector(buf, 1, 11, 0); return err }, ErrBuffer},
		{"vector with a negative stride", func() error { _, err := Vector(buf, 2, 1, -1); return err }, ErrBuffer},
		{"vector with a negative count", func() error { _, err := Vector(buf, -1, 1, 1); return err }, ErrArg},
		{"vector with a huge stride", func() error { _, err := Vector(buf, 3, 1, maxInt/2); return err }, ErrBuffer},
		{"indexed lists of two lengths", func() error { _, err := Indexed(buf, []int{1}, nil); return err }, ErrArg},
		{"indexed past the end", func() error { _, err := Indexed(buf, []int{3}, []int{8}); return err }, ErrBuffer},
		{"indexed before the start", func() error { _, err := Indexed(buf, []int{1}, []int{-1}); return err }, ErrBuffer},
		{"indexed negative length", func() error { _, err := Indexed(buf, []int{-1}, []int{0}); return err }, ErrArg},
		{"subarray larger than the slice", func() error { _, err := Subarray(buf, []int{3, 4}, []int{1, 1}, []int{0, 0}); return err }, ErrBuffer},
		{"subarray leaving the array", func() error { _, err := Subarray(buf, []int{2, 5}, []int{2, 2}, []int{0, 4}); return err }, ErrBuffer},
		{"subarray lists of two lengths", func() error { _, err := Subarray(buf, []int{2, 5}, []int{2}, []int{0, 0}); return err }, ErrArg},
		{"subarray with a negative size", func() error { _, err := Subarray(buf, []int{-2}, []int{0}, []int{0}); return err }, ErrArg},
		{"a view over a view", func() error {
			v, _ := Vector(buf, 2, 1, 2)
			_, err := Vector(v, 1, 1, 1)
			return err
		}, ErrBuffer},
		{"a view over a struct", func() error { _, err := Vector(struct{}{}, 1, 1, 1); return err }, ErrBuffer},
		{"a view over nil", func() error { _, err := Indexed(nil, nil, nil); return err }, ErrBuffer},
	} {
		if err := c.err(); !errors.Is(err, c.class) {
			t.Errorf("%s: %v, want %v", c.name, err, c.class)
		}
	}
	// Overlap is found; edge cases are not mistaken for it.
	for _, c := range []struct {
		name    string
		v       func() (*View, error)
		overlap bool
	}{
		{"stride below the block", func() (*View, error) { return Vector(buf, 3, 3, 2) }, true},
		{"stride zero", func() (*View, error) { return Vector(buf, 2, 1, 0) }, true},
		{"touching blocks", func() (*View, error) { return Vector(buf, 3, 2, 2) }, false},
		{"indexed out of order", func() (*View, error) { return Indexed(buf, []int{2, 2}, []int{4, 0}) }, false},
		{"indexed twice", func() (*View, error) { return Indexed(buf, []int{2, 2}, []int{4, 5}) }, true},
	} {
		v, err := c.v()
		if err != nil || v.Overlaps() != c.overlap {
			t.Errorf("%s: overlap %v, %v; want %v", c.name, v.Overlaps(), err, c.overlap)
		}
	}
	// Blocks: merged where they continue each other, one for a contiguous vector, runs for full sub-array rows.
	for _, c := range []struct {
		name   string
		v      func() (*View, error)
		blocks int
	}{
		{"contiguous vector", func() (*View, error) { return Vector(buf, 5, 2, 2) }, 1},
		{"merged indexed", func() (*View, error) { return Indexed(buf, []int{2, 0, 3, 1}, []int{0, 9, 2, 8}) }, 2},
		{"full rows", func() (*View, error) {
			return Subarray(make([]int, 60), []int{3, 4, 5}, []int{2, 4, 5}, []int{1, 0, 0})
		}, 1},
		{"a column of planes", func() (*View, error) {
			return Subarray(make([]int, 60), []int{3, 4, 5}, []int{3, 4, 1}, []int{0, 0, 2})
		}, 12},
	} {
		v, err := c.v()
		if err != nil || v.Blocks() != c.blocks {
			t.Errorf("%s: %d blocks, %v; want %d", c.name, v.Blocks(), err, c.blocks)
		}
	}
}

// TestZeroView: a nil or zero View answers its methods and is refused by the calls, without a panic.
func TestZeroView(t *testing.T) {
	for _, v := range []*View{nil, {}} {
		if v.Len() != 0 || v.Type() != TypeNone || v.Overlaps() || v.Blocks() != 0 || v.String() != "View(nil)" {
			t.Errorf("%#v: Len %d Type %v Overlaps %v Blocks %d %q", v, v.Len(), v.Type(), v.Overlaps(), v.Blocks(), v.String())
		}
		m, ok := MemOf(v)
		if !ok || checkMem(m, false) == nil || checkMem(m, true) == nil {
			t.Errorf("%#v: MemOf %v %v, accepted", v, m, ok)
		}
	}
}

// TestViewBlockwiseCopies: copies between one-level strided views of equal blocks (the block-at-a-time loops),
// whole and from block boundaries, against the index lists.
func TestViewBlockwiseCopies(t *testing.T) {
	for _, bl := range []int{1, 2, 5} {
		for _, strides := range [][2]int{{bl, bl + 3}, {bl + 1, 2*bl + 7}, {3 * bl, bl}} {
			const count = 9
			src, dst := iota64(count*strides[0]+bl), make([]int64, count*strides[1]+bl)
			sv, _ := Vector(src, count, bl, strides[0])
			dv, _ := Vector(dst, count, bl, strides[1])
			sref, dref := refVector(count, bl, strides[0]), refVector(count, bl, strides[1])
			sm, _ := MemOf(sv)
			dm, _ := MemOf(dv)
			for _, w := range [][2]int{{0, count}, {2, 5}, {count - 1, 1}} { // windows in blocks
				clear(dst)
				from, n := w[0]*bl, w[1]*bl
				CopyMem(dm.Window(from, n), sm.Window(from, n), n*8)
				want := make([]int64, len(dst))
				for i := from; i < from+n; i++ {
					want[dref[i]] = int64(sref[i])
				}
				if !slices.Equal(dst, want) {
					t.Fatalf("blocks of %d, strides %v, window %v: %v, want %v", bl, strides, w, dst, want)
				}
			}
		}
	}
}

// TestTypeElems: elems counts whole elements of every type as a division by its size would, and says when bytes
// are not a whole number of them.
func TestTypeElems(t *testing.T) {
	for ty := Type(1); ty < numTypes; ty++ {
		s := uint64(ty.Size())
		for _, n := range []uint64{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 1000, 1 << 20, 1<<20 + 3} {
			got, whole := ty.elems(n)
			if got != n/s || whole != (n%s == 0) {
				t.Errorf("%s: elems(%d) = %d, %v; want %d, %v", ty, n, got, whole, n/s, n%s == 0)
			}
		}
	}
}
