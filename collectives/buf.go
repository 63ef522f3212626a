package collectives

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/ranks"
)

// kind is a buffer's element type: a ranks.Type for primitives, or a Loc pair.
type kind uint8

const kNone = kind(ranks.TypeNone)

const (
	kLocFloat64 kind = 64 + iota
	kLocFloat32
	kLocInt
	kLocInt32
	kLocInt64
)

func (k kind) size() int {
	switch k {
	case kLocFloat64:
		return int(unsafe.Sizeof(Loc[float64]{}))
	case kLocFloat32:
		return int(unsafe.Sizeof(Loc[float32]{}))
	case kLocInt:
		return int(unsafe.Sizeof(Loc[int]{}))
	case kLocInt32:
		return int(unsafe.Sizeof(Loc[int32]{}))
	case kLocInt64:
		return int(unsafe.Sizeof(Loc[int64]{}))
	}
	return ranks.Type(k).Size()
}

func (k kind) String() string {
	switch k {
	case kLocFloat64:
		return "[]Loc[float64]"
	case kLocFloat32:
		return "[]Loc[float32]"
	case kLocInt:
		return "[]Loc[int]"
	case kLocInt32:
		return "[]Loc[int32]"
	case kLocInt64:
		return "[]Loc[int64]"
	}
	return ranks.Type(k).String()
}

// inPlace is the type of InPlace.
type inPlace struct{}

// InPlace passed as the send buffer means "the data is already in the receive buffer" (MPI_IN_PLACE).
var InPlace any = inPlace{}

func isInPlace(b any) bool { _, ok := b.(inPlace); return ok }

// vec is a buffer seen as memory.
type vec struct {
	k  kind
	b  []byte // the elements' memory (nil when empty)
	n  int    // elements
	sz int    // bytes per element
}

func locVec[T LocValue](k kind, s []Loc[T]) vec {
	sz := k.size()
	v := vec{k: k, n: len(s), sz: sz}
	if len(s) > 0 {
		v.b = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*sz)
	}
	return v
}

// viewOf returns buf's memory, or an ErrBuffer error for a value that is not a primitive or Loc slice.
func viewOf(buf any, what string) (vec, error) { return viewOfRole(buf, what, "") }

// viewOfRole is viewOf with the buffer's description in two parts, joined only for an error.
func viewOfRole(buf any, what, role string) (vec, error) {
	if v, ok, err := viewArg(buf, what, role); ok {
		return v, err
	}
	if rv, ok := ranks.MemOf(buf); ok {
		sz := rv.Type.Size()
		return vec{k: kind(rv.Type), b: rv.Bytes(), n: rv.N, sz: sz}, nil
	}
	switch s := buf.(type) {
	case []Loc[float64]:
		return locVec(kLocFloat64, s), nil
	case []Loc[float32]:
		return locVec(kLocFloat32, s), nil
	case []Loc[int]:
		return locVec(kLocInt, s), nil
	case []Loc[int32]:
		return locVec(kLocInt32, s), nil
	case []Loc[int64]:
		return locVec(kLocInt64, s), nil
	}
	if buf == nil {
		return vec{}, fmt.Errorf("%w: nil %s%s buffer", ranks.ErrBuffer, what, role)
	}
	return vec{}, fmt.Errorf("%w: %s%s buffer of %s: collectives take slices of primitive types or Loc pairs", ranks.ErrBuffer, what, role, reflect.TypeOf(buf))
}

// kindOfElem returns the buffer kind whose elements have the dynamic type of e.
func kindOfElem(e any) kind {
	switch e.(type) {
	case byte:
		return kind(ranks.TypeByte)
	case int8:
		return kind(ranks.TypeInt8)
	case int16:
		return kind(ranks.TypeInt16)
	case int32:
		return kind(ranks.TypeInt32)
	case int64:
		return kind(ranks.TypeInt64)
	case uint16:
		return kind(ranks.TypeUint16)
	case uint32:
		return kind(ranks.TypeUint32)
	case uint64:
		return kind(ranks.TypeUint64)
	case int:
		return kind(ranks.TypeInt)
	case uint:
		return kind(ranks.TypeUint)
	case float32:
		return kind(ranks.TypeFloat32)
	case float64:
		return kind(ranks.TypeFloat64)
	case complex64:
		return kind(ranks.TypeComplex64)
	case complex128:
		return kind(ranks.TypeComplex128)
	case bool:
		return kind(ranks.TypeBool)
	case Loc[float64]:
		return kLocFloat64
	case Loc[float32]:
		return kLocFloat32
	case Loc[int]:
		return kLocInt
	case Loc[int32]:
		return kLocInt32
	case Loc[int64]:
		return kLocInt64
	}
	return kNone
}

func errTrunc(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ranks.ErrTruncate}, a...)...)
}

func errArg(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ranks.ErrArg}, a...)...)
}

func errType(a, b vec) error {
	return fmt.Errorf("%w: send buffer of %s, receive buffer of %s", ranks.ErrType, a.k, b.k)
}

// Blocking collectives and escape analysis. A blocking collective's buffer arguments are boxed where the caller
// converts them to any; if the collective let its any parameters escape, every slice passed would be boxed on the
// heap, one allocation per argument and call, where Send and Recv with the same slice allocate nothing (see
// ranks/buffer.go). So the entry points (api.go's, from Bcast to Exscan, and neighbor.go's NeighborAllgather(v)
// and NeighborAlltoall(v)) take their arguments through hideArg: the arguments' content (a slice's elements, a
// View's description) escapes, as it must, since the members read and write it from other goroutines; the box
// itself, and an object that a pointer argument points to (a *View's handle too), may stay on the caller's stack.
// What runs below must therefore keep no pointer to them in a heap object, since the stack moves as it grows: an
// object argument goes only through the blocking point-to-point calls, which copy it to the heap to send it
// (heapClone) and decode into a heap value before copying it into the target, or through reflection on the
// goroutine's own frames; a View is read into this rank's scratch on entry and written back on exit (packArgs); a
// slice's elements, which are on the heap, are what the algorithms publish and post. The neighbourhood collectives
// take no objects and do not pack Views: what their plan, shared slot and edges' requests keep past the call is a
// slice's elements or windows of a View's description (nbufOf), never the handle. fmt is below too: it holds each
// operand in a heap object (its printer) while it formats it, and %v calls a *View's String through that copy,
// which after a move reads the old stack; so an error names a View by its String, computed before the call, and
// an argument's type by reflect.TypeOf, not by %T of the argument (whose box the printer would point to, stack or
// not, while a collection may run).

// hideArg returns the argument *p with only its content escaping (escapeContent), hidden from escape analysis
// otherwise (ranks.Hide).
func hideArg(p *any) any {
	escapeContent(*p)
	return ranks.Hide(p)
}

// HideArg is hideArg for package nbc, whose nonblocking gathers and allgathers take their arguments the same way
// and keep only heap copies of their objects (nbc's heapObjects).
func HideArg(p *any) any { return hideArg(p) }

// contentKept is never set, and contentSink never written: escapeContent's store exists for escape analysis alone.
var contentKept bool

//lint:ignore U1000 the store to it in escapeContent is what tells escape analysis that the content escapes
var contentSink ranks.Mem

// escapeContent lets the content of a (what ranks.MemOf returns of it: a slice's elements, a View's description)
// escape to the heap, and not a itself. The flow is what escape analysis sees; at run time it costs a load of
// contentKept, and MemOf runs once per argument, in the call itself.
func escapeContent(a any) {
	if contentKept {
		contentSink, _ = ranks.MemOf(a)
	}
}

// Disjoint reports whether a and b share no byte (mem.Disjoint). The allreduces receive a peer's part straight into
// the result when it does not overlap the send buffer (which in place it is: InPlace).
func Disjoint(a, b []byte) bool { return mem.Disjoint(a, b) }
