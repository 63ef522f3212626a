//go:build linux

package shm

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gompj/gompj/rdma"
	"golang.org/x/sys/unix"
)

// Lent memory (rdma.Lender). A CMA copy costs the kernel a page-table walk, a pin and an unpin for every 4 KiB
// page besides the copy itself: `gompj bench alltoall -np 4 -nodes 2` at 8 MiB per pair spent as many samples
// walking and pinning as copying, and ran 5x slower than the same alltoall in one process. Memory the program
// takes from Alloc is a part of this node's segment instead, which every peer on the host already holds (the
// handshake passed it): a peer maps the part it needs once, and from then on a Read or Write of it is a plain
// copy between mappings, as fast as a copy within a process.
//
// A registration of lent memory (Register) carries the segment offset in its key: keyLent, and below it the
// distance from the address to the offset, so that the peer finds the offset of any address inside the region
// (the device names sub-ranges by address: a split copy's second half). The peer checks the range against the
// segment's size and copies through its mapping of the whole segment (lentRange); a range it cannot reach (past
// the segment) goes by CMA, which names the same bytes by address, where CMA works. Where it does not, Read and
// Write of lent memory still work (LentRMA): the device moves lent memory so, and streams the rest.
//
// Pages are populated ahead of use, on both sides: Alloc's in this process, and a peer's range in the mapping that
// reaches it the first time a transfer goes through it (peer.mapped). A page fault cost 12.5-14.5 us a page on the
// VM of the measurements, populating 0.4-1.4 us: NPB FT class A on 2 node processes took 125 thousand faults, 19
// thousand with this.
//
// Free gives the segment's pages back (a hole punched in the file, reused by a later Alloc, cleared then) and
// puts private zero pages where the program's mapping was: a slice kept past Free reads zeros and writes to
// nobody, never to memory lent again.

const (
	keyLent = uint64(1) << 63 // an MR key of lent memory
	winMin  = 64 << 20        // the first mapping of a peer's segment (lentRange) is at least this long
)

// keyOf is the MR key of lent memory whose offset in the segment is delta bytes after its address.
func keyOf(delta int64) uint64 { return keyLent | uint64(delta)&(keyLent-1) }

// deltaOf is the inverse of keyOf: the 63 bits below keyLent, sign-extended.
func deltaOf(key uint64) int64 { return int64(key<<1) >> 1 }

type span struct{ off, n int64 }

// heap is the holes Free left in the segment, guarded by the endpoint's segMu with the segment's size. What the
// endpoint has lent is in the process's record of lent memory (rdma.NoteLent), with each piece's segment offset.
type heap struct {
	holes []span
}

// lentMR is the registration of lent memory.
type lentMR struct{ delta int64 }

func (m lentMR) Key() uint64                { return keyOf(m.delta) }
func (lentMR) Desc() unsafe.Pointer         { return nil }
func (lentMR) Addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }
func (lentMR) Close() error                 { return nil }

// Alloc implements rdma.Lender: n zeroed bytes of this node's segment.
func (e *endpoint) Alloc(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("shm: Alloc of %d bytes", n)
	}
	if n == 0 {
		return []byte{}, nil
	}
	if e.closed.Load() {
		return nil, errors.New("shm: Alloc on a closed endpoint")
	}
	sz := (int64(n) + pageSize - 1) &^ (pageSize - 1)
	e.segMu.Lock()
	if e.seg.fd < 0 {
		e.segMu.Unlock()
		return nil, errors.New("shm: Alloc on a closed endpoint")
	}
	off, reused := e.heap.takeHole(sz)
	if !reused {
		off = e.seg.size
		if err := unix.Ftruncate(e.seg.fd, off+sz); err != nil {
			e.segMu.Unlock()
			return nil, fmt.Errorf("shm: growing the segment by %d bytes: %w", sz, err)
		}
		e.seg.size += sz
	}
	// MmapPtr rather than unix.Mmap, whose registry of mappings Free's MAP_FIXED would leave stale.
	ptr, err := unix.MmapPtr(e.seg.fd, off, nil, uintptr(sz), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		e.heap.holes = append(e.heap.holes, span{off, sz})
		e.segMu.Unlock()
		return nil, fmt.Errorf("shm: mmap of %d bytes at %d: %w", sz, off, err)
	}
	e.segMu.Unlock()
	m := unsafe.Slice((*byte)(ptr), sz)
	if reused {
		clear(m) // a hole reads as zeros, unless a peer wrote into it after Free (a transfer into freed memory)
	} else {
		populate(m)
	}
	rdma.NoteLent(m, e, off)
	return m[:n:n], nil
}

// Free implements rdma.Lender: it gives back memory Alloc returned (b starts where it did), and reports false
// for any other memory.
func (e *endpoint) Free(b []byte) (bool, error) {
	m, off, ok := rdma.ForgetLent(b, e)
	if !ok {
		return false, nil
	}
	if _, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&m[0]), uintptr(len(m)), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED); err != nil {
		return true, fmt.Errorf("shm: unmapping %d freed bytes: %w", len(m), err)
	}
	e.segMu.Lock()
	defer e.segMu.Unlock()
	if e.seg.fd < 0 {
		return true, nil // closed: the segment goes with its last mapping
	}
	if err := unix.Fallocate(e.seg.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, int64(len(m))); err != nil {
		return true, fmt.Errorf("shm: giving back %d freed bytes of the segment: %w", len(m), err)
	}
	e.heap.holes = append(e.heap.holes, span{off, int64(len(m))})
	return true, nil
}

// takeHole takes sz bytes from the first hole that has them. Called with the endpoint's segMu held.
func (h *heap) takeHole(sz int64) (int64, bool) {
	for i, s := range h.holes {
		if s.n >= sz {
			if s.n == sz {
				h.holes = slices.Delete(h.holes, i, i+1)
			} else {
				h.holes[i] = span{s.off + sz, s.n - sz}
			}
			return s.off, true
		}
	}
	return 0, false
}

// offsetOf returns the segment offset of b's first byte, if all of b lies in one piece this endpoint lent.
func (e *endpoint) offsetOf(b []byte) (int64, bool) { return rdma.LentBy(b, e) }

// lentRange returns n bytes of the peer's segment at off, mapped here, for a Read or Write of memory it lent.
//
// The peer's whole segment is mapped, from its start, in a mapping a power of two long, at least the segment's
// size when it was made: mmap allows a mapping past the end of a file, and only bytes below the size fstat last
// reported are ever touched (the file is sealed against shrinking, so they stay valid). A range past that mapping,
// once the peer's segment has grown, takes a new one twice as long; the old ones stay until the endpoint's
// cleanup, as a copy may still be running in them. So a peer's segment costs a handful of mappings, however many
// buffers it lends.
func (p *peer) lentRange(off int64, n int) ([]byte, error) {
	if off < pageSize || n <= 0 || off > 1<<56 || n > 1<<40 {
		return nil, fmt.Errorf("%d bytes at %d are not memory of the peer's heap", n, off)
	}
	end := off + int64(n)
	p.winMu.Lock()
	defer p.winMu.Unlock()
	if end <= p.seen {
		return p.mapped(off, end), nil
	}
	if p.segFd < 0 || p.winsGone {
		return nil, errors.New("no mapping of the peer's segment")
	}
	var st unix.Stat_t
	if err := unix.Fstat(p.segFd, &st); err != nil {
		return nil, fmt.Errorf("fstat of the peer's segment: %w", err)
	}
	if end > st.Size {
		return nil, fmt.Errorf("%d bytes at %d, past the peer's segment of %d", n, off, st.Size)
	}
	if st.Size > int64(len(p.win)) {
		size := int64(winMin)
		for size < st.Size {
			size *= 2
		}
		w, err := mmap(p.segFd, 0, int(size)) // unix.Mmap: the endpoint's cleanup unmaps it with unix.Munmap
		if err != nil {
			return nil, err
		}
		p.win = w
		p.wins = append(p.wins, w)
		p.populated = p.populated[:0] // a new mapping: none of its pages are mapped yet
	}
	p.seen = st.Size
	return p.mapped(off, end), nil
}

// mapped returns bytes [off, end) of the peer's segment through win, their pages populated (with p.winMu held).
// The first touch of a page of a mapping costs a page fault, 12.5-14.5 us each on the VM of the measurements, where
// populating a range costs 0.4-0.9 us a page; populated ranges are noted, so that a transfer through a range
// mapped already pays a look at a short list. (NPB FT, class A, 4 ranks on 2 node processes: the first transposes
// through a peer's mapping of the alltoall buffers took 8-9 thousand such faults.)
func (p *peer) mapped(off, end int64) []byte {
	lo, hi := off&^(pageSize-1), min((end+pageSize-1)&^(pageSize-1), int64(len(p.win)))
	p.populated = addSpan(p.populated, lo, hi, func(lo, hi int64) { populate(p.win[lo:hi]) })
	return p.win[off:end:end]
}

// addSpan adds [lo, hi) to spans (sorted, disjoint and not adjacent, as it returns them), calling fill for each
// part of [lo, hi) that no span covered.
func addSpan(spans []span, lo, hi int64, fill func(lo, hi int64)) []span {
	if lo >= hi {
		return spans
	}
	// the first span that overlaps or touches [lo, hi), or where one would go
	i, _ := slices.BinarySearchFunc(spans, lo, func(s span, x int64) int {
		switch {
		case s.off+s.n < x:
			return -1
		case s.off > x:
			return 1
		}
		return 0
	})
	merged := span{off: lo}
	end, at := hi, lo
	j := i
	for ; j < len(spans) && spans[j].off <= hi; j++ {
		s := spans[j]
		if s.off > at {
			fill(at, s.off)
		}
		at = max(at, s.off+s.n)
		merged.off, end = min(merged.off, s.off), max(end, s.off+s.n)
	}
	if at < hi {
		fill(at, hi)
	}
	merged.n = end - merged.off
	return slices.Replace(spans, i, j, merged)
}

// LentRMA implements rdma.LentRMA: the peer passed its segment in the handshake.
func (e *endpoint) LentRMA(node int) bool {
	p := e.peer(node)
	return p != nil && p.segFd >= 0
}

var (
	_ rdma.Lender  = (*endpoint)(nil)
	_ rdma.LentRMA = (*endpoint)(nil)
)
