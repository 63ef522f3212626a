package ranks

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// Status describes a received (or probed) message.
type Status struct {
	Source int // rank of the sender in the communicator
	Tag    int
	count  int
	bytes  int
	typ    Type
}

// Count is the number of elements received (1 for an object).
func (s Status) Count() int { return s.count }

// Bytes is the size of the message payload in bytes.
func (s Status) Bytes() int { return s.bytes }

// Type is the element type the message carries.
func (s Status) Type() Type { return s.typ }

type reqKind uint8

const (
	kindSend reqKind = iota + 1
	kindRecv
	kindOp // an Operation (nonblocking collective) completes through the request
)

// Operation is a multi-step operation (a nonblocking collective) that completes through a Request, so that Wait,
// Test, Waitall and Waitany treat it like any point-to-point request.
type Operation interface {
	// Progress advances the operation as far as it can without blocking and reports whether it has finished, and
	// with what error.
	Progress() (done bool, err error)
	// Blocker returns a completion the operation is waiting on now (a child request), for the waiter to park on,
	// or nil if it has none (the waiter then yields and polls again).
	Blocker() *queues.Completion
}

// Request is the handle of a nonblocking operation: a send, a receive, or an Operation. A completed request stays
// completed: Wait and Test may be called again and return the same outcome.
type Request struct {
	// The first cache line is all that a matching sender reads and writes (Request is 256 bytes, so the allocator
	// aligns it to 64): the claim word and envelope of a slotted receive, the buffer, the outcome, the flag. A
	// match moves this one line to the sender and back to the waiter.

	// claim is the slot generation: odd while the request is its rank's slotted receive and unclaimed. A sender
	// claims it with a CAS from the odd value it read, so a receive that was claimed, recycled and slotted again
	// can never be claimed through a stale read. It only ever grows.
	claim atomic.Uint64
	// src and tag are the slotted receive's envelope (src packed with the context) until it is claimed; then the
	// claimer writes the status's source and tag over them. Atomic, since senders that lose the claim read them.
	src  atomic.Uint64 // ctx<<32 | source
	tag  atomic.Int32
	vtyp Type // the buffer: vtyp, vptr, vn, vview (see mem)
	styp Type // the status: src, tag, styp, bytes (see status)
	// vview: the buffer is a View, and vptr points to it
	vview bool
	_     [1]byte
	vptr  unsafe.Pointer
	vn    int
	// bytes is the received payload size.
	bytes int64
	done  queues.Completion

	item queues.Item // posted-receive queue node (see itemRequest)
	err  error
	w    *World
	kind reqKind

	target any  // object receive target (a pointer)
	held   *msg // an object message's bytes, handed over at match, decoded by the waiter
	// rendezvous truncation: the payload arrives into scratch, then what fits is copied to the buffer
	scratch []byte

	op Operation

	finished bool    // the waiter has run finish
	internal bool    // pooled; owned by a blocking call
	remote   bool    // may complete through the network device: its waiter drives the device (see World.waitPolicy)
	voff     int     // a View buffer's window starts at this element of its selection (read only for views)
	_        [8]byte // to 256 bytes, a size class whose objects are 64-byte aligned (TestRequestLayout)
}

// mem returns the receive buffer.
func (r *Request) mem() Mem {
	if r.vview {
		return Mem{Type: r.vtyp, N: r.vn, view: (*viewData)(r.vptr), off: r.voff}
	}
	return Mem{Type: r.vtyp, Ptr: r.vptr, N: r.vn}
}

// setMem sets the receive buffer.
func (r *Request) setMem(v Mem) {
	r.vtyp, r.vptr, r.vn, r.vview = v.Type, v.Ptr, v.N, v.view != nil
	if v.view != nil {
		r.vptr, r.voff = unsafe.Pointer(v.view), v.off
	}
}

// setStatus records what was received: a sender's rank and tag, the payload size and its type.
func (r *Request) setStatus(src, tag int32, bytes int64, typ Type) {
	r.src.Store(uint64(uint32(src)))
	r.tag.Store(tag)
	r.bytes, r.styp = bytes, typ
}

// status returns the outcome set by setStatus. The element count follows from bytes and type.
func (r *Request) status() Status {
	st := Status{Source: int(int32(uint32(r.src.Load()))), Tag: int(r.tag.Load()), bytes: int(r.bytes), typ: r.styp}
	switch {
	case r.styp == TypeObject:
		st.count = 1
	case r.styp.Size() > 0:
		st.count = int(r.bytes) / r.styp.Size()
	}
	return st
}

// itemRequest returns the request whose item it is.
func itemRequest(it *queues.Item) *Request {
	return (*Request)(unsafe.Add(unsafe.Pointer(it), -int(unsafe.Offsetof(Request{}.item))))
}

// reqChunkLen is how many requests a rank allocates at once for its nonblocking calls.
const reqChunkLen = 15

// reqChunk is a block of requests that a rank hands out one at a time (see newReq). It lands in the allocator's
// 4096-byte size class, whose objects start on a page. But an object that holds pointers and is over 512 bytes
// starts with the allocator's 8-byte type header, so pad makes up the rest of a line and the requests start on
// one: each request's first 64 bytes must be one cache line. newReq checks it (a runtime that lays objects out
// differently gets requests allocated one by one instead).
type reqChunk struct {
	_    [chunkPad]byte
	reqs [reqChunkLen]Request
	used atomic.Int32
}

const chunkPad = 64 - 8

// chunksAligned is cleared if a chunk's requests ever turn out not to start on a line.
var chunksAligned atomic.Bool

func init() { chunksAligned.Store(true) }

// newReq returns a new request of rank rk for a nonblocking call. Requests are carved from per-rank chunks: one
// allocation per reqChunkLen calls instead of one per call, and, like the pooled ones, they never move between
// ranks. A chunk lives as long as any of its requests is referenced.
func (rk *Rank) newReq(kind reqKind) *Request {
	for chunksAligned.Load() {
		ch := rk.chunk.Load()
		if ch != nil {
			if i := ch.used.Add(1) - 1; i < reqChunkLen {
				r := &ch.reqs[i]
				r.w, r.kind = rk.w, kind
				return r
			}
		}
		nc := new(reqChunk)
		if uintptr(unsafe.Pointer(&nc.reqs[0]))%64 != 0 {
			chunksAligned.Store(false)
			break
		}
		rk.chunk.CompareAndSwap(ch, nc)
	}
	return &Request{w: rk.w, kind: kind} // 256 bytes, no header: aligned (TestRequestLayout)
}

// maxFree bounds a rank's list of recycled requests beyond the spare: as many as its goroutines block in
// concurrent calls, typically none; more are left to the garbage collector.
const maxFree = 16

// getReq returns a request for a blocking call of rank rk: its spare one if free, else one from its free list.
// Requests never move between ranks: a sender may still hold a stale pointer to a rank's slotted request (see
// Rank.slot), and must never find it slotted at another rank.
func (rk *Rank) getReq(kind reqKind) *Request {
	r := rk.spare.Swap(nil)
	if r == nil {
		rk.freeMu.Lock()
		if n := len(rk.free); n > 0 {
			r = rk.free[n-1]
			rk.free[n-1] = nil
			rk.free = rk.free[:n-1]
		}
		rk.freeMu.Unlock()
		if r == nil {
			r = &Request{w: rk.w}
		}
	}
	// The first line is reset here rather than in putReq: the waiter recycles a request right after the match, and
	// writing the line then would pull it back from the sender before the waiter's next send. claim is kept.
	r.done.Reset()
	r.src.Store(0)
	r.tag.Store(0)
	r.vtyp, r.vptr, r.vn, r.vview, r.styp, r.bytes = 0, nil, 0, false, 0, 0
	r.kind, r.internal = kind, true
	return r
}

// putReq recycles a request of a blocking call that nobody else can still see.
func (rk *Rank) putReq(r *Request) {
	r.item = queues.Item{}
	r.kind, r.target, r.held, r.scratch, r.op = 0, nil, nil, nil, nil
	r.err, r.finished, r.internal, r.remote = nil, false, false, false
	if rk.spare.CompareAndSwap(nil, r) {
		return
	}
	rk.freeMu.Lock()
	if len(rk.free) < maxFree {
		rk.free = append(rk.free, r)
	}
	rk.freeMu.Unlock()
}

// Complete implements device.Completer: a device finished this request's transfer.
func (r *Request) Complete(err error) {
	switch {
	case err != nil:
		// Nothing reliable arrived: even a truncation already noted is now a failure of the transfer.
		r.err = fmt.Errorf("%w: %w", ErrAborted, err)
	case r.scratch != nil:
		// The payload came into scratch: a truncated rendezvous (r.err is ErrTruncate), or one into a View that
		// the device could not fill in place. Deliver what fits.
		m := r.mem()
		r.bytes = min(r.bytes, int64(m.Size()))
		m.CopyFrom(r.scratch[:min(len(r.scratch), m.Size())])
	}
	r.scratch = nil
	r.done.Complete()
}

var _ device.Completer = (*Request)(nil)

// NewOpRequest returns a request that completes when op does.
func (w *World) NewOpRequest(op Operation) *Request {
	return &Request{w: w, kind: kindOp, op: op, remote: w.dev != nil}
}

// Completion returns the request's completion flag (for nonblocking collectives built on child requests).
func (r *Request) Completion() *queues.Completion { return &r.done }

// finish runs on the waiting side once the request is done: decodes an object and releases held buffers.
func (r *Request) finish() {
	if r.finished {
		return
	}
	r.finished = true
	if m := r.held; m != nil {
		r.held = nil
		if r.err == nil {
			r.err = decodeInto(r.target, m.payload())
		}
		m.release()
	}
	r.target = nil
}

// pollOp advances an operation request; it reports whether it is done.
func (r *Request) pollOp() bool {
	if r.done.Done() {
		return true
	}
	done, err := r.op.Progress()
	if done {
		r.err = err
		r.done.Complete()
	}
	return done
}

// Wait blocks until the request completes and returns its status.
func (r *Request) Wait() (Status, error) {
	if r == nil {
		return Status{}, fmt.Errorf("%w: nil request", ErrRequest)
	}
	if err := r.wait(); err != nil {
		return Status{}, err
	}
	r.finish()
	return r.status(), r.err
}

func (r *Request) wait() error {
	w := r.w
	if r.kind == kindOp {
		for !r.pollOp() {
			if w.aborted.Load() {
				return w.abortError()
			}
			if b := r.op.Blocker(); b != nil {
				if !b.Wait(w.waitPolicy(r.remote), w.abortCh) {
					return w.abortError()
				}
			} else {
				runtime.Gosched()
			}
		}
		return nil
	}
	if !r.done.Wait(w.waitPolicy(r.remote), w.abortCh) {
		return w.abortError()
	}
	return nil
}

// Test reports whether the request has completed, without blocking; when it has, it returns the status.
func (r *Request) Test() (Status, bool, error) {
	if r == nil {
		return Status{}, false, fmt.Errorf("%w: nil request", ErrRequest)
	}
	if r.kind == kindOp {
		r.pollOp()
	}
	if !r.done.Done() {
		if r.w.aborted.Load() {
			return Status{}, false, r.w.abortError()
		}
		return Status{}, false, nil
	}
	r.finish()
	return r.status(), true, r.err
}

// Waitall waits for every request (nil ones are skipped) and returns the first error, if any.
func Waitall(reqs ...*Request) error {
	var first error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Testall reports whether every request (nil ones are skipped) has completed.
func Testall(reqs ...*Request) (bool, error) {
	all := true
	for _, r := range reqs {
		if r == nil {
			continue
		}
		_, ok, err := r.Test()
		if err != nil {
			return false, err
		}
		all = all && ok
	}
	return all, nil
}

// Waitany waits until one of the requests completes and returns its index and status. Nil requests are skipped;
// with none left it returns index -1 (MPI_UNDEFINED) at once.
func Waitany(reqs ...*Request) (int, Status, error) {
	var w *World
	for _, r := range reqs {
		if r != nil {
			w = r.w
			break
		}
	}
	if w == nil {
		return -1, Status{}, nil
	}
	cs := make([]*queues.Completion, len(reqs))
	for {
		hasOp := false
		for i, r := range reqs {
			if r == nil {
				cs[i] = nil
				continue
			}
			if r.kind == kindOp {
				hasOp = true
				r.pollOp()
				cs[i] = r.op.Blocker()
				if r.done.Done() {
					cs[i] = &r.done
				}
			} else {
				cs[i] = &r.done
			}
			if r.done.Done() {
				st, err := r.Wait()
				return i, st, err
			}
		}
		if w.aborted.Load() {
			return -1, Status{}, w.abortError()
		}
		if hasOp {
			// Operations need polling: wait for a child completion, but only briefly between polls.
			any := false
			for _, c := range cs {
				if c != nil {
					any = true
					break
				}
			}
			if !any {
				runtime.Gosched()
				continue
			}
		}
		remote := false
		for _, r := range reqs {
			remote = remote || (r != nil && r.remote)
		}
		if queues.WaitAny(cs, w.waitPolicy(remote), w.abortCh) < 0 {
			return -1, Status{}, w.abortError()
		}
	}
}
