//go:build linux

package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gompj/gompj/device"
)

// HeaderSize is the size of every frame header on the wire. The byte layout is in doc.go.
const HeaderSize = 48

// wireVersion is byte 3 of every header.
const wireVersion = 1

// Device-internal frame kinds, beyond device.Kind. They never reach a Sink.
const (
	kindCredit device.Kind = 0x20 // no payload; its credit field returns receive credit
	kindBye    device.Kind = 0x21 // no payload; the sender will send nothing more on this connection
)

// ErrFrame is wrapped by every error about a malformed or unexpected frame.
var ErrFrame = errors.New("netdev: bad frame")

// putHeader encodes h (and the credit returned to the peer) into b[:HeaderSize].
func putHeader(b []byte, h *device.Header, credit uint32) {
	_ = b[HeaderSize-1]
	b[0] = byte(h.Kind)
	b[1] = h.Flags
	b[2] = h.Type
	b[3] = wireVersion
	binary.LittleEndian.PutUint32(b[4:], h.Context)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.Source))
	binary.LittleEndian.PutUint32(b[12:], uint32(h.Dest))
	binary.LittleEndian.PutUint32(b[16:], uint32(h.Tag))
	binary.LittleEndian.PutUint32(b[20:], credit)
	binary.LittleEndian.PutUint64(b[24:], h.Length)
	binary.LittleEndian.PutUint64(b[32:], h.Seq)
	binary.LittleEndian.PutUint32(b[40:], uint32(h.SrcRank))
	binary.LittleEndian.PutUint32(b[44:], 0)
}

// limits is what decodeHeader checks a header against: the job's shape and this connection's ends.
type limits struct {
	ranks      int           // world size
	nodeOf     func(int) int // world rank -> node id
	self, peer int           // this node, and the node at the other end of the connection
	maxEager   uint64        // largest eager payload
	maxData    uint64        // largest DATA frame payload
	maxMessage uint64        // largest rendezvous message (RTS length)
}

// payloadLen is how many payload bytes follow a (validated) header on the wire.
func payloadLen(h *device.Header) uint64 {
	switch h.Kind {
	case device.KindEager, device.KindData:
		return h.Length
	}
	return 0
}

func badf(peer int, format string, args ...any) error {
	return fmt.Errorf("%w from node %d: %s", ErrFrame, peer, fmt.Sprintf(format, args...))
}

// decodeHeader decodes and validates one header. It never panics; any inconsistency is an error naming the peer.
// Checks that need the device's tables (known sequence numbers) are done by the caller.
func decodeHeader(b []byte, l *limits) (h device.Header, credit uint32, err error) {
	if len(b) < HeaderSize {
		return h, 0, badf(l.peer, "short header (%d bytes)", len(b))
	}
	if b[3] != wireVersion {
		return h, 0, badf(l.peer, "wire version %d, want %d", b[3], wireVersion)
	}
	h.Kind = device.Kind(b[0])
	h.Flags = b[1]
	h.Type = b[2]
	h.Context = binary.LittleEndian.Uint32(b[4:])
	h.Source = int32(binary.LittleEndian.Uint32(b[8:]))
	h.Dest = int32(binary.LittleEndian.Uint32(b[12:]))
	h.Tag = int32(binary.LittleEndian.Uint32(b[16:]))
	credit = binary.LittleEndian.Uint32(b[20:])
	h.Length = binary.LittleEndian.Uint64(b[24:])
	h.Seq = binary.LittleEndian.Uint64(b[32:])
	h.SrcRank = int32(binary.LittleEndian.Uint32(b[40:]))
	if r := binary.LittleEndian.Uint32(b[44:]); r != 0 {
		return h, 0, badf(l.peer, "reserved header bytes set (%#x)", r)
	}

	if h.Flags&^device.FlagSync != 0 {
		return h, 0, badf(l.peer, "unknown flags %#x", h.Flags)
	}
	switch h.Kind {
	case device.KindEager, device.KindRTS, device.KindData:
		// Travelling from the sender's node (the peer) to the receiver's (us).
		if err := l.ranksOn(&h, l.peer, l.self); err != nil {
			return h, 0, err
		}
		if h.SrcRank < 0 || int(h.SrcRank) >= l.ranks {
			return h, 0, badf(l.peer, "kind %d: communicator source rank %d out of range [0,%d)", h.Kind, h.SrcRank, l.ranks)
		}
	case device.KindCTS, device.KindAck:
		// Replies travelling from the receiver's node (the peer) back to the sender's (us).
		if err := l.ranksOn(&h, l.self, l.peer); err != nil {
			return h, 0, err
		}
	case kindCredit, kindBye:
		if h.Flags != 0 || h.Type != 0 || h.Context != 0 || h.Source != -1 || h.Dest != -1 || h.Tag != 0 || h.Seq != 0 || h.SrcRank != 0 {
			return h, 0, badf(l.peer, "node-level frame kind %d with rank fields set", h.Kind)
		}
		if h.Length != 0 {
			return h, 0, badf(l.peer, "frame kind %d with length %d", h.Kind, h.Length)
		}
	default:
		return h, 0, badf(l.peer, "unknown frame kind %d", h.Kind)
	}
	switch h.Kind {
	case device.KindEager:
		if h.Length > l.maxEager {
			return h, 0, badf(l.peer, "eager payload of %d bytes over the limit %d", h.Length, l.maxEager)
		}
	case device.KindData:
		if h.Length == 0 || h.Length > l.maxData {
			return h, 0, badf(l.peer, "data frame of %d bytes (limit %d)", h.Length, l.maxData)
		}
	case device.KindRTS, device.KindCTS:
		if h.Length > l.maxMessage {
			return h, 0, badf(l.peer, "message of %d bytes over the limit %d", h.Length, l.maxMessage)
		}
	case device.KindAck:
		if h.Length > l.maxEager {
			return h, 0, badf(l.peer, "ack for %d bytes over the eager limit %d", h.Length, l.maxEager)
		}
	}
	return h, credit, nil
}

// ranksOn checks that h.Source lives on node src and h.Dest on node dst.
func (l *limits) ranksOn(h *device.Header, src, dst int) error {
	if h.Source < 0 || int(h.Source) >= l.ranks || h.Dest < 0 || int(h.Dest) >= l.ranks {
		return badf(l.peer, "kind %d: ranks %d -> %d out of range [0,%d)", h.Kind, h.Source, h.Dest, l.ranks)
	}
	if n := l.nodeOf(int(h.Source)); n != src {
		return badf(l.peer, "kind %d: source rank %d lives on node %d, not node %d", h.Kind, h.Source, n, src)
	}
	if n := l.nodeOf(int(h.Dest)); n != dst {
		return badf(l.peer, "kind %d: destination rank %d lives on node %d, not node %d", h.Kind, h.Dest, n, dst)
	}
	return nil
}
