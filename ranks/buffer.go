package ranks

import (
	"fmt"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// Type is the element type a message carries.
type Type uint8

const (
	TypeNone Type = iota
	TypeByte
	TypeInt8
	TypeInt16
	TypeInt32
	TypeInt64
	TypeUint16
	TypeUint32
	TypeUint64
	TypeInt
	TypeUint
	TypeFloat32
	TypeFloat64
	TypeComplex64
	TypeComplex128
	TypeBool
	TypeObject // any other value, msgpack-encoded; always eager
	numTypes
)

var typeSizes = [numTypes]int{0, 1, 1, 2, 4, 8, 2, 4, 8, 8, 8, 4, 8, 8, 16, 1, 1}

var typeNames = [numTypes]string{"none", "[]byte", "[]int8", "[]int16", "[]int32", "[]int64", "[]uint16",
	"[]uint32", "[]uint64", "[]int", "[]uint", "[]float32", "[]float64", "[]complex64", "[]complex128", "[]bool",
	"object"}

// Size is the size in bytes of one element (1 for encoded objects).
func (t Type) Size() int {
	if t < numTypes {
		return typeSizes[t]
	}
	return 0
}

func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is a known element type.
func (t Type) Valid() bool { return t > TypeNone && t < numTypes }

// typeShifts holds the log2 of each type's size: every size is a power of two, and a shift is a cycle where the
// division it replaces on the message paths (elements in a message's bytes) takes tens.
var typeShifts [numTypes]uint8

func init() {
	if unsafe.Sizeof(int(0)) != 8 {
		typeSizes[TypeInt], typeSizes[TypeUint] = int(unsafe.Sizeof(int(0))), int(unsafe.Sizeof(uint(0)))
	}
	for t, s := range typeSizes {
		if s&(s-1) != 0 {
			panic(fmt.Sprintf("ranks: the size %d of %s is not a power of two", s, Type(t)))
		}
		typeShifts[t] = uint8(bits.TrailingZeros(uint(s)))
	}
}

// elems returns how many elements of t are in n bytes (n >> log2 of the size), and whether n is a whole number of
// them. t must be valid (not TypeNone).
func (t Type) elems(n uint64) (uint64, bool) {
	s := typeShifts[t]
	return n >> s, n&(1<<s-1) == 0
}

// Mem is a primitive buffer seen as memory: element type, first element and element count; or N elements of a
// View from element off of its selection (Ptr unused; see IsView, Window, CopyMem, CopyTo, CopyFrom).
type Mem struct {
	Type Type
	Ptr  unsafe.Pointer
	N    int
	view *viewData
	off  int
}

// Bytes is a contiguous buffer's memory (nil for a view).
func (v Mem) Bytes() []byte {
	if v.view != nil {
		return nil
	}
	if v.N == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.Ptr), v.N*typeSizes[v.Type])
}

// Size is the buffer's size in bytes.
func (v Mem) Size() int { return v.N * typeSizes[v.Type] }

func sliceMem[T any](t Type, s []T) Mem {
	return Mem{Type: t, Ptr: unsafe.Pointer(unsafe.SliceData(s)), N: len(s)}
}

// MemOf returns the memory of a primitive slice or a *View, or ok=false for any other value (an object). It keeps
// no reference to buf itself, only to the slice's elements (or the View), so passing a slice costs no allocation.
// A nil *View gives ok with Type none, which checkMem refuses.
func MemOf(buf any) (v Mem, ok bool) {
	switch b := buf.(type) {
	case *View:
		if b == nil || b.d == nil {
			return Mem{}, true // Type none: refused by checkMem
		}
		d := b.d // the description, not the handle: buf's content, not buf, may escape (see View)
		return Mem{Type: d.typ, N: d.total, view: d}, true
	case []byte:
		return sliceMem(TypeByte, b), true
	case []float64:
		return sliceMem(TypeFloat64, b), true
	case []int:
		return sliceMem(TypeInt, b), true
	case []int32:
		return sliceMem(TypeInt32, b), true
	case []int64:
		return sliceMem(TypeInt64, b), true
	case []float32:
		return sliceMem(TypeFloat32, b), true
	case []complex128:
		return sliceMem(TypeComplex128, b), true
	case []int8:
		return sliceMem(TypeInt8, b), true
	case []int16:
		return sliceMem(TypeInt16, b), true
	case []uint16:
		return sliceMem(TypeUint16, b), true
	case []uint32:
		return sliceMem(TypeUint32, b), true
	case []uint64:
		return sliceMem(TypeUint64, b), true
	case []uint:
		return sliceMem(TypeUint, b), true
	case []complex64:
		return sliceMem(TypeComplex64, b), true
	case []bool:
		return sliceMem(TypeBool, b), true
	}
	return Mem{}, false
}

// Objects and escape analysis.
//
// Send, Recv and Isend take `buf any` and must not make it escape: otherwise every primitive slice passed to them
// would be boxed on the heap, one allocation per message. msgpack (reflection) makes whatever it is handed escape.
// So the object path hands msgpack a copy instead: hide(&buf) gives the same interface value without the escape
// analysis seeing the flow, and heapClone copies the value's top level (the only memory the compiler may have
// placed on the caller's stack, since ViewOf already lets everything below it escape) into fresh heap memory,
// synchronously, before anything else can run on this goroutine. No pointer to the possibly-stack original is kept
// past that copy. Irecv is the exception: it must keep its target until Wait, so it lets buf escape honestly.

//go:nosplit
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return unsafe.Add(nil, x) // the uintptr round trip hides the flow from escape analysis, deliberately
}

// hide returns *p without letting escape analysis see that the result came from p.
func hide(p *any) any { return *(*any)(noescape(unsafe.Pointer(p))) }

// Hide is hide for package collectives, whose blocking calls follow the same rule as Send and Recv (see above):
// what they keep beyond the argument's elements, which their caller lets escape, is only ever a heap copy.
func Hide(p *any) any { return hide(p) }

// heapClone returns a copy of v whose top-level memory is on the heap. Pointer-shaped values (pointers, maps, and
// structs or arrays holding just one of those) have their first pointee copied too, since for them that pointee is
// the top level.
func heapClone(v any) (any, error) {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil, nil
	}
	if err := encodable(t); err != nil {
		return nil, err
	}
	top := reflect.New(t)
	top.Elem().Set(reflect.ValueOf(v))
	cloneFirstPointee(t, top.UnsafePointer())
	return top.Interface(), nil
}

// HeapCopy returns a value of v's type whose top-level memory is on the heap (heapClone), for package nbc, whose
// nonblocking gathers keep a value their caller may have boxed on its stack (see Hide).
func HeapCopy(v any) (any, error) {
	c, err := heapClone(v)
	if c == nil || err != nil {
		return c, err
	}
	return reflect.ValueOf(c).Elem().Interface(), nil // a copy of the heap value, on the heap too
}

func encodable(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return fmt.Errorf("%w: a %s cannot be sent", ErrBuffer, t)
	}
	return nil
}

// cloneFirstPointee replaces, in the heap value of type t at p, the pointer that makes t pointer-shaped by a
// pointer to a heap copy of what it pointed to.
func cloneFirstPointee(t reflect.Type, p unsafe.Pointer) {
	switch t.Kind() {
	case reflect.Pointer:
		old := *(*unsafe.Pointer)(p)
		if old == nil {
			return
		}
		n := reflect.New(t.Elem())
		n.Elem().Set(reflect.NewAt(t.Elem(), old).Elem())
		*(*unsafe.Pointer)(p) = n.UnsafePointer()
	case reflect.Map:
		m := reflect.NewAt(t, p).Elem()
		if m.IsNil() {
			return
		}
		c := reflect.MakeMapWithSize(t, m.Len())
		for _, k := range m.MapKeys() {
			c.SetMapIndex(k, m.MapIndex(k))
		}
		m.Set(c)
	case reflect.Struct:
		if t.NumField() == 1 {
			f := t.Field(0)
			cloneFirstPointee(f.Type, unsafe.Add(p, f.Offset))
		}
	case reflect.Array:
		if t.Len() == 1 {
			cloneFirstPointee(t.Elem(), p)
		}
	}
}

// encodeObject msgpack-encodes an object that the caller does not let escape (see above).
func encodeObject(buf *any) ([]byte, error) {
	c, err := heapClone(hide(buf))
	if err != nil {
		return nil, err
	}
	b, err := msgpack.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %T: %v", ErrBuffer, c, err)
	}
	return b, nil
}

// checkTarget verifies that an object receive has somewhere to decode into.
func checkTarget(target any) error {
	t := reflect.TypeOf(target)
	if t == nil || t.Kind() != reflect.Pointer || reflect.ValueOf(target).IsNil() {
		return fmt.Errorf("%w: receiving an object needs a non-nil pointer, got %T", ErrBuffer, target)
	}
	return nil
}

// decodeInto decodes data into a fresh heap value of the target's element type, then copies it into *target.
// target may have come through hide: it is only written through, synchronously.
func decodeInto(target any, data []byte) error {
	pt := reflect.TypeOf(target)
	if err := checkEncoding(data); err != nil {
		return fmt.Errorf("%w: decoding into %s: %v", ErrType, pt, err)
	}
	if err := checkTyped(data, pt.Elem()); err != nil {
		return fmt.Errorf("%w: decoding into %s: %v", ErrType, pt, err)
	}
	fresh := reflect.New(pt.Elem())
	if err := msgpack.Unmarshal(data, fresh.Interface()); err != nil {
		if pt.Elem().Kind() == reflect.Array {
			if terr := decodeArrayPrefix(target, data); terr != nil {
				return terr
			}
		}
		return fmt.Errorf("%w: decoding into %s: %v", ErrType, pt, err)
	}
	reflect.ValueOf(target).Elem().Set(fresh.Elem())
	return nil
}

// decodeArrayPrefix handles an array message longer than the array it is received into, as a receive into a
// short slice is handled: the elements that fit are delivered and the error is ErrTruncate. It returns nil if
// data is not such a message (the caller then reports its own decoding error).
func decodeArrayPrefix(target any, data []byte) error {
	at := reflect.TypeOf(target).Elem()
	s := reflect.New(reflect.SliceOf(at.Elem()))
	if msgpack.Unmarshal(data, s.Interface()) != nil || s.Elem().Len() <= at.Len() {
		return nil
	}
	fresh := reflect.New(at).Elem()
	reflect.Copy(fresh, s.Elem())
	reflect.ValueOf(target).Elem().Set(fresh)
	return fmt.Errorf("%w: an array of %d elements received into %s", ErrTruncate, s.Elem().Len(), at)
}
