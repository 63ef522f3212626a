package rdma

import (
	"cmp"
	"slices"
	"sync"
	"unsafe"
)

// Memory lent by an endpoint of this process (Lender): a part of a shared mapping that stays where it is until
// Free. It is not Go heap memory, so the registration cache, which registers only memory whose life the garbage
// collector decides (regcache.go), would refuse it; the lender notes it here instead, and every device of the
// process registers it as it is: memory the shared-memory device lent goes over libfabric without a copy too.
// Mappings belong to the process, so this registry is the process's, not a device's. It is also the lender's
// own record of what it lent: each span carries its owner and the owner's name for its first byte.
var lentMem struct {
	mu    sync.RWMutex
	spans []lentSpan // sorted by start, disjoint
}

type lentSpan struct {
	lo, hi uintptr
	owner  any   // the Lender
	base   int64 // the owner's name for byte lo (shm: its offset in the node's segment)
}

// NoteLent records b as lent memory of owner, which names its first byte base, until ForgetLent.
func NoteLent(b []byte, owner any, base int64) {
	if len(b) == 0 {
		return
	}
	lo := addrOf(b)
	s := lentSpan{lo: lo, hi: lo + uintptr(len(b)), owner: owner, base: base}
	lentMem.mu.Lock()
	i, _ := findSpan(lo)
	lentMem.spans = slices.Insert(lentMem.spans, i, s)
	lentMem.mu.Unlock()
}

// ForgetLent ends the record of owner's lent memory that starts where b does, and returns all of it and its
// base; ok is false if there is none.
func ForgetLent(b []byte, owner any) (all []byte, base int64, ok bool) {
	if cap(b) == 0 {
		return nil, 0, false
	}
	lentMem.mu.Lock()
	defer lentMem.mu.Unlock()
	i, found := findSpan(addrOf(b[:cap(b)]))
	if !found || lentMem.spans[i].owner != owner {
		return nil, 0, false
	}
	s := lentMem.spans[i]
	lentMem.spans = slices.Delete(lentMem.spans, i, i+1)
	return unsafe.Slice(unsafe.SliceData(b[:cap(b)]), s.hi-s.lo), s.base, true
}

// LentBy returns owner's name for b's first byte (its span's base plus b's distance from the span's start), if
// all of b lies in one piece of memory owner lent.
func LentBy(b []byte, owner any) (int64, bool) {
	s, ok := spanHolding(b)
	if !ok || s.owner != owner {
		return 0, false
	}
	return s.base + int64(addrOf(b)-s.lo), true
}

// isLent reports whether all of b lies in one piece of lent memory.
func isLent(b []byte) bool {
	_, ok := spanHolding(b)
	return ok
}

// spanHolding returns the span that holds all of b.
func spanHolding(b []byte) (lentSpan, bool) {
	if len(b) == 0 {
		return lentSpan{}, false
	}
	lo := addrOf(b)
	lentMem.mu.RLock()
	defer lentMem.mu.RUnlock()
	i, ok := findSpan(lo)
	if !ok {
		i-- // the last span starting before b
	}
	if i < 0 || lo+uintptr(len(b)) > lentMem.spans[i].hi {
		return lentSpan{}, false
	}
	return lentMem.spans[i], true
}

// findSpan is where a span starting at lo is, or would go, in lentMem.spans (held).
func findSpan(lo uintptr) (int, bool) {
	return slices.BinarySearchFunc(lentMem.spans, lo, func(x lentSpan, p uintptr) int { return cmp.Compare(x.lo, p) })
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
