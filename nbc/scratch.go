package nbc

import (
	"math/bits"
	"sync"
)

// Scratch buffers. A schedule of a large call needs buffers of its own (the half an allreduce receives before it
// combines it, a leader's node block), as big as the call's data. Made afresh for each call, they were most of
// what a program calling Iallreduce on 1 MiB in a loop allocated, and the collector that frees them took a core
// from the collective's progress: gompj bench iallreduce -np 2 -nodes 2 -sizes 1M (GOMPJ_HOST_SHM=0) ran 25
// collections per node process where the blocking form ran 2, and its pure time fell by a quarter with GOGC=off.
// So a schedule takes them from pools by power-of-two size class, and an op that is neither kept for reuse
// (cache.go, whose buffers go with it) nor persistent (whose buffers live as long as its request) gives them back
// when it has finished without error. Then no child request, and no peer, touches them any more: the op finishes
// only when its sends and receives have completed, and a member's shared-memory step only when the peers have
// taken what it published, as for the caller's own buffers. After an error a child may still be under way, so
// the buffers are left to the collector.
//
// Small buffers are made as before: their calls' ops are kept (cache.go), and a pool would cost more than they do.
const (
	scratchMinShift = 15 // 32 KiB: the smallest buffer taken from a pool
	scratchClasses  = 48 - scratchMinShift
)

var scratchPools [scratchClasses]sync.Pool // of *[]byte whose capacity is the class's size

// scratchClass is the class of a buffer of n bytes, or -1 when n is made, not pooled.
func scratchClass(n int) int {
	if n < 1<<scratchMinShift {
		return -1
	}
	c := bits.Len(uint(n-1)) - scratchMinShift
	if c >= scratchClasses {
		return -1
	}
	return c
}

// scratch returns a buffer of n bytes for the schedule, with any contents: every use writes it before it reads it.
// A pooled one is recorded in s.held, for giveBack.
func (s *Schedule) scratch(n int) []byte {
	c := scratchClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	var p *[]byte
	if v := scratchPools[c].Get(); v != nil {
		p = v.(*[]byte)
	} else {
		b := make([]byte, 1<<(c+scratchMinShift))
		p = &b
	}
	s.held = append(s.held, p)
	return (*p)[:n]
}

// giveBack returns the schedule's pooled buffers; the schedule must not run again.
func (s *Schedule) giveBack() {
	for i, p := range s.held {
		scratchPools[scratchClass(cap(*p))].Put(p)
		s.held[i] = nil
	}
	s.held = s.held[:0]
}
