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
// (checkExtMaps).

// maxObjectDepth bounds how deeply an object message's values may nest. The decoder recurses once per level, so
// without a bound a message of a few megabytes of nested one-element arrays would exhaust the goroutine's stack,
// which also kills the process.
const maxObjectDepth = 1000

var errMalformed = msgcheck.ErrMalformed

// objectRules is what an object message's encoding must keep to. Extensions pass: an object may hold values that
// encode themselves as such (time.Time), and checkExtMaps covers the decoder's reading of one as a map.
var objectRules = msgcheck.Rules{MaxDepth: maxObjectDepth}

// checkEncoding checks that data is exactly one well-formed value (see msgcheck.Rules.End).
func checkEncoding(data []byte) error { return objectRules.Check(data) }

// checkExtMaps follows the decoding of data into a value of type t (data passed checkEncoding) to the places where
// the decoder expects a map. There the decoder takes an extension value as a wrapped map: it reads a map length out
// of the extension's payload and carries on from there, outside the structure checkEncoding walked. checkExtMaps
// replays that reading and fails where a length so read claims more than the bytes left. Types that decode
// themselves (custom decoders, time.Time) and interfaces (which the decoder fills with its own generic values,
// never reading an extension as a map) are not followed.
func checkExtMaps(data []byte, t reflect.Type) error {
	if !mayReadMap(t) {
		return nil
	}
	_, err := (&extWalk{data: data}).value(0, t, 0)
	return err
}

// extWalk replays a typed decode. Where data stops making sense for the type, the decoder would fail there too:
// the walk stops without error (stop).
type extWalk struct{ data []byte }

var errStop = errors.New("stop")

func (w *extWalk) value(p int, t reflect.Type, depth int) (int, error) {
	if depth > maxObjectDepth {
		return p, errStop
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !mayReadMap(t) {
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
					errMalformed, h.Elems/2, len(w.data)-p-h.Size)
			}
		}
		if h.Kind != msgcheck.Map {
			return w.skip(p)
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
func (w *extWalk) skip(p int) (int, error) {
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

var mayReadMapCache sync.Map // reflect.Type -> bool

// mayReadMap reports whether decoding into t can come to a map-typed place that the walk follows.
func mayReadMap(t reflect.Type) bool {
	if v, ok := mayReadMapCache.Load(t); ok {
		return v.(bool)
	}
	v := reachesMap(t, map[reflect.Type]bool{})
	mayReadMapCache.Store(t, v)
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

func reachesMap(t reflect.Type, seen map[reflect.Type]bool) bool {
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
	case reflect.Slice, reflect.Array:
		return reachesMap(t.Elem(), seen)
	case reflect.Struct:
		for _, f := range structFields(t) {
			if reachesMap(f.typ, seen) {
				return true
			}
		}
	}
	return false
}
