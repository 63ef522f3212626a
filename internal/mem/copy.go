package mem

import (
	"sync"
	"unsafe"
)

// piece is how much one built-in copy moves in a cut copy: below the runtime's non-temporal size, and small enough
// that the pieces' loop keeps the prefetchers busy (256 KiB pieces of 4 MiB: 65 GB/s; 512 KiB: 53).
const piece = 256 << 10

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns the count, as copy does. Copies from
// nonTemporalMin bytes up to a quarter of each CPU's share of the last-level cache go in pieces (see the package's
// doc); overlapping buffers go to copy, which handles the overlap. Smaller copies cost one comparison more than copy
// (Copy inlines).
func Copy(dst, src []byte) int {
	if len(dst) < nonTemporalMin || len(src) < nonTemporalMin {
		return copy(dst, src)
	}
	return cut(dst, src)
}

// cut is Copy from nonTemporalMin bytes on.
func cut(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n > cutMax() || !Disjoint(dst[:n], src[:n]) {
		return copy(dst, src)
	}
	for off := 0; off < n; off += piece {
		end := min(off+piece, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}

// Disjoint reports whether a and b share no byte: Copy cuts only such copies, and the collectives receive straight
// into a result that is apart from the send buffer (collectives.Disjoint).
func Disjoint(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa+uintptr(len(a)) <= pb || pb+uintptr(len(b)) <= pa
}

// The largest copy cut in pieces: a quarter of each CPU's share of the last-level cache (the ranks of a job copy at
// the same moments, each its source and its destination), within [minCut, maxCut]; defaultCut where the cache's
// size is unknown.
const (
	minCut     = 1 << 20
	maxCut     = 64 << 20
	defaultCut = 4 << 20
)

var cutMax = sync.OnceValue(func() int {
	return cutFor(lastLevelCache())
})

// cutFor is the largest copy cut in pieces on a machine whose last-level cache holds size bytes (0: unknown) and is
// shared by sharers CPUs.
func cutFor(size, sharers int) int {
	if size <= 0 {
		return defaultCut
	}
	return min(max(size/(4*max(sharers, 1)), minCut), maxCut)
}
