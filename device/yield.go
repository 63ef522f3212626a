package device

import "sync/atomic"

// IdleYield is a Poller's count of driving polls in a row that found nothing, shared by the ranks that drive it. A
// rank that waits on the network spins polling its device, and what it waits for is often done by a thread the
// kernel has waiting for that very core: on a host that several node processes share, the other process's progress
// goroutine, running the round this rank waits for. Go's runtime.Gosched hands over to this process's goroutines
// only, so every so many empty polls the rank gives its core away for a moment (SchedYield) and spins on after it.
type IdleYield struct{ n atomic.Uint32 }

// Polled counts one driving poll, which found something (got) or nothing (a poll that found the device held by
// another poller counts as nothing), and reports whether the caller should yield its core now, once it holds no
// lock: at every every-th empty poll in a row.
func (y *IdleYield) Polled(got bool, every uint32) bool {
	if got {
		y.n.Store(0)
		return false
	}
	return y.n.Add(1)%every == 0
}
