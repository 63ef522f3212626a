package rdma

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/gompj/gompj/device"
)

// Payloads in pieces (device.Segmented): the blocks of a strided view.
//
//   - Received by RMA, pieces are Read into directly: one copy, where packing costs two. On an endpoint with
//     vectored Reads (VectorRMA: shm's process_vm_readv) a Read fills up to device.IovMax pieces, else one Read
//     fills one piece; either is split at Caps.MaxRMA. Small pieces (under readvMin on average with vectored
//     Reads, directMin without), or any on a provider that wants local buffers registered (Caps.LocalMR), are
//     Read into a pooled staging buffer that is scattered into them at the end, as packing would. Streamed DATA
//     (no RMA) is scattered into the pieces from the receive buffers.
//   - Sent with vectored Writes (and pieces not small), the pieces are Written by the sender into the receiver's
//     buffer (flagPieces: a peer cannot Read scattered memory through one key and address); a receiver whose
//     own buffer is in pieces offers a staging buffer and scatters it. Otherwise they are gathered into a pooled
//     staging buffer, which the receiver Reads as any payload. Eager payloads are gathered likewise.
//
// Staging buffers come from pools by power-of-two size and are registered whole, so that the registration cache
// hits when a buffer comes back for a message of another length.

// directMin is the average piece size from which a receive Reads into the pieces themselves, a Read each;
// readvMin is that size with vectored Reads, where a piece costs the kernel an iovec rather than a system call.
// Over shm, 512-byte pieces read by process_vm_readv took more CPU time (user and system, two node processes,
// `gompj bench view -np 2 -nodes 2 -sizes 512`) than staging them; from 2 KiB the two were even; 4 KiB keeps a
// margin. The direct Read saves the staging copy and, on the receiver's critical path, the scatter.
const (
	directMin = 8 << 10
	readvMin  = 4 << 10
)

// tinySample is how many pieces tinyPieces looks at.
const tinySample = 16

// tinyPieces reports whether p's pieces are too small on average to Read into directly.
func (d *Device) tinyPieces(p device.Payload) bool {
	least := directMin
	if d.vec != nil {
		least = readvMin
	}
	mean, k := p.MeanPiece(0, p.Len, tinySample)
	if k == 0 {
		return true
	}
	if k < tinySample { // all of it: a single piece is never tiny
		return mean < least && k > 1
	}
	return mean < least
}

// piecesRMA makes the Reads of a receive into p's pieces from the peer's raddr: vectored Reads of up to
// device.IovMax pieces and Caps.MaxRMA bytes, or a Read per piece, whose memory stays pinned until the receive
// releases pin (a provider may keep a local buffer until the Read completes: a NIC, libfabric through cgo).
func (d *Device) piecesRMA(write bool, pin *pins, p device.Payload, raddr, rkey, ctx uint64) []*rmaOp {
	var scratch [64][]byte
	var ops []*rmaOp
	var batch [][]byte // the vectored Read being filled: its pieces, from byte at of the payload
	at, size := 0, 0
	flush := func() {
		if len(batch) > 0 {
			ops = append(ops, &rmaOp{write: write, locals: batch, raddr: raddr + uint64(at), rkey: rkey, ctx: ctx})
			batch, at, size = nil, at+size, 0
		}
	}
	maxRMA := d.caps.MaxRMA
	if maxRMA <= 0 {
		maxRMA = math.MaxInt
	}
	for off := 0; off < p.Len; {
		k := p.Segs.Pieces(p.Off+off, p.Len-off, scratch[:])
		if k == 0 {
			break // a Pieces that ends early: the Reads cover what it has, and the receive never completes short
		}
		for _, b := range scratch[:k] {
			if len(b) == 0 {
				continue
			}
			if d.vec == nil {
				pin.Pin(&b[0])
				ops = append(ops, d.splitRMA(write, b, nil, raddr+uint64(off), rkey, ctx)...)
				off += len(b)
				continue
			}
			for len(b) > 0 {
				if len(batch) == device.IovMax || size == maxRMA {
					flush()
				}
				c := min(len(b), maxRMA-size)
				batch = append(batch, b[:c])
				size += c
				b = b[c:]
				off += c
			}
		}
	}
	flush()
	return ops
}

// Staging buffers, by size class: class c holds 1<<(c+minStageShift) bytes.
const minStageShift = 12

var stagePools [40]sync.Pool

func stageClass(n int) int {
	if n <= 1<<minStageShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minStageShift
}

// getStage returns a pooled buffer of at least n bytes.
func getStage(n int) *[]byte {
	c := stageClass(n)
	if c >= len(stagePools) {
		b := make([]byte, n)
		return &b
	}
	if b, ok := stagePools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 1<<(c+minStageShift))
	return &b
}

func putStage(b *[]byte) {
	if c := stageClass(cap(*b)); c < len(stagePools) && cap(*b) == 1<<(c+minStageShift) {
		stagePools[c].Put(b)
	}
}

// Segments implements device.Segmented: every peer this device serves.
func (d *Device) Segments(peer int) bool {
	if peer < 0 || peer >= d.ranks || d.peers == nil {
		return false
	}
	return d.peers[d.rankNode[peer]] != nil
}

// SendEagerv implements device.Segmented: the pieces are gathered into a staging buffer, which SendEager copies
// out before it returns.
func (d *Device) SendEagerv(h *device.Header, p device.Payload, done device.Completer) error {
	if !p.Segmented() {
		return d.SendEager(h, p.Bytes, done)
	}
	if p.Len == 0 {
		return d.SendEager(h, nil, done)
	}
	if p.Len < 0 || p.Len > 1<<30 {
		return fmt.Errorf("rdma: eager payload of %d bytes", p.Len)
	}
	st := getStage(p.Len)
	b := (*st)[:p.Len]
	p.Gather(0, b)
	err := d.SendEager(h, b, done)
	putStage(st)
	return err
}

// SendRendezvousv implements device.Segmented: toward a peer this endpoint Writes with vectored Writes, large
// pieces are Written straight into the receiver's buffer (flagPieces); otherwise they are gathered into a staging
// buffer that the device owns until the send completes, and sent from there.
func (d *Device) SendRendezvousv(h *device.Header, p device.Payload, done device.Completer) error {
	if !p.Segmented() {
		return d.SendRendezvous(h, p.Bytes, done)
	}
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil {
		return errors.New("rdma: nil header")
	}
	if p.Len < 0 || uint64(p.Len) > d.cfg.MaxMessage {
		return fmt.Errorf("rdma: message of %d bytes over the limit %d", p.Len, d.cfg.MaxMessage)
	}
	if err := d.checkSource(h.Source); err != nil {
		return err
	}
	pr, err := d.peerOf(h.Dest, "destination")
	if err != nil {
		return err
	}
	if p.Len == 0 {
		return d.rendezvous(pr, h, nil, true, nil, done)
	}
	if d.vec != nil && pr.rma.Load() && p.Len > pr.eagerMax && !d.tinyPieces(p) {
		// We Write the pieces into the receiver's buffer ourselves: no staging copy.
		s := &rdvSend{p: pr, h: *h, size: p.Len, owned: true, pieces: true, segs: p, done: done}
		s.h.Kind = device.KindRTS
		s.h.Flags &= device.FlagSync
		s.h.Length = uint64(p.Len)
		s.h.Seq = d.seq.Add(1)
		rh := hdr{Header: s.h}
		rh.Flags |= flagPieces
		return d.sendRTS(pr, s, &rh)
	}
	st := getStage(p.Len)
	b := (*st)[:p.Len]
	p.Gather(0, b)
	return d.rendezvous(pr, h, b, true, st, done)
}

// ClearToSendv implements device.Segmented.
func (d *Device) ClearToSendv(rts *device.Header, dst device.Payload, done device.Completer) error {
	return d.clearToSend(rts, dst, done)
}
