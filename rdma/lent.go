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
// Mappings belong to the process, so this registry is the process's, not a device's.
var lentMem struct {
	mu    sync.RWMutex
	spans []lentSpan // sorted by start, disjoint
}

type lentSpan struct{ lo, hi uintptr }

// NoteLent records b as lent memory, until ForgetLent.
func NoteLent(b []byte) {
	if len(b) == 0 {
		return
	}
	s := spanOf(b)
	lentMem.mu.Lock()
	i, _ := slices.BinarySearchFunc(lentMem.spans, s.lo, func(x lentSpan, p uintptr) int { return cmp.Compare(x.lo, p) })
	lentMem.spans = slices.Insert(lentMem.spans, i, s)
	lentMem.mu.Unlock()
}

// ForgetLent ends what NoteLent(b) recorded, b starting where it did.
func ForgetLent(b []byte) {
	if len(b) == 0 {
		return
	}
	lo := spanOf(b).lo
	lentMem.mu.Lock()
	if i, ok := slices.BinarySearchFunc(lentMem.spans, lo, func(x lentSpan, p uintptr) int { return cmp.Compare(x.lo, p) }); ok {
		lentMem.spans = slices.Delete(lentMem.spans, i, i+1)
	}
	lentMem.mu.Unlock()
}

// isLent reports whether all of b lies in one piece of lent memory.
func isLent(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	s := spanOf(b)
	lentMem.mu.RLock()
	defer lentMem.mu.RUnlock()
	if len(lentMem.spans) == 0 {
		return false
	}
	i, ok := slices.BinarySearchFunc(lentMem.spans, s.lo, func(x lentSpan, p uintptr) int { return cmp.Compare(x.lo, p) })
	if !ok {
		i-- // the last span starting before b
	}
	return i >= 0 && s.hi <= lentMem.spans[i].hi
}

func spanOf(b []byte) lentSpan {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lentSpan{lo, lo + uintptr(len(b))}
}
