package ranks

import (
	"runtime"
	"sync/atomic"
)

// A large copy between two ranks of a node is shared between the rank that makes it and the rank whose buffer
// it fills or empties, when that one is waiting for it, spinning on its own core: the completer publishes the
// copy on the waiter's rank (coop), takes chunks of it from a shared counter, and the waiter's spin takes chunks
// too (Request.await's help). A strided copy is bound by its cache misses, a contiguous one by a core's memory
// bandwidth; two cores move it in about half the time. Nothing changes when the waiter is not spinning (it
// computes, or parks where ranks outnumber cores): the completer copies every chunk itself, at one atomic add
// per chunk.

// coopMin is the least payload a copy is shared from: below it, publishing and the chunk counter cost more
// than a second core saves.
const coopMin = 64 << 10

// coopChunk is the bytes one take of a shared copy moves (a multiple of every element size).
const coopChunk = 32 << 10

// coop is a rank's shared-copy slot: at most one copy into or out of the rank's buffers is shared at a time; a
// second completer meanwhile copies alone.
type coop struct {
	job  atomic.Pointer[coopJob] // the copy on offer, or nil
	in   atomic.Int32            // helpers between reading job and leaving work
	busy atomic.Bool             // a completer owns j
	j    coopJob
	help func() // rk.coop.take, made once: a wait's help allocates nothing
}

type coopJob struct {
	dst, src Mem
	n        int          // bytes
	next     atomic.Int64 // the next chunk to take
}

func newCoop() *coop {
	c := &coop{}
	c.help = c.take
	return c
}

// take is the waiter's help: it copies chunks of the copy on offer, if any. Announcing itself (in) before it
// reads job, and the completer withdrawing job before it reads in, means that a completer that found in at 0
// has no helper in its copy, and will have none (both sequentially consistent atomics).
func (c *coop) take() {
	c.in.Add(1)
	if j := c.job.Load(); j != nil {
		j.work()
	}
	c.in.Add(-1)
}

// helper is what a wait of rk's spins with (queues.Completion.WaitHelp): help with a shared copy into or out of
// rk's buffers. A wait on the network has none: the copies of a remote message are the device's.
func (rk *Rank) helper(remote bool) func() {
	if rk == nil || remote {
		return nil
	}
	return rk.coop.help
}

// work copies chunks until none is left to take.
func (j *coopJob) work() {
	sz := j.dst.Type.Size()
	for {
		off := int(j.next.Add(1)-1) * coopChunk
		if off >= j.n {
			return
		}
		k := min(coopChunk, j.n-off)
		CopyMem(j.dst.Window(off/sz, k/sz), j.src.Window(off/sz, k/sz), k)
	}
}

// copyShared copies the first n bytes of src into dst (CopyMem), sharing the copy with waiter's rank when it is
// large and the slot is free. It returns once every byte is copied and no helper touches the buffers.
func copyShared(dst, src Mem, n int, waiter *Rank) {
	if n < coopMin || waiter == nil || waiter.coop == nil || !waiter.coop.busy.CompareAndSwap(false, true) {
		CopyMem(dst, src, n)
		return
	}
	c := waiter.coop
	j := &c.j
	j.dst, j.src, j.n = dst, src, n
	j.next.Store(0)
	c.job.Store(j)
	j.work()
	c.job.Store(nil)
	for c.in.Load() != 0 { // a helper finishes the chunk it took
		runtime.Gosched()
	}
	j.dst, j.src = Mem{}, Mem{} // hold on to no buffer
	c.busy.Store(false)
}
