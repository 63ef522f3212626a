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

// coopMin is the least work a copy is shared from, in bytes of contiguous copy (copyWork): below it,
// publishing and the chunk counter cost more than a second core saves.
const coopMin = 64 << 10

// coopChunk is the bytes one take of a shared contiguous copy moves (a multiple of every element size); a
// strided copy's takes are counted in blocks (stridedChunk).
const coopChunk = 32 << 10

// stridedChunk is the blocks one take of a strided copy moves. Measured (BenchmarkCopyShared, blocks 8 KiB
// apart), takes of 512 blocks shared copies of 4096 blocks of 8, 64 and 512 bytes in 0.5-0.6 of the time alone;
// takes of 238 blocks of 64 bytes, or of 64 of 512, took as long as alone or longer; a column in one take of
// its 4096 elements (32 KiB) was not shared at all.
const stridedChunk = 512

// blockWork is what a copy pays per block of a view, in bytes of contiguous copy: each block of a strided view
// far apart from the next is a cache miss and, 8 KiB apart, a TLB miss. A one-element column of 4096 float64s
// 8 KiB apart took about 100 us to copy here (24 ns an element, as long as some 750 bytes of contiguous copy
// take); 512 errs low. So a copy between two strided views is shared from about 64 blocks on.
const blockWork = 512

// copyWork estimates the work of copying n bytes from src to dst, in bytes of contiguous copy: the bytes, and
// blockWork for each block a view of either side cuts them into.
func copyWork(dst, src Mem, n int) int {
	return n + blockWork*(dst.blocksIn(n)+src.blocksIn(n))
}

// blocksIn is about how many blocks n bytes of m span: none for contiguous memory, else n bytes' share of the
// view's blocks (at least one).
func (m Mem) blocksIn(n int) int {
	v := m.view
	if v == nil || v.total == 0 {
		return 0
	}
	return max(1, int(int64(n)*int64(v.nb)/int64(v.total*v.sz)))
}

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
	chunk    int          // bytes per take (coopChunk, or stridedChunk blocks' worth), a multiple of every element size
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
		off := int(j.next.Add(1)-1) * j.chunk
		if off >= j.n {
			return
		}
		k := min(j.chunk, j.n-off)
		CopyMem(j.dst.Window(off/sz, k/sz), j.src.Window(off/sz, k/sz), k)
	}
}

// copyShared copies the first n bytes of src into dst (CopyMem), sharing the copy with waiter's rank when it is
// much work (large, or strided in many blocks) and the slot is free. It returns once every byte is copied and no
// helper touches the buffers.
func copyShared(dst, src Mem, n int, waiter *Rank) {
	if waiter == nil || waiter.coop == nil {
		CopyMem(dst, src, n)
		return
	}
	work := copyWork(dst, src, n)
	if work < coopMin || !waiter.coop.busy.CompareAndSwap(false, true) {
		CopyMem(dst, src, n)
		return
	}
	c := waiter.coop
	j := &c.j
	j.dst, j.src, j.n = dst, src, n
	// A take of a contiguous copy moves coopChunk bytes; one of a strided copy stridedChunk blocks, but no more
	// than an eighth of the copy, in whole 16-byte units so that every element size divides it.
	j.chunk = coopChunk
	if nb := max(dst.blocksIn(n), src.blocksIn(n)); nb > 0 {
		j.chunk = max(16, min(int(int64(stridedChunk)*int64(n)/int64(nb)), n/8)&^15)
	}
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
