package ranks

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/gompj/gompj/internal/msgcheck"
)

// Object messages come from other node processes, and the msgpack decoder trusts the lengths it reads: five bytes
// that claim an array of four billion elements make it allocate for them, and the process dies of it (an
// out-of-memory error is not a panic: nothing recovers it). So before decoding, decodeInto checks the encoding
// against the bytes that back it (checkEncoding) and against what the decoder does with the target type
// (checkTyped): where it reads an extension as a map, and how much its slices and maps of the type will take.

// maxObjectDepth bounds how deeply an object message's values may nest. The decoder recurses once per level, so
// without a bound a message of a few megabytes of nested one-element arrays would exhaust the goroutine's stack,
// which also kills the process.
const maxObjectDepth = 1000

// objectRules is what an object message's encoding must keep to. Extensions pass: an object may hold values that
// encode themselves as such (time.Time), and checkTyped covers the decoder's reading of one as a map.
var objectRules = msgcheck.Rules{MaxDepth: maxObjectDepth}

// checkEncoding checks that data is exactly one well-formed value (see msgcheck.Rules.End).
func checkEncoding(data []byte) error { return objectRules.Check(data) }

// checkTyped follows the decoding of data into a value of type t (data passed checkEncoding) to two kinds of place:
//   - Where the decoder expects a map. There it takes an extension value as a wrapped map: it reads a map length
//     out of the extension's payload and carries on from there, outside the structure checkEncoding walked. The
//     walk replays that reading and fails where a length so read claims more than the bytes left.
//   - Where it makes a slice or a map of the type. It allocates the declared count of elements at once, and an
//     element may take far more memory than the byte that encodes it: a nil decodes as a zero struct. The walk adds
//     up what those counts will take and fails past allocBudget (see there).
//
// Types that decode themselves (custom decoders, time.Time) and interfaces (which the decoder fills with its own
// generic values: never an extension read as a map, and elements of at most a few words) are not followed.
func checkTyped(data []byte, t reflect.Type) error {
	if !mayWalk(t) {
		return nil
	}
	_, err := (&typedWalk{data: data, budget: allocBudget(len(data))}).value(0, t, 0)
	return err
}

// allocRatio and allocFloor bound what decoding an object message may allocate for the slices and maps of the
// target type: allocRatio bytes per byte of the message, or allocFloor, whichever is more. An element of at most
// allocRatio bytes cannot go past the ratio, since each takes a byte of the message at least: only slices of larger
// elements, and maps, are counted. A legitimate message takes at least a byte for each field of a struct it holds,
// so it stays well within; a message of nils or empty values into a slice of large structs does not.
const (
	allocRatio = 64
	allocFloor = 64 << 20
)

func allocBudget(n int) uint64 { return max(allocFloor, allocRatio*uint64(n)) }

// typedWalk replays a typed decode. Where data stops making sense for the type, the decoder would fail there too:
// the walk stops without error (stop).
type typedWalk struct {
	data          []byte
	alloc, budget uint64 // what the counted slices and maps will take, and the most they may
}

// charge adds n elements of size bytes each to what the decode will allocate.
func (w *typedWalk) charge(n uint64, size uintptr, t reflect.Type) error {
	if size > 0 && n > (w.budget-w.alloc)/uint64(size) {
		return fmt.Errorf("%d elements of %s, with what came before, would take more than the %d bytes allowed "+
			"for a message of %d bytes", n, t, w.budget, len(w.data))
	}
	w.alloc += n * uint64(size)
	return nil
}

var errStop = errors.New("stop")

func (w *typedWalk) value(p int, t reflect.Type, depth int) (int, error) {
	if depth > maxObjectDepth {
		return p, errStop
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !mayWalk(t) {
		return w.skip(p)
	}
	h, err := msgcheck.Read(w.data, p)
	if err != nil {
		return p, errStop
	}
	switch t.Kind() {
	case reflect.Map:
		if h.Kind == msgcheck.Ext {
			// The decoder skips the extension's header (and type byte) and reads a map length from its payload.
			p += h.Size
			if h, err = msgcheck.Read(w.data, p); err != nil || h.Kind != msgcheck.Map {
				return p, errStop
			}
			if h.Elems > uint64(len(w.data)-p-h.Size) {
				return p, fmt.Errorf("%w: an extension at a map's place claims a map of %d entries, %d bytes left",
					msgcheck.ErrMalformed, h.Elems/2, len(w.data)-p-h.Size)
			}
		}
		if h.Kind != msgcheck.Map {
			return w.skip(p)
		}
		if err := w.charge(h.Elems/2, t.Key().Size()+t.Elem().Size(), t); err != nil {
			return p, err
		}
		p += h.Size
		for i := uint64(0); i < h.Elems/2; i++ {
			if p, err = w.value(p, t.Key(), depth+1); err != nil {
				return p, err
			}
			if p, err = w.value(p, t.Elem(), depth+1); err != nil {
				return p, err
			}
		}
		return p, nil
	case reflect.Slice, reflect.Array:
		if h.Kind != msgcheck.Array {
			return w.skip(p)
		}
		if t.Kind() == reflect.Slice && t.Elem().Size() > allocRatio {
			if err := w.charge(h.Elems, t.Elem().Size(), t); err != nil {
				return p, err
			}
		}
		p += h.Size
		for i := uint64(0); i < h.Elems; i++ {
			if p, err = w.value(p, t.Elem(), depth+1); err != nil {
				return p, err
			}
		}
		return p, nil
	case reflect.Struct:
		if h.Kind == msgcheck.Array { // a struct encoded as an array: its fields in order
			p += h.Size
			fields := structFields(t)
			for i := uint64(0); i < h.Elems; i++ {
				ft := reflect.TypeFor[any]()
				if i < uint64(len(fields)) {
					ft = fields[i].typ
				}
				if p, err = w.value(p, ft, depth+1); err != nil {
					return p, err
				}
			}
			return p, nil
		}
		if h.Kind != msgcheck.Map {
			return w.skip(p)
		}
		p += h.Size
		fields := structFields(t)
		for i := uint64(0); i < h.Elems/2; i++ {
			kh, err := msgcheck.Read(w.data, p)
			if err != nil || kh.Kind != msgcheck.Bytes || uint64(len(w.data)-p-kh.Size) < kh.Payload {
				return p, errStop
			}
			name := string(w.data[p+kh.Size : p+kh.Size+int(kh.Payload)])
			p += kh.Size + int(kh.Payload)
			ft := reflect.TypeFor[any]() // an unknown field is skipped
			for _, f := range fields {
				if f.name == name {
					ft = f.typ
					break
				}
			}
			if p, err = w.value(p, ft, depth+1); err != nil {
				return p, err
			}
		}
		return p, nil
	}
	return w.skip(p)
}

// skip steps over one value the decoder reads without looking for maps in it.
func (w *typedWalk) skip(p int) (int, error) {
	end, err := objectRules.End(w.data, p)
	if err != nil {
		return p, errStop // checkEncoding passed, so this is a replay that left the structure: the decoder fails too
	}
	return end, nil
}

type structField struct {
	name string
	typ  reflect.Type
}

// structFields lists the fields msgpack decodes into, with the names it matches: the msgpack tag's name, else the
// field's name; embedded structs without a name are inlined.
func structFields(t reflect.Type) []structField {
	var out []structField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("msgpack")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, structFields(ft)...)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, structField{name, ft})
	}
	return out
}

var mayWalkCache sync.Map // reflect.Type -> bool

// mayWalk reports whether decoding into t can come to a place that checkTyped follows: a map, or a slice of
// elements over allocRatio bytes.
func mayWalk(t reflect.Type) bool {
	if v, ok := mayWalkCache.Load(t); ok {
		return v.(bool)
	}
	v := reaches(t, map[reflect.Type]bool{})
	mayWalkCache.Store(t, v)
	return v
}

var (
	customDecoder = reflect.TypeFor[msgpack.CustomDecoder]()
	unmarshaler   = reflect.TypeFor[msgpack.Unmarshaler]()
	binaryUnm     = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	textUnm       = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType      = reflect.TypeFor[time.Time]()
)

func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	for _, i := range []reflect.Type{customDecoder, unmarshaler, binaryUnm, textUnm} {
		if t.Implements(i) || pt.Implements(i) {
			return true
		}
	}
	return t == timeType
}

func reaches(t reflect.Type, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] || decodesItself(t) {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Map:
		return true
	case reflect.Slice:
		return t.Elem().Size() > allocRatio || reaches(t.Elem(), seen)
	case reflect.Array:
		return reaches(t.Elem(), seen)
	case reflect.Struct:
		for _, f := range structFields(t) {
			if reaches(f.typ, seen) {
				return true
			}
		}
	}
	return false
}
