//go:build linux

package netdev

import (
	"fmt"

	"github.com/gompj/gompj/device"
)

// readBufSize is each connection's read buffer: headers and small payloads are read through it in batches.
const readBufSize = 64 << 10

// directMin is the payload remainder from which the connection reads straight into the payload's destination
// instead of through its read buffer.
const directMin = 16 << 10

// frameHandler is what the read state machine tells about frames. header returns where the frame's payload goes
// (exactly payloadLen bytes); payload is called once that many bytes have arrived (at once for empty payloads).
type frameHandler interface {
	header(h *device.Header, credit uint32) (target, error)
	payload(h *device.Header) error
}

// target is where a frame's payload goes: contiguous bytes, or a window of a segmented buffer (a view's blocks).
type target struct {
	b      []byte
	seg    device.Payload // segmented when seg.Segs is set
	direct bool           // segmented: the pieces are large enough to read into directly (readv)
}

func (t target) size() int {
	if t.seg.Segmented() {
		return t.seg.Len
	}
	return len(t.b)
}

// rx is a connection's read state machine: it turns a byte stream into validated frames. It does no I/O, so a test
// or fuzz target can feed it any bytes.
type rx struct {
	buf       []byte
	r, w      int
	inPayload bool
	h         device.Header
	target    target
	got       int
}

// space returns the free part of the read buffer, compacting it first.
func (x *rx) space() []byte {
	if x.buf == nil {
		x.buf = make([]byte, readBufSize)
	}
	if x.r == x.w {
		x.r, x.w = 0, 0
	} else if x.r > 0 && len(x.buf)-x.w < HeaderSize {
		x.w = copy(x.buf, x.buf[x.r:x.w])
		x.r = 0
	}
	return x.buf[x.w:]
}

// direct returns where the next bytes should be read to bypass the buffer, or nil.
func (x *rx) direct() []byte {
	if x.inPayload && x.r == x.w && !x.target.seg.Segmented() && len(x.target.b)-x.got >= directMin {
		return x.target.b[x.got:]
	}
	return nil
}

// directv returns the segmented window the next bytes should be read into with readv, bypassing the buffer.
func (x *rx) directv() (device.Payload, bool) {
	t := x.target
	if x.inPayload && x.r == x.w && t.seg.Segmented() && t.direct && t.seg.Len-x.got >= directMin {
		return device.Payload{Segs: t.seg.Segs, Off: t.seg.Off + x.got, Len: t.seg.Len - x.got}, true
	}
	return device.Payload{}, false
}

// advanceDirect accounts for n bytes read into direct().
func (x *rx) advanceDirect(n int, hd frameHandler) error {
	x.got += n
	if x.got < x.target.size() {
		return nil
	}
	x.inPayload = false
	x.target = target{}
	return hd.payload(&x.h)
}

// parse consumes buffered bytes: headers (validated against l), payload bytes into their targets.
func (x *rx) parse(l *limits, hd frameHandler) error {
	for {
		if !x.inPayload {
			if x.w-x.r < HeaderSize {
				return nil
			}
			h, credit, err := decodeHeader(x.buf[x.r:x.r+HeaderSize], l)
			if err != nil {
				return err
			}
			x.r += HeaderSize
			x.h = h
			t, err := hd.header(&x.h, credit)
			if err != nil {
				return err
			}
			if uint64(t.size()) != payloadLen(&x.h) {
				return fmt.Errorf("netdev: internal: payload target of %d bytes for a frame of %d", t.size(), payloadLen(&x.h))
			}
			if t.size() == 0 {
				if err := hd.payload(&x.h); err != nil {
					return err
				}
				continue
			}
			x.target, x.got, x.inPayload = t, 0, true
		}
		var n int
		if x.target.seg.Segmented() {
			n = min(x.target.seg.Len-x.got, x.w-x.r)
			x.target.seg.Scatter(x.got, x.buf[x.r:x.r+n])
		} else {
			n = copy(x.target.b[x.got:], x.buf[x.r:x.w])
		}
		x.r += n
		x.got += n
		if x.got < x.target.size() {
			return nil
		}
		x.inPayload = false
		x.target = target{}
		if err := hd.payload(&x.h); err != nil {
			return err
		}
	}
}
