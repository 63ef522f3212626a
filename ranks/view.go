package ranks

import (
	"fmt"
	"slices"
	"sort"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/internal/mem"
)

// View is a selection of a slice's elements, in order: what MPI's derived datatypes (Type_vector, Type_indexed,
// Type_create_subarray) describe, as a view over a Go slice instead of a type object. A message sent from a View of
// k elements of type T is k elements of T, whatever their layout (MPI's type signature): it may be received into a
// []T of k or more elements, or into any View of T, and a View may receive a message sent from a slice.
//
// A View keeps its slice's memory alive and reads or writes it only during the calls it is passed to. It never
// changes once made, so one View may be used by several calls and goroutines at once (receiving into it from two
// at once is a race on the slice, as for a slice). A View whose blocks overlap may be sent, not received into.
//
// A View is a handle on its description, which lives on the heap: requests and messages keep the description,
// never the *View, so that passing a *View as an interface argument does not make that argument escape (which
// would cost every primitive slice passed to Send a heap box). A zero View is refused by every call.
type View struct {
	d *viewData
}

// viewData describes a view's selection. A window of it (Mem.off, Mem.N) is what a call moves.
type viewData struct {
	typ  Type
	sz   int            // bytes per element
	base unsafe.Pointer // the slice's first element (nil for an empty slice)

	// The selection: nb blocks of consecutive elements; block b starts at element boff(b) of the slice and holds
	// blen(b) elements. Two forms. Strided (Vector, Subarray): blocks of run elements at start + Σ i_k·stride[k]
	// over 0 ≤ i_k < count[k], the last level innermost, block b's digits i_k being b in mixed radix count.
	// Listed (Indexed): offs[b], lens[b], and pre[b] = the elements of the blocks before b.
	listed bool
	start  int
	run    int
	count  []int
	stride []int
	offs   []int
	lens   []int
	pre    []int
	nb     int
	total  int // elements selected

	overlap bool // an element is selected twice
}

// Len is the number of elements the view selects (0 for a nil or zero View).
func (v *View) Len() int { return v.data().total }

// Type is the element type of the view's slice.
func (v *View) Type() Type { return v.data().typ }

// Overlaps reports whether the view selects an element twice (it may then be sent, not received into).
func (v *View) Overlaps() bool { return v.data().overlap }

// Blocks is the number of runs of consecutive elements the view selects (the pieces a copy or a send moves).
func (v *View) Blocks() int { return v.data().nb }

var noView viewData

func (v *View) data() *viewData {
	if v == nil || v.d == nil {
		return &noView
	}
	return v.d
}

func (v *View) String() string {
	if v == nil || v.d == nil {
		return "View(nil)"
	}
	return v.d.String()
}

func (v *viewData) String() string {
	return fmt.Sprintf("View(%d of %s in %d blocks)", v.total, v.typ, v.nb)
}

// viewBase returns a primitive slice's element type, memory and length, for a view over it.
func viewBase(what string, buf any) (Mem, error) {
	if _, ok := buf.(*View); ok {
		return Mem{}, fmt.Errorf("%w: %s over a View (make views over slices)", ErrBuffer, what)
	}
	m, ok := MemOf(buf)
	if !ok {
		return Mem{}, fmt.Errorf("%w: %s over %T: views select elements of a slice of a primitive type", ErrBuffer, what, buf)
	}
	return m, nil
}

func newView(m Mem) *viewData {
	return &viewData{typ: m.Type, sz: m.Type.Size(), base: m.Ptr}
}

// Vector selects count blocks of blockLen consecutive elements of buf, the starts of consecutive blocks stride
// elements apart, the first at buf[0] (MPI_Type_vector). A stride below blockLen makes overlapping blocks.
// ErrArg for a negative count or length; ErrBuffer for a view that reaches past the slice (or before it: a
// negative stride).
func Vector(buf any, count, blockLen, stride int) (*View, error) {
	m, err := viewBase("Vector", buf)
	if err != nil {
		return nil, err
	}
	if count < 0 || blockLen < 0 {
		return nil, fmt.Errorf("%w: Vector of %d blocks of %d elements", ErrArg, count, blockLen)
	}
	v := newView(m)
	if count == 0 || blockLen == 0 {
		return &View{v}, nil
	}
	if count > 1 {
		if stride < 0 {
			return nil, fmt.Errorf("%w: Vector with stride %d reaches before the slice's first element", ErrBuffer, stride)
		}
		if stride > 0 && count-1 > (m.N-blockLen)/stride || m.N < blockLen {
			return nil, fmt.Errorf("%w: Vector of %d blocks of %d, stride %d, reaches past a slice of %d", ErrBuffer, count, blockLen, stride, m.N)
		}
	} else if blockLen > m.N {
		return nil, fmt.Errorf("%w: Vector of a block of %d in a slice of %d", ErrBuffer, blockLen, m.N)
	}
	// In bytes, not elements: a stride of 0 lets a few elements be selected any number of times, and a view of
	// 2^61 float64s passed, whose size in bytes wrapped round to 0: a send of it delivered nothing, without error.
	if count > maxInt/m.Type.Size()/blockLen {
		return nil, fmt.Errorf("%w: Vector of %d blocks of %d elements of %d bytes", ErrArg, count, blockLen, m.Type.Size())
	}
	v.total = count * blockLen
	switch {
	case count == 1 || stride == blockLen: // contiguous
		v.run, v.nb = count*blockLen, 1
	default:
		v.run, v.nb = blockLen, count
		v.count, v.stride = []int{count}, []int{stride}
		v.overlap = stride < blockLen
	}
	return &View{v}, nil
}

const maxInt = int(^uint(0) >> 1)

// Indexed selects blockLens[i] consecutive elements of buf from element displs[i], block after block in the
// order given (MPI_Type_indexed). Empty blocks are dropped and blocks that continue each other are merged. ErrArg
// for lists of different lengths or a negative length; ErrBuffer for a block that reaches past the slice (or
// before it).
func Indexed(buf any, blockLens, displs []int) (*View, error) {
	m, err := viewBase("Indexed", buf)
	if err != nil {
		return nil, err
	}
	if len(blockLens) != len(displs) {
		return nil, fmt.Errorf("%w: Indexed with %d block lengths and %d displacements", ErrArg, len(blockLens), len(displs))
	}
	v := newView(m)
	v.listed = true
	for i, l := range blockLens {
		d := displs[i]
		switch {
		case l < 0:
			return nil, fmt.Errorf("%w: Indexed block %d of length %d", ErrArg, i, l)
		case l == 0:
			continue
		case d < 0 || d > m.N-l:
			return nil, fmt.Errorf("%w: Indexed block %d, elements [%d, %d), reaches past a slice of %d", ErrBuffer, i, d, d+l, m.N)
		}
		if v.total > maxInt/v.sz-l { // in bytes, as for Vector
			return nil, fmt.Errorf("%w: Indexed selects more than %d elements", ErrArg, maxInt/v.sz)
		}
		if k := len(v.offs) - 1; k >= 0 && v.offs[k]+v.lens[k] == d {
			v.lens[k] += l
		} else {
			v.pre = append(v.pre, v.total)
			v.offs = append(v.offs, d)
			v.lens = append(v.lens, l)
		}
		v.total += l
	}
	v.nb = len(v.offs)
	// Overlap: sort the blocks by start and compare neighbours.
	order := make([]int, v.nb)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return v.offs[order[a]] < v.offs[order[b]] })
	for i := 1; i < len(order); i++ {
		p, q := order[i-1], order[i]
		if v.offs[p]+v.lens[p] > v.offs[q] {
			v.overlap = true
			break
		}
	}
	return &View{v}, nil
}

// Subarray selects the sub-array of extents subSizes starting at coordinates starts of the row-major array of
// extents sizes that buf holds (MPI_Type_create_subarray, MPI_ORDER_C): len(buf) must be at least prod(sizes).
// ErrArg for lists of different lengths or negative extents; ErrBuffer for a sub-array that leaves the array or an
// array larger than the slice.
func Subarray(buf any, sizes, subSizes, starts []int) (*View, error) {
	m, err := viewBase("Subarray", buf)
	if err != nil {
		return nil, err
	}
	d := len(sizes)
	if len(subSizes) != d || len(starts) != d {
		return nil, fmt.Errorf("%w: Subarray with %d sizes, %d sub-sizes and %d starts", ErrArg, d, len(subSizes), len(starts))
	}
	total, sub := 1, 1
	for i := range d {
		if sizes[i] < 0 || subSizes[i] < 0 || starts[i] < 0 {
			return nil, fmt.Errorf("%w: Subarray dimension %d: size %d, sub-size %d, start %d", ErrArg, i, sizes[i], subSizes[i], starts[i])
		}
		if starts[i] > sizes[i]-subSizes[i] {
			return nil, fmt.Errorf("%w: Subarray dimension %d: [%d, %d) leaves the array's %d", ErrBuffer, i, starts[i], starts[i]+subSizes[i], sizes[i])
		}
		if sizes[i] > 0 && total > maxInt/sizes[i] {
			return nil, fmt.Errorf("%w: Subarray of %v elements", ErrArg, sizes)
		}
		total *= sizes[i]
		sub *= subSizes[i]
	}
	if total > m.N {
		return nil, fmt.Errorf("%w: Subarray of a %v array (%d elements) over a slice of %d", ErrBuffer, sizes, total, m.N)
	}
	v := newView(m)
	if sub == 0 {
		return &View{v}, nil
	}
	v.total = sub
	// Row-major strides; the innermost dimension is contiguous, and so is every dimension inside which the
	// sub-array spans its whole extent: those merge into the run.
	strides := make([]int, d)
	st := 1
	for i := d - 1; i >= 0; i-- {
		strides[i] = st
		v.start += starts[i] * st
		st *= sizes[i]
	}
	v.run = 1
	i := d - 1
	for ; i >= 0; i-- {
		v.run *= subSizes[i]
		if subSizes[i] != sizes[i] {
			i--
			break
		}
	}
	for ; i >= 0; i-- {
		if subSizes[i] == 1 {
			continue
		}
		v.count = append(v.count, subSizes[i])
		v.stride = append(v.stride, strides[i])
	}
	slices.Reverse(v.count)
	slices.Reverse(v.stride)
	v.nb = 1
	for _, c := range v.count {
		v.nb *= c
	}
	return &View{v}, nil
}

// Window returns elements [first, first+n) of m: a sub-slice of contiguous memory, or a window of a View's
// selection (collectives address blocks of a buffer this way; the result is a value, so it costs nothing).
func (m Mem) Window(first, n int) Mem {
	if first < 0 || n < 0 || first > m.N-n {
		panic(fmt.Sprintf("gompj: window [%d, %d) of %d elements", first, first+n, m.N))
	}
	if m.view != nil {
		m.off += first
	} else if n > 0 {
		m.Ptr = unsafe.Add(m.Ptr, first*m.Type.Size())
	}
	m.N = n
	return m
}

// IsView reports whether m is (a window of) a View rather than contiguous memory.
func (m Mem) IsView() bool { return m.view != nil }

// boff returns block b's first element, relative to the slice.
func (v *viewData) boff(b int) int {
	if v.listed {
		return v.offs[b]
	}
	switch len(v.count) {
	case 0:
		return v.start
	case 1:
		return v.start + b*v.stride[0]
	}
	off := v.start
	for k := len(v.count) - 1; k >= 0; k-- {
		c := v.count[k]
		off += (b % c) * v.stride[k]
		b /= c
	}
	return off
}

func (v *viewData) blen(b int) int {
	if v.listed {
		return v.lens[b]
	}
	return v.run
}

// locate returns the block holding element e of the selection and e's index inside it.
func (v *viewData) locate(e int) (b, in int) {
	if !v.listed {
		return e / v.run, e % v.run
	}
	b = sort.Search(v.nb, func(i int) bool { return v.pre[i] > e }) - 1
	return b, e - v.pre[b]
}

// cursor walks the bytes of a view's selection as contiguous pieces.
type cursor struct {
	v    *viewData
	b    int // current block
	in   int // bytes already passed in block b
	left int // bytes still to walk
}

// cursorAt starts a walk of n bytes at byte pos of v's selection.
func (v *viewData) cursorAt(pos, n int) cursor {
	c := cursor{v: v, left: n}
	if n == 0 {
		return c
	}
	b, in := v.locate(pos / v.sz)
	c.b, c.in = b, in*v.sz+pos%v.sz
	return c
}

// next returns the next piece, at most max bytes (nil, 0 at the end).
func (c *cursor) next(max int) (unsafe.Pointer, int) {
	if c.left == 0 {
		return nil, 0
	}
	v := c.v
	blk := v.blen(c.b) * v.sz
	k := min(blk-c.in, max, c.left)
	p := unsafe.Add(v.base, v.boff(c.b)*v.sz+c.in)
	c.in += k
	c.left -= k
	if c.in == blk {
		c.b++
		c.in = 0
	}
	return p, k
}

func bytesAt(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

// gather copies len(dst) bytes of v's selection from byte pos into dst.
func (v *viewData) gather(dst []byte, pos int) {
	if len(dst) == 0 {
		return
	}
	if v.fast(pos) && gatherFast(v, dst, pos) {
		return
	}
	if v.blockwise(pos, len(dst)) {
		rb, b := v.run*v.sz, pos/(v.run*v.sz)
		for i := 0; i < len(dst); i, b = i+rb, b+1 {
			mem.Copy(dst[i:i+rb], bytesAt(unsafe.Add(v.base, (v.start+b*v.stride[0])*v.sz), rb))
		}
		return
	}
	c := v.cursorAt(pos, len(dst))
	for i := 0; i < len(dst); {
		p, k := c.next(len(dst) - i)
		mem.Copy(dst[i:i+k], bytesAt(p, k))
		i += k
	}
}

// scatter copies src into v's selection from byte pos.
func (v *viewData) scatter(src []byte, pos int) {
	if len(src) == 0 {
		return
	}
	if v.fast(pos) && scatterFast(v, src, pos) {
		return
	}
	if v.blockwise(pos, len(src)) {
		rb, b := v.run*v.sz, pos/(v.run*v.sz)
		for i := 0; i < len(src); i, b = i+rb, b+1 {
			mem.Copy(bytesAt(unsafe.Add(v.base, (v.start+b*v.stride[0])*v.sz), rb), src[i:i+rb])
		}
		return
	}
	c := v.cursorAt(pos, len(src))
	for i := 0; i < len(src); {
		p, k := c.next(len(src) - i)
		mem.Copy(bytesAt(p, k), src[i:i+k])
		i += k
	}
}

// blockwise reports whether n bytes from byte pos are whole blocks of a one-level strided view: then the copy is a
// loop over blocks, a memmove each, with no cursor.
func (v *viewData) blockwise(pos, n int) bool {
	rb := v.run * v.sz
	return !v.listed && len(v.count) == 1 && pos%rb == 0 && n%rb == 0
}

// fast reports whether the one-level strided loops apply from byte pos: single elements per block, at element
// boundaries.
func (v *viewData) fast(pos int) bool {
	return !v.listed && len(v.count) == 1 && v.run == 1 && pos%v.sz == 0
}

// gatherFast and scatterFast copy one element per block with a typed load and store: a column of a matrix costs
// what a hand-written packing loop costs, not a memmove call per element. They apply to element sizes whose type
// is aligned to its size (complex64, 8 bytes aligned to 4, takes the general path).
func gatherFast(v *viewData, dst []byte, pos int) bool {
	if len(dst)%v.sz != 0 {
		return false
	}
	b0 := pos / v.sz // block index = element index: one element per block
	n := len(dst) / v.sz
	src := unsafe.Add(v.base, (v.start+b0*v.stride[0])*v.sz)
	step := v.stride[0] * v.sz
	d := unsafe.Pointer(unsafe.SliceData(dst))
	switch {
	case v.sz == 8 && v.typ != TypeComplex64:
		for i := range n {
			*(*uint64)(unsafe.Add(d, i*8)) = *(*uint64)(unsafe.Add(src, i*step))
		}
	case v.sz == 4:
		for i := range n {
			*(*uint32)(unsafe.Add(d, i*4)) = *(*uint32)(unsafe.Add(src, i*step))
		}
	case v.sz == 2:
		for i := range n {
			*(*uint16)(unsafe.Add(d, i*2)) = *(*uint16)(unsafe.Add(src, i*step))
		}
	case v.sz == 1:
		for i := range n {
			*(*byte)(unsafe.Add(d, i)) = *(*byte)(unsafe.Add(src, i*step))
		}
	default:
		return false
	}
	return true
}

func scatterFast(v *viewData, src []byte, pos int) bool {
	if len(src)%v.sz != 0 {
		return false
	}
	b0 := pos / v.sz
	n := len(src) / v.sz
	dst := unsafe.Add(v.base, (v.start+b0*v.stride[0])*v.sz)
	step := v.stride[0] * v.sz
	s := unsafe.Pointer(unsafe.SliceData(src))
	switch {
	case v.sz == 8 && v.typ != TypeComplex64:
		for i := range n {
			*(*uint64)(unsafe.Add(dst, i*step)) = *(*uint64)(unsafe.Add(s, i*8))
		}
	case v.sz == 4:
		for i := range n {
			*(*uint32)(unsafe.Add(dst, i*step)) = *(*uint32)(unsafe.Add(s, i*4))
		}
	case v.sz == 2:
		for i := range n {
			*(*uint16)(unsafe.Add(dst, i*step)) = *(*uint16)(unsafe.Add(s, i*2))
		}
	case v.sz == 1:
		for i := range n {
			*(*byte)(unsafe.Add(dst, i*step)) = *(*byte)(unsafe.Add(s, i))
		}
	default:
		return false
	}
	return true
}

// copyViews copies n bytes from byte sp of src's selection to byte dp of dst's, piece by piece: straight from
// strided source to strided destination, no packing.
func copyViews(dst *viewData, dp int, src *viewData, sp int, n int) {
	if dst.fast(dp) && src.fast(sp) && dst.sz == src.sz && n%dst.sz == 0 && copyStrided(dst, dp, src, sp, n/dst.sz) {
		return
	}
	if dst.blockwise(dp, n) && src.blockwise(sp, n) && dst.run*dst.sz == src.run*src.sz {
		rb, db, sb := dst.run*dst.sz, dp/(dst.run*dst.sz), sp/(src.run*src.sz)
		for i := 0; i < n; i, db, sb = i+rb, db+1, sb+1 {
			mem.Copy(bytesAt(unsafe.Add(dst.base, (dst.start+db*dst.stride[0])*dst.sz), rb),
				bytesAt(unsafe.Add(src.base, (src.start+sb*src.stride[0])*src.sz), rb))
		}
		return
	}
	dc, sc := dst.cursorAt(dp, n), src.cursorAt(sp, n)
	var d, s []byte // the current pieces (advanced by slicing: no pointer ever leaves its object)
	for n > 0 {
		if len(d) == 0 {
			p, k := dc.next(n)
			d = bytesAt(p, k)
		}
		if len(s) == 0 {
			p, k := sc.next(n)
			s = bytesAt(p, k)
		}
		k := mem.Copy(d, s)
		d, s, n = d[k:], s[k:], n-k
	}
}

// copyStrided copies n single-element blocks from one one-level strided view to another with typed loads and
// stores: a column into a column.
func copyStrided(dst *viewData, dp int, src *viewData, sp int, n int) bool {
	sz := dst.sz
	d := unsafe.Add(dst.base, (dst.start+dp/sz*dst.stride[0])*sz)
	s := unsafe.Add(src.base, (src.start+sp/sz*src.stride[0])*sz)
	ds, ss := dst.stride[0]*sz, src.stride[0]*sz
	switch {
	case sz == 8 && dst.typ != TypeComplex64:
		for i := range n {
			*(*uint64)(unsafe.Add(d, i*ds)) = *(*uint64)(unsafe.Add(s, i*ss))
		}
	case sz == 4:
		for i := range n {
			*(*uint32)(unsafe.Add(d, i*ds)) = *(*uint32)(unsafe.Add(s, i*ss))
		}
	case sz == 2:
		for i := range n {
			*(*uint16)(unsafe.Add(d, i*ds)) = *(*uint16)(unsafe.Add(s, i*ss))
		}
	case sz == 1:
		for i := range n {
			*(*byte)(unsafe.Add(d, i*ds)) = *(*byte)(unsafe.Add(s, i*ss))
		}
	default:
		return false
	}
	return true
}

// CopyMem copies the first n bytes of src into dst, either of which may be contiguous or a view: a view is read or
// written block by block, in place. Both must hold n bytes.
func CopyMem(dst, src Mem, n int) {
	switch {
	case n <= 0:
	case dst.view == nil && src.view == nil:
		mem.Copy(bytesAt(dst.Ptr, n), bytesAt(src.Ptr, n))
	case dst.view == nil:
		src.view.gather(bytesAt(dst.Ptr, n), src.off*src.view.sz)
	case src.view == nil:
		dst.view.scatter(bytesAt(src.Ptr, n), dst.off*dst.view.sz)
	default:
		copyViews(dst.view, dst.off*dst.view.sz, src.view, src.off*src.view.sz, n)
	}
}

// Pieces implements device.Pieces: the selection's bytes from off, as its blocks hold them.
func (v *viewData) Pieces(off, max int, dst [][]byte) int {
	max = min(max, v.total*v.sz-off)
	if max <= 0 {
		return 0
	}
	c := v.cursorAt(off, max)
	n := 0
	for n < len(dst) {
		p, k := c.next(c.left)
		if k == 0 {
			break
		}
		dst[n] = bytesAt(p, k)
		n++
	}
	return n
}

// Gather implements device.Packer: bytes from off of the selection into dst, with the view's fast loops.
func (v *viewData) Gather(off int, dst []byte) { v.gather(dst, off) }

// Scatter implements device.Packer.
func (v *viewData) Scatter(off int, src []byte) { v.scatter(src, off) }

var _ device.Packer = (*viewData)(nil)

// copyInto copies m's elements into b (len(b) == m.Size()) and returns the contiguous memory of that copy: a
// buffered send, or SendrecvReplace, sends from a copy, whether m is a slice or a View.
func (m Mem) copyInto(b []byte) Mem {
	m.CopyTo(b)
	return Mem{Type: m.Type, Ptr: unsafe.Pointer(unsafe.SliceData(b)), N: m.N}
}

// payload is m as a device payload: its bytes, or its View's pieces.
func (m Mem) payload() device.Payload {
	if m.view != nil {
		return device.Payload{Segs: m.view, Off: m.off * m.view.sz, Len: m.Size()}
	}
	return device.Contiguous(m.Bytes())
}

// CopyTo copies the first len(dst) bytes of m (contiguous or a view) into dst: packing.
func (m Mem) CopyTo(dst []byte) {
	if len(dst) == 0 {
		return
	}
	if m.view != nil {
		m.view.gather(dst, m.off*m.view.sz)
		return
	}
	mem.Copy(dst, bytesAt(m.Ptr, len(dst)))
}

// CopyFrom copies src into the first len(src) bytes of m (contiguous or a view): unpacking.
func (m Mem) CopyFrom(src []byte) {
	if len(src) == 0 {
		return
	}
	if m.view != nil {
		m.view.scatter(src, m.off*m.view.sz)
		return
	}
	mem.Copy(bytesAt(m.Ptr, len(src)), src)
}

// SliceOf returns b seen as a slice of n elements of type t (a primitive type), sharing b's memory; nil for an
// unknown type. The collectives hand a View's packed copy to code that takes slices this way.
func SliceOf(t Type, b []byte) any {
	p, n := unsafe.Pointer(unsafe.SliceData(b)), 0
	if sz := t.Size(); sz > 0 {
		n = len(b) / sz
	}
	switch t {
	case TypeByte:
		return unsafe.Slice((*byte)(p), n)
	case TypeInt8:
		return unsafe.Slice((*int8)(p), n)
	case TypeInt16:
		return unsafe.Slice((*int16)(p), n)
	case TypeInt32:
		return unsafe.Slice((*int32)(p), n)
	case TypeInt64:
		return unsafe.Slice((*int64)(p), n)
	case TypeUint16:
		return unsafe.Slice((*uint16)(p), n)
	case TypeUint32:
		return unsafe.Slice((*uint32)(p), n)
	case TypeUint64:
		return unsafe.Slice((*uint64)(p), n)
	case TypeInt:
		return unsafe.Slice((*int)(p), n)
	case TypeUint:
		return unsafe.Slice((*uint)(p), n)
	case TypeFloat32:
		return unsafe.Slice((*float32)(p), n)
	case TypeFloat64:
		return unsafe.Slice((*float64)(p), n)
	case TypeComplex64:
		return unsafe.Slice((*complex64)(p), n)
	case TypeComplex128:
		return unsafe.Slice((*complex128)(p), n)
	case TypeBool:
		return unsafe.Slice((*bool)(p), n)
	}
	return nil
}
