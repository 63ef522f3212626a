package collectives

import (
	"fmt"
	"unsafe"

	"github.com/gompj/gompj/ranks"
)

// Loc is a value and the index (usually a rank) it came from: the element of MaxLoc and MinLoc reductions
// (MPI_DOUBLE_INT and friends). Ties keep the smaller index.
type Loc[T LocValue] struct {
	Value T
	Index int
}

// LocValue lists the value types Loc supports.
type LocValue interface {
	~float64 | ~float32 | ~int | ~int32 | ~int64
}

type opCode uint8

const (
	opNone opCode = iota
	opSum
	opProd
	opMin
	opMax
	opLand
	opLor
	opLxor
	opBand
	opBor
	opBxor
	opMaxLoc
	opMinLoc
	opUser
)

// Op is a reduction operation. The zero Op is invalid (ErrOp).
type Op struct{ d *opDef }

type opDef struct {
	code        opCode
	name        string
	commutative bool
	userKind    kind                                  // element kind a user op accepts
	userKernel  func(inout, in unsafe.Pointer, n int) // inout[i] = in[i] op inout[i]
	bytesKernel kernel                                // userKernel over byte ranges
}

// The predefined operations.
var (
	Sum    = Op{&opDef{code: opSum, name: "sum", commutative: true}}
	Prod   = Op{&opDef{code: opProd, name: "prod", commutative: true}}
	Min    = Op{&opDef{code: opMin, name: "min", commutative: true}}
	Max    = Op{&opDef{code: opMax, name: "max", commutative: true}}
	Land   = Op{&opDef{code: opLand, name: "land", commutative: true}}
	Lor    = Op{&opDef{code: opLor, name: "lor", commutative: true}}
	Lxor   = Op{&opDef{code: opLxor, name: "lxor", commutative: true}}
	Band   = Op{&opDef{code: opBand, name: "band", commutative: true}}
	Bor    = Op{&opDef{code: opBor, name: "bor", commutative: true}}
	Bxor   = Op{&opDef{code: opBxor, name: "bxor", commutative: true}}
	MaxLoc = Op{&opDef{code: opMaxLoc, name: "maxloc", commutative: true}}
	MinLoc = Op{&opDef{code: opMinLoc, name: "minloc", commutative: true}}
)

// NewOp makes a user-defined reduction over slices of T. fn must set inout[i] = in[i] op inout[i] for every i, where
// in holds the contribution of lower ranks (MPI's convention), and must not keep the slices. An op that is not
// commutative is applied in rank order (it must still be associative). T must be a buffer element type (a
// primitive or a Loc); using the op on buffers of another type is ErrOp.
func NewOp[T any](fn func(in, inout []T), commutative bool) Op {
	var zero T
	d := &opDef{code: opUser, name: fmt.Sprintf("user(%T)", zero), commutative: commutative}
	d.userKind = kindOfElem(any(zero))
	if fn != nil && d.userKind != kNone {
		d.userKernel = func(inout, in unsafe.Pointer, n int) {
			fn(unsafe.Slice((*T)(in), n), unsafe.Slice((*T)(inout), n))
		}
		uk, sz := d.userKernel, d.userKind.size()
		d.bytesKernel = func(inout, in []byte) {
			if len(inout) > 0 {
				uk(unsafe.Pointer(unsafe.SliceData(inout)), unsafe.Pointer(unsafe.SliceData(in)), len(inout)/sz)
			}
		}
	}
	return Op{d}
}

// Name is the op's name.
func (o Op) Name() string {
	if o.d == nil {
		return "invalid"
	}
	return o.d.name
}

// Commutative reports whether the op may be applied in any order.
func (o Op) Commutative() bool { return o.d != nil && o.d.commutative }

// kernel combines two equally long byte ranges holding whole elements: inout = in op inout, element-wise.
type kernel func(inout, in []byte)

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

type realNum interface {
	integer | ~float32 | ~float64
}

type complexNum interface{ ~complex64 | ~complex128 }

func cast[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

func wrapK[T any](f func(inout, in []T)) kernel {
	return func(inout, in []byte) { f(cast[T](inout), cast[T](in)) }
}

func kSum[T realNum | complexNum](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = in[i] + inout[i]
	}
}

func kProd[T realNum | complexNum](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = in[i] * inout[i]
	}
}

func kMin[T realNum](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		if in[i] < inout[i] {
			inout[i] = in[i]
		}
	}
}

func kMax[T realNum](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		if in[i] > inout[i] {
			inout[i] = in[i]
		}
	}
}

func kBand[T integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] &= in[i]
	}
}

func kBor[T integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] |= in[i]
	}
}

func kBxor[T integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] ^= in[i]
	}
}

func b2i[T integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

func kLand[T integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = b2i[T](in[i] != 0 && inout[i] != 0)
	}
}

func kLor[T integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = b2i[T](in[i] != 0 || inout[i] != 0)
	}
}

func kLxor[T integer](inout, in []T) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = b2i[T]((in[i] != 0) != (inout[i] != 0))
	}
}

func kBoolLand(inout, in []bool) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = in[i] && inout[i]
	}
}

func kBoolLor(inout, in []bool) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = in[i] || inout[i]
	}
}

func kBoolLxor(inout, in []bool) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] = in[i] != inout[i]
	}
}

func kMaxLoc[T LocValue](inout, in []Loc[T]) {
	in = in[:len(inout)]
	for i := range inout {
		a, b := in[i], inout[i]
		if a.Value > b.Value || (a.Value == b.Value && a.Index < b.Index) {
			inout[i] = a
		}
	}
}

func kMinLoc[T LocValue](inout, in []Loc[T]) {
	in = in[:len(inout)]
	for i := range inout {
		a, b := in[i], inout[i]
		if a.Value < b.Value || (a.Value == b.Value && a.Index < b.Index) {
			inout[i] = a
		}
	}
}

func intKernel[T integer](c opCode) kernel {
	switch c {
	case opSum:
		return wrapK(kSum[T])
	case opProd:
		return wrapK(kProd[T])
	case opMin:
		return wrapK(kMin[T])
	case opMax:
		return wrapK(kMax[T])
	case opLand:
		return wrapK(kLand[T])
	case opLor:
		return wrapK(kLor[T])
	case opLxor:
		return wrapK(kLxor[T])
	case opBand:
		return wrapK(kBand[T])
	case opBor:
		return wrapK(kBor[T])
	case opBxor:
		return wrapK(kBxor[T])
	}
	return nil
}

func floatKernel[T ~float32 | ~float64](c opCode) kernel {
	switch c {
	case opSum:
		return wrapK(kSum[T])
	case opProd:
		return wrapK(kProd[T])
	case opMin:
		return wrapK(kMin[T])
	case opMax:
		return wrapK(kMax[T])
	}
	return nil
}

func complexKernel[T complexNum](c opCode) kernel {
	switch c {
	case opSum:
		return wrapK(kSum[T])
	case opProd:
		return wrapK(kProd[T])
	}
	return nil
}

func locKernel[T LocValue](c opCode) kernel {
	switch c {
	case opMaxLoc:
		return wrapK(kMaxLoc[T])
	case opMinLoc:
		return wrapK(kMinLoc[T])
	}
	return nil
}

const maxKind = 80

// kernels holds every predefined op's kernel per element kind, built once: a call looks its kernel up.
var kernels [opUser][maxKind]kernel

func init() {
	for c := opSum; c < opUser; c++ {
		for k := kind(0); k < maxKind; k++ {
			kernels[c][k] = buildKernel(c, k)
		}
	}
}

// kernelFor returns the kernel of op over elements of kind k, or ErrOp.
func kernelFor(op Op, k kind) (kernel, error) {
	d := op.d
	if d == nil || d.code == opNone {
		return nil, fmt.Errorf("%w: the zero Op", ranks.ErrOp)
	}
	if d.code == opUser {
		if d.userKernel == nil {
			return nil, fmt.Errorf("%w: %s has no function or an element type that is not a buffer type", ranks.ErrOp, d.name)
		}
		if d.userKind != k {
			return nil, fmt.Errorf("%w: %s applied to a buffer of %s", ranks.ErrOp, d.name, k)
		}
		return d.bytesKernel, nil
	}
	if k < maxKind {
		if kn := kernels[d.code][k]; kn != nil {
			return kn, nil
		}
	}
	return nil, fmt.Errorf("%w: %s is not defined on %s", ranks.ErrOp, d.name, k)
}

func buildKernel(code opCode, k kind) kernel {
	d := &opDef{code: code}
	var kn kernel
	switch k {
	case kind(ranks.TypeByte):
		kn = intKernel[uint8](d.code)
	case kind(ranks.TypeInt8):
		kn = intKernel[int8](d.code)
	case kind(ranks.TypeInt16):
		kn = intKernel[int16](d.code)
	case kind(ranks.TypeInt32):
		kn = intKernel[int32](d.code)
	case kind(ranks.TypeInt64):
		kn = intKernel[int64](d.code)
	case kind(ranks.TypeUint16):
		kn = intKernel[uint16](d.code)
	case kind(ranks.TypeUint32):
		kn = intKernel[uint32](d.code)
	case kind(ranks.TypeUint64):
		kn = intKernel[uint64](d.code)
	case kind(ranks.TypeInt):
		kn = intKernel[int](d.code)
	case kind(ranks.TypeUint):
		kn = intKernel[uint](d.code)
	case kind(ranks.TypeFloat32):
		kn = floatKernel[float32](d.code)
	case kind(ranks.TypeFloat64):
		kn = floatKernel[float64](d.code)
	case kind(ranks.TypeComplex64):
		kn = complexKernel[complex64](d.code)
	case kind(ranks.TypeComplex128):
		kn = complexKernel[complex128](d.code)
	case kind(ranks.TypeBool):
		switch d.code {
		case opLand:
			kn = wrapK(kBoolLand)
		case opLor:
			kn = wrapK(kBoolLor)
		case opLxor:
			kn = wrapK(kBoolLxor)
		}
	case kLocFloat64:
		kn = locKernel[float64](d.code)
	case kLocFloat32:
		kn = locKernel[float32](d.code)
	case kLocInt:
		kn = locKernel[int](d.code)
	case kLocInt32:
		kn = locKernel[int32](d.code)
	case kLocInt64:
		kn = locKernel[int64](d.code)
	}
	return kn
}
