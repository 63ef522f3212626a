package nbc

import "github.com/gompj/gompj/ranks"

// Scratch buffers. A schedule of a large call needs buffers of its own (the half an allreduce receives before it
// combines it, a leader's node block), as big as the call's data. Made afresh for each call, they were most of
// what a program calling Iallreduce on 1 MiB in a loop allocated, and the collector that frees them took a core
// from the collective's progress: gompj bench iallreduce -np 2 -nodes 2 -sizes 1M (GOMPJ_HOST_SHM=0) ran 51
// collections in its two node processes where the blocking form ran 2, and its pure time halved with pooled
// buffers. So a schedule takes them from the rank layer's size-class pools (ranks.Scratch, which also carry
// unexpected messages and packed views), and an op that is neither kept for reuse (cache.go, whose buffers go
// with it) nor persistent (whose buffers live as long as its request) gives them back when it has finished without
// error. Then no child request, and no peer, touches them any more: the op finishes only when its sends and
// receives have completed, and a member's shared-memory step only when the peers have taken what it published, as
// for the caller's own buffers. After an error a child may still be under way, so the buffers are left to the
// collector. The shared-memory builders (shm.go) make theirs: they publish them to peers.

// scratch returns a buffer of n bytes for the schedule, with any contents: every use writes it before it reads it.
// A pooled one is recorded in s.held, for giveBack.
func (s *Schedule) scratch(n int) []byte {
	b, box := ranks.Scratch(n)
	if box != nil {
		s.held = append(s.held, box)
	}
	return b
}

// giveBack returns the schedule's pooled buffers; the schedule must not run again.
func (s *Schedule) giveBack() {
	for i, box := range s.held {
		ranks.PutScratch(box)
		s.held[i] = nil
	}
	s.held = s.held[:0]
}
