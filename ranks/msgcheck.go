package ranks

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
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

var errMalformed = errors.New("malformed object encoding")

type hdrKind uint8

const (
	hScalar hdrKind = iota // nil, bool, numbers
	hBytes                 // str, bin: skip payload bytes
	hExt                   // ext: a type byte, then payload bytes
	hArray                 // elems values follow
	hMap                   // elems values follow (keys and values)
)

// hdr is one msgpack header: what it is, how long it is, and what follows it.
type hdr struct {
	kind    hdrKind
	size    int    // bytes of the header itself
	payload uint64 // bytes of payload after the header (str, bin, ext data; scalars' value bytes)
	elems   uint64 // values that follow (arrays; maps count keys and values)
}

// header reads the header at data[p:]. Lengths are not checked against the data here.
func header(data []byte, p int) (hdr, error) {
	if p >= len(data) {
		return hdr{}, fmt.Errorf("%w: value expected at offset %d, at the end", errMalformed, p)
	}
	c := data[p]
	length := func(w int) (uint64, error) {
		if p+1+w > len(data) {
			return 0, fmt.Errorf("%w: length of %d bytes at offset %d, at the end", errMalformed, w, p+1)
		}
		b := data[p+1:]
		switch w {
		case 1:
			return uint64(b[0]), nil
		case 2:
			return uint64(binary.BigEndian.Uint16(b)), nil
		}
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	var err error
	h := hdr{size: 1}
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixint, nil, bool
	case c >= 0x80 && c <= 0x8f: // fixmap
		h.kind, h.elems = hMap, 2*uint64(c&0x0f)
	case c >= 0x90 && c <= 0x9f: // fixarray
		h.kind, h.elems = hArray, uint64(c&0x0f)
	case c >= 0xa0 && c <= 0xbf: // fixstr
		h.kind, h.payload = hBytes, uint64(c&0x1f)
	case c == 0xc4 || c == 0xc5 || c == 0xc6: // bin8, bin16, bin32
		w := 1 << (c - 0xc4)
		h.kind, h.size = hBytes, 1+w
		h.payload, err = length(w)
	case c == 0xd9 || c == 0xda || c == 0xdb: // str8, str16, str32
		w := 1 << (c - 0xd9)
		h.kind, h.size = hBytes, 1+w
		h.payload, err = length(w)
	case c == 0xc7 || c == 0xc8 || c == 0xc9: // ext8, ext16, ext32: length, type, data
		w := 1 << (c - 0xc7)
		h.kind, h.size = hExt, 1+w+1
		h.payload, err = length(w)
	case c == 0xca: // float32
		h.payload = 4
	case c == 0xcb: // float64
		h.payload = 8
	case c >= 0xcc && c <= 0xcf: // uint8..uint64
		h.payload = 1 << (c - 0xcc)
	case c >= 0xd0 && c <= 0xd3: // int8..int64
		h.payload = 1 << (c - 0xd0)
	case c >= 0xd4 && c <= 0xd8: // fixext1..fixext16: type, data
		h.kind, h.size, h.payload = hExt, 2, 1<<(c-0xd4)
	case c == 0xdc || c == 0xdd: // array16, array32
		w := 2 << (c - 0xdc)
		h.kind, h.size = hArray, 1+w
		h.elems, err = length(w)
	case c == 0xde || c == 0xdf: // map16, map32
		w := 2 << (c - 0xde)
		h.kind, h.size = hMap, 1+w
		h.elems, err = length(w)
		h.elems *= 2
	default: // 0xc1: never used
		return hdr{}, fmt.Errorf("%w: byte %#x at offset %d", errMalformed, c, p)
	}
	return h, err
}

// valueEnd walks the one value at data[p:] without decoding it and returns where it ends. It fails unless every
// declared length is backed by bytes (every value takes at least one, so an array's or map's count is checked
// against what is left) and nesting stays within maxObjectDepth. It is iterative: a deep value cannot exhaust its
// stack.
func valueEnd(data []byte, p int) (int, error) {
	pending := []uint64{1} // values still to read at each depth
	for len(pending) > 0 {
		if pending[len(pending)-1] == 0 {
			pending = pending[:len(pending)-1]
			continue
		}
		pending[len(pending)-1]--
		h, err := header(data, p)
		if err != nil {
			return p, err
		}
		p += h.size
		if h.payload > uint64(len(data)-p) {
			return p, fmt.Errorf("%w: %d bytes declared at offset %d, %d left", errMalformed, h.payload, p,
				len(data)-p)
		}
		p += int(h.payload)
		if h.elems > 0 {
			if h.elems > uint64(len(data)-p) {
				return p, fmt.Errorf("%w: %d values declared at offset %d, %d bytes left", errMalformed, h.elems, p,
					len(data)-p)
			}
			if len(pending) >= maxObjectDepth {
				return p, fmt.Errorf("%w: nested deeper than %d", errMalformed, maxObjectDepth)
			}
			pending = append(pending, h.elems)
		}
	}
	return p, nil
}

// checkEncoding checks that data is exactly one well-formed value (see valueEnd).
func checkEncoding(data []byte) error {
	end, err := valueEnd(data, 0)
	if err != nil {
		return err
	}
	if end != len(data) {
		return fmt.Errorf("%w: %d bytes after the value", errMalformed, len(data)-end)
	}
	return nil
}

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
	h, err := header(w.data, p)
	if err != nil {
		return p, errStop
	}
	switch t.Kind() {
	case reflect.Map:
		if h.kind == hExt {
			// The decoder skips the extension's header (and type byte) and reads a map length from its payload.
			p += h.size
			if h, err = header(w.data, p); err != nil || h.kind != hMap {
				return p, errStop
			}
			if h.elems > uint64(len(w.data)-p-h.size) {
				return p, fmt.Errorf("%w: an extension at a map's place claims a map of %d entries, %d bytes left",
					errMalformed, h.elems/2, len(w.data)-p-h.size)
			}
		}
		if h.kind != hMap {
			return w.skip(p)
		}
		p += h.size
		for i := uint64(0); i < h.elems/2; i++ {
			if p, err = w.value(p, t.Key(), depth+1); err != nil {
				return p, err
			}
			if p, err = w.value(p, t.Elem(), depth+1); err != nil {
				return p, err
			}
		}
		return p, nil
	case reflect.Slice, reflect.Array:
		if h.kind != hArray {
			return w.skip(p)
		}
		p += h.size
		for i := uint64(0); i < h.elems; i++ {
			if p, err = w.value(p, t.Elem(), depth+1); err != nil {
				return p, err
			}
		}
		return p, nil
	case reflect.Struct:
		if h.kind == hArray { // a struct encoded as an array: its fields in order
			p += h.size
			fields := structFields(t)
			for i := uint64(0); i < h.elems; i++ {
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
		if h.kind != hMap {
			return w.skip(p)
		}
		p += h.size
		fields := structFields(t)
		for i := uint64(0); i < h.elems/2; i++ {
			kh, err := header(w.data, p)
			if err != nil || kh.kind != hBytes || uint64(len(w.data)-p-kh.size) < kh.payload {
				return p, errStop
			}
			name := string(w.data[p+kh.size : p+kh.size+int(kh.payload)])
			p += kh.size + int(kh.payload)
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
	end, err := valueEnd(w.data, p)
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
