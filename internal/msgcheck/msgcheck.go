package msgcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every error of this package.
var ErrMalformed = errors.New("malformed msgpack encoding")

// Kind is what a header introduces.
type Kind uint8

const (
	Scalar Kind = iota // nil, bool, numbers
	Bytes              // str, bin: Payload bytes follow
	Ext                // ext: a type byte, then Payload bytes
	Array              // Elems values follow
	Map                // Elems values follow (keys and values)
)

// Header is one msgpack header: what it is, how long it is, and what follows it.
type Header struct {
	Kind    Kind
	Size    int    // bytes of the header itself
	Payload uint64 // bytes of payload after the header (str, bin, ext data; scalars' value bytes)
	Elems   uint64 // values that follow (arrays; maps count keys and values)
}

// Read reads the header at data[p:]. Lengths are not checked against the data here.
func Read(data []byte, p int) (Header, error) {
	if p >= len(data) {
		return Header{}, fmt.Errorf("%w: value expected at offset %d, at the end", ErrMalformed, p)
	}
	c := data[p]
	length := func(w int) (uint64, error) {
		if p+1+w > len(data) {
			return 0, fmt.Errorf("%w: length of %d bytes at offset %d, at the end", ErrMalformed, w, p+1)
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
	h := Header{Size: 1}
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixint, nil, bool
	case c >= 0x80 && c <= 0x8f: // fixmap
		h.Kind, h.Elems = Map, 2*uint64(c&0x0f)
	case c >= 0x90 && c <= 0x9f: // fixarray
		h.Kind, h.Elems = Array, uint64(c&0x0f)
	case c >= 0xa0 && c <= 0xbf: // fixstr
		h.Kind, h.Payload = Bytes, uint64(c&0x1f)
	case c == 0xc4 || c == 0xc5 || c == 0xc6: // bin8, bin16, bin32
		w := 1 << (c - 0xc4)
		h.Kind, h.Size = Bytes, 1+w
		h.Payload, err = length(w)
	case c == 0xd9 || c == 0xda || c == 0xdb: // str8, str16, str32
		w := 1 << (c - 0xd9)
		h.Kind, h.Size = Bytes, 1+w
		h.Payload, err = length(w)
	case c == 0xc7 || c == 0xc8 || c == 0xc9: // ext8, ext16, ext32: length, type, data
		w := 1 << (c - 0xc7)
		h.Kind, h.Size = Ext, 1+w+1
		h.Payload, err = length(w)
	case c == 0xca: // float32
		h.Payload = 4
	case c == 0xcb: // float64
		h.Payload = 8
	case c >= 0xcc && c <= 0xcf: // uint8..uint64
		h.Payload = 1 << (c - 0xcc)
	case c >= 0xd0 && c <= 0xd3: // int8..int64
		h.Payload = 1 << (c - 0xd0)
	case c >= 0xd4 && c <= 0xd8: // fixext1..fixext16: type, data
		h.Kind, h.Size, h.Payload = Ext, 2, 1<<(c-0xd4)
	case c == 0xdc || c == 0xdd: // array16, array32
		w := 2 << (c - 0xdc)
		h.Kind, h.Size = Array, 1+w
		h.Elems, err = length(w)
	case c == 0xde || c == 0xdf: // map16, map32
		w := 2 << (c - 0xde)
		h.Kind, h.Size = Map, 1+w
		h.Elems, err = length(w)
		h.Elems *= 2
	default: // 0xc1: never used
		return Header{}, fmt.Errorf("%w: byte %#x at offset %d", ErrMalformed, c, p)
	}
	return h, err
}

// Rules are what a walk requires beyond lengths backed by bytes.
type Rules struct {
	// MaxDepth bounds how deeply values nest: arrays and maps may hold others to MaxDepth-1 levels (at 1, only
	// scalars, strings and empty arrays and maps pass). The
	// decoder recurses once per level, so without a bound a few megabytes of nested one-element arrays would
	// exhaust a goroutine's stack, which also kills the process.
	MaxDepth int
	// NoExt refuses extension values. The decoder may read an extension found where it expects a map as a map
	// length and carry on from its payload, outside the structure the walk checked: a format that never holds
	// extensions is safest refusing them.
	NoExt bool
}

// End walks the one value at data[p:] without decoding it and returns where it ends. It fails unless every
// declared length is backed by bytes (every value takes at least one, so an array's or map's count is checked
// against what is left) and the value keeps to r. It is iterative: a deep value cannot exhaust its stack.
func (r Rules) End(data []byte, p int) (int, error) {
	pending := []uint64{1} // values still to read at each depth
	for len(pending) > 0 {
		if pending[len(pending)-1] == 0 {
			pending = pending[:len(pending)-1]
			continue
		}
		pending[len(pending)-1]--
		h, err := Read(data, p)
		if err != nil {
			return p, err
		}
		if r.NoExt && h.Kind == Ext {
			return p, fmt.Errorf("%w: an extension at offset %d", ErrMalformed, p)
		}
		p += h.Size
		if h.Payload > uint64(len(data)-p) {
			return p, fmt.Errorf("%w: %d bytes declared at offset %d, %d left", ErrMalformed, h.Payload, p, len(data)-p)
		}
		p += int(h.Payload)
		if h.Elems > 0 {
			if h.Elems > uint64(len(data)-p) {
				return p, fmt.Errorf("%w: %d values declared at offset %d, %d bytes left", ErrMalformed, h.Elems, p,
					len(data)-p)
			}
			if len(pending) >= r.MaxDepth {
				return p, fmt.Errorf("%w: nested deeper than %d", ErrMalformed, r.MaxDepth)
			}
			pending = append(pending, h.Elems)
		}
	}
	return p, nil
}

// Check checks that data is exactly one value that keeps to r (see End).
func (r Rules) Check(data []byte) error {
	end, err := r.End(data, 0)
	if err != nil {
		return err
	}
	if end != len(data) {
		return fmt.Errorf("%w: %d bytes after the value", ErrMalformed, len(data)-end)
	}
	return nil
}
