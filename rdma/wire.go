package rdma

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gompj/gompj/device"
)

// Header sizes (the layout is in doc.go).
const (
	hdrSize     = 48
	extHdrSize  = 72
	wireVersion = 1
)

// Device-internal message kinds, beyond device.Kind. They never reach a Sink.
const (
	kindCredit device.Kind = 0x20 // returns eager credits; no message of its own
	kindFin    device.Kind = 0x22 // receiver to sender: my Reads of your payload are done
	kindWDone  device.Kind = 0x23 // sender to receiver: my Writes into your buffer are done
)

// flagRMA marks an RTS or CTS that carries an address and key. flagPieces marks an RTS whose payload is in pieces
// that the sender Writes itself (it cannot be Read through one address): the receiver answers with a CTS that
// gives its buffer (flagRMA, offset 0), or with none of it taken.
//
// flagClaim marks an RTS whose sender opened a claim word for a split (Claimer): its offset field is the word's
// token. The receiver may then split the copy, and whichever end claims the word copies the second part.
const (
	flagRMA    uint8 = 1 << 1
	flagPieces uint8 = 1 << 2
	flagClaim  uint8 = 1 << 3
)

// ErrMessage is wrapped by every error about a malformed or unexpected message from a peer.
var ErrMessage = errors.New("rdma: bad message")

// hdr is a decoded message header.
type hdr struct {
	device.Header
	credit uint32
	pseq   uint32
	raddr  uint64
	rkey   uint64
	offset uint64
}

func hasExt(k device.Kind) bool {
	return k == device.KindRTS || k == device.KindCTS || k == device.KindData
}

// size is the header's size on the wire.
func (h *hdr) size() int {
	if hasExt(h.Kind) {
		return extHdrSize
	}
	return hdrSize
}

// put encodes h into b and returns its size.
func (h *hdr) put(b []byte) int {
	_ = b[hdrSize-1]
	b[0] = byte(h.Kind)
	b[1] = h.Flags
	b[2] = h.Type
	b[3] = wireVersion
	binary.LittleEndian.PutUint32(b[4:], h.Context)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.Source))
	binary.LittleEndian.PutUint32(b[12:], uint32(h.Dest))
	binary.LittleEndian.PutUint32(b[16:], uint32(h.Tag))
	binary.LittleEndian.PutUint32(b[20:], uint32(h.SrcRank))
	binary.LittleEndian.PutUint64(b[24:], h.Length)
	binary.LittleEndian.PutUint64(b[32:], h.Seq)
	binary.LittleEndian.PutUint32(b[40:], h.credit)
	binary.LittleEndian.PutUint32(b[44:], h.pseq)
	if !hasExt(h.Kind) {
		return hdrSize
	}
	_ = b[extHdrSize-1]
	binary.LittleEndian.PutUint64(b[48:], h.raddr)
	binary.LittleEndian.PutUint64(b[56:], h.rkey)
	binary.LittleEndian.PutUint64(b[64:], h.offset)
	return extHdrSize
}

// limits is what decode checks a message against: the job's shape, this node and the sending peer.
type limits struct {
	ranks      int
	rankNode   []int32 // the node of each rank (ranks entries): a table, since decode looks twice per message
	self, peer int
	maxEager   uint64 // largest eager payload this node accepts
	maxData    uint64 // largest DATA payload
	maxMessage uint64 // largest rendezvous message
}

func badf(peer int, format string, args ...any) error {
	return fmt.Errorf("%w from node %d: %s", ErrMessage, peer, fmt.Sprintf(format, args...))
}

// decode decodes and validates the message m (header and what follows). It never panics; checks that need the
// device's tables (known sequence numbers) are the caller's.
func decode(m []byte, l *limits) (h hdr, payload []byte, err error) {
	if len(m) < hdrSize {
		return h, nil, badf(l.peer, "message of %d bytes, shorter than a header", len(m))
	}
	if m[3] != wireVersion {
		return h, nil, badf(l.peer, "wire version %d, want %d", m[3], wireVersion)
	}
	h.Kind = device.Kind(m[0])
	h.Flags = m[1]
	h.Type = m[2]
	h.Context = binary.LittleEndian.Uint32(m[4:])
	h.Source = int32(binary.LittleEndian.Uint32(m[8:]))
	h.Dest = int32(binary.LittleEndian.Uint32(m[12:]))
	h.Tag = int32(binary.LittleEndian.Uint32(m[16:]))
	h.SrcRank = int32(binary.LittleEndian.Uint32(m[20:]))
	h.Length = binary.LittleEndian.Uint64(m[24:])
	h.Seq = binary.LittleEndian.Uint64(m[32:])
	h.credit = binary.LittleEndian.Uint32(m[40:])
	h.pseq = binary.LittleEndian.Uint32(m[44:])
	size := hdrSize
	if hasExt(h.Kind) {
		if len(m) < extHdrSize {
			return h, nil, badf(l.peer, "kind %d: message of %d bytes, shorter than its header", h.Kind, len(m))
		}
		h.raddr = binary.LittleEndian.Uint64(m[48:])
		h.rkey = binary.LittleEndian.Uint64(m[56:])
		h.offset = binary.LittleEndian.Uint64(m[64:])
		size = extHdrSize
	}
	payload = m[size:]
	if h.Flags&^(device.FlagSync|flagRMA|flagPieces|flagClaim) != 0 {
		return h, nil, badf(l.peer, "unknown flags %#x", h.Flags)
	}
	if h.Flags&flagPieces != 0 && (h.Kind != device.KindRTS || h.Flags&flagRMA != 0) {
		return h, nil, badf(l.peer, "kind %d with flags %#x", h.Kind, h.Flags)
	}
	if h.Flags&flagClaim != 0 && (h.Kind != device.KindRTS || h.Flags&flagRMA == 0) {
		return h, nil, badf(l.peer, "kind %d with flags %#x", h.Kind, h.Flags)
	}
	if h.Flags&flagRMA != 0 && h.Kind != device.KindRTS && h.Kind != device.KindCTS {
		return h, nil, badf(l.peer, "kind %d with the rma flag", h.Kind)
	}
	if h.Flags&flagRMA == 0 && (h.raddr != 0 || h.rkey != 0) {
		return h, nil, badf(l.peer, "kind %d: an address without the rma flag", h.Kind)
	}
	switch h.Kind {
	case device.KindEager, device.KindRTS, device.KindData, kindWDone:
		// From the message's sender (the peer) to its receiver (us).
		if err := l.ranksOn(&h, l.peer, l.self); err != nil {
			return h, nil, err
		}
		if h.SrcRank < 0 || int(h.SrcRank) >= l.ranks {
			return h, nil, badf(l.peer, "kind %d: communicator source rank %d out of range [0,%d)", h.Kind, h.SrcRank, l.ranks)
		}
	case device.KindCTS, device.KindAck, kindFin:
		// Replies from the message's receiver (the peer) back to its sender (us).
		if err := l.ranksOn(&h, l.self, l.peer); err != nil {
			return h, nil, err
		}
	case kindCredit:
		if h.Flags != 0 || h.Type != 0 || h.Context != 0 || h.Source != -1 || h.Dest != -1 || h.Tag != 0 || h.SrcRank != 0 ||
			h.Length != 0 || h.Seq != 0 {
			return h, nil, badf(l.peer, "credit message with message fields set")
		}
	default:
		return h, nil, badf(l.peer, "unknown kind %d", h.Kind)
	}
	if h.Kind != device.KindCTS && h.Kind != device.KindData && h.Flags&flagClaim == 0 && h.offset != 0 {
		return h, nil, badf(l.peer, "kind %d with an offset", h.Kind)
	}
	switch h.Kind {
	case device.KindEager:
		if h.Length > l.maxEager || h.Length != uint64(len(payload)) {
			return h, nil, badf(l.peer, "eager message of %d bytes carrying %d (limit %d)", h.Length, len(payload), l.maxEager)
		}
	case device.KindData:
		if h.Length == 0 || h.Length > l.maxData || h.Length != uint64(len(payload)) {
			return h, nil, badf(l.peer, "data message of %d bytes carrying %d (limit %d)", h.Length, len(payload), l.maxData)
		}
	case device.KindRTS, device.KindCTS:
		if h.Length > l.maxMessage {
			return h, nil, badf(l.peer, "message of %d bytes over the limit %d", h.Length, l.maxMessage)
		}
		if h.Kind == device.KindCTS && h.offset > h.Length {
			return h, nil, badf(l.peer, "CTS offset %d past the message's %d bytes", h.offset, h.Length)
		}
		fallthrough
	default:
		if len(payload) != 0 {
			return h, nil, badf(l.peer, "kind %d followed by %d bytes", h.Kind, len(payload))
		}
	}
	if h.Kind == device.KindAck && h.Length > l.maxEager {
		return h, nil, badf(l.peer, "ack for %d bytes over the eager limit %d", h.Length, l.maxEager)
	}
	return h, payload, nil
}

// ranksOn checks that h.Source lives on node src and h.Dest on node dst.
func (l *limits) ranksOn(h *hdr, src, dst int) error {
	if h.Source < 0 || int(h.Source) >= l.ranks || h.Dest < 0 || int(h.Dest) >= l.ranks {
		return badf(l.peer, "kind %d: ranks %d -> %d out of range [0,%d)", h.Kind, h.Source, h.Dest, l.ranks)
	}
	if n := int(l.rankNode[h.Source]); n != src {
		return badf(l.peer, "kind %d: source rank %d lives on node %d, not node %d", h.Kind, h.Source, n, src)
	}
	if n := int(l.rankNode[h.Dest]); n != dst {
		return badf(l.peer, "kind %d: destination rank %d lives on node %d, not node %d", h.Kind, h.Dest, n, dst)
	}
	return nil
}
