package ranks

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// Status describes a received (or probed) message.
type Status struct {
	Source   int // rank of the sender in the communicator
	Tag      int
	count    int
	bytes    int
	typ      Type
	canceled bool
}

// Count is the number of elements received (1 for an object, 0 for a message of no elements).
func (s Status) Count() int { return s.count }

// Bytes is the size of the message payload in bytes.
func (s Status) Bytes() int { return s.bytes }

// Type is the element type the message carries (TypeNone for a nil message).
func (s Status) Type() Type { return s.typ }

// Canceled reports whether the request was cancelled (Request.Cancel) before anything moved: nothing was received
// into the buffer, or nothing of the send reached its receiver. Source and Tag are then the receive's own
// arguments (wildcards included), and Count is 0.
func (s Status) Canceled() bool { return s.canceled }

type reqKind uint8

const (
	kindSend reqKind = iota + 1
	kindRecv
	kindOp // an Operation (nonblocking or persistent collective) completes through the request
	// kindColl: a collective whose request another party completes (CompleteColl): a small nonblocking collective
	// of one node that its last member to arrive runs for all (package nbc)
	kindColl
)

// Operation is a multi-step operation (a nonblocking collective) that completes through a Request, so that the
// completion calls (Wait, Test, Waitall, Waitany, Waitsome, Testany, Testsome, Testall) treat it like any
// point-to-point request.
type Operation interface {
	// Progress advances the operation as far as it can without blocking and reports whether it has finished, and
	// with what error.
	Progress() (done bool, err error)
	// Blocker returns a completion the operation is waiting on now (a child request's, see CompletionOf), for the
	// waiter to park on, or nil if it has none (the waiter then yields and polls again).
	Blocker() *queues.Completion
}

// The life cycle of a request, one rule for every kind (the low bits of request.life). A request is active from its
// start (a nonblocking call, or Start) until a completion call has reported it complete; it is then inactive, and
// completion calls skip it. A persistent request is created inactive and goes round again at each Start.
const (
	lifeActive   uint32 = iota // started, not yet reported (the zero value: nonblocking calls store nothing)
	lifeInactive               // reported complete, or persistent and not started
	lifeBusy                   // being reported, or being started: others treat it as inactive meanwhile
	lifeFreeing                // freed while active: released once its operation completes (see settle)
	lifeFreed                  // released: any use is ErrRequest
)

// request is the state of a nonblocking operation (a send, a receive, or an Operation; persistent or not), which a
// Request stands for, or of a blocking call (internal).
//
// It is laid out by who touches it. The first cache line is all that a matching sender reads and writes; the
// rest belongs to the owner's side: the queue links, the outcome it reports, the life cycle. What only some
// requests need (an operation, a persistent request's recipe, later hooks) lives behind ext, allocated with the
// request that needs it, so that the common request stays in the allocator's 256-byte size class, whose objects
// are 64-byte aligned (TestRequestLayout).
type request struct {
	// The first cache line is all that a matching sender reads and writes (request is 256 bytes, so the allocator
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
	// canceled: Cancel withdrew the request from matching (written under the queue's lock, before done).
	canceled bool
	// vview: the buffer is a window of a View, vptr points to its description (see mem)
	vview bool
	vptr  unsafe.Pointer
	vn    int
	// bytes is the received payload size.
	bytes int64
	done  queues.Completion

	item queues.Item // posted-receive queue node (see itemRequest)
	err  error
	w    *World
	// rk is the rank whose queues hold what this request still waits to match, for Cancel to lock: a receive's
	// own rank, set when it is posted; a local send's destination, set when it leaves its message there to wait
	// for the receive (rendezvous, synchronous). Nil when nothing was ever queued.
	rk     *Rank
	target any // object receive target (a pointer)
	// held: for a receive, an object message's bytes, handed over at match, decoded by the reporter. For a send,
	// the message it left in rk's unexpected queue: set under rk's lock, cleared under it by the receive that takes
	// the message (see msg.taken); while set, Cancel may still withdraw the send.
	held *msg
	// scratch: a View's packed bytes, for a device that cannot move the view's blocks itself: a receive's payload
	// (what fits of it) arrives there and is unpacked into the view; a send's is packed there
	scratch []byte
	ext     *reqExt // cold state: nil for a one-shot point-to-point request

	life     atomic.Uint32 // lifeActive ... lifeFreed, under the state's generation (see Request, lifeOf)
	kind     reqKind
	finished bool // the reporter has run finish
	internal bool // pooled; owned by a blocking call
	remote   bool // may complete through the network device: its waiter drives the device (see World.waitPolicy)
	// owner is the rank that made the request: its completion calls move the rank's operations on (ops.go).
	owner *Rank
	voff  int // a View buffer's window starts at this element of its selection (read only for views)
	// box: scratch's pool holder (see bounce), given back when the device completes; 256 bytes in all
	// (TestRequestLayout)
	box *[]byte
}

// reqExt is the cold part of a request that is more than a one-shot point-to-point transfer. Nonblocking
// collectives' on-complete hooks and waiters belong here too.
type reqExt struct {
	op     Operation   // kindOp: the operation the request completes with
	opDone atomic.Bool // CompleteOp has completed the request (for this run)
	listed atomic.Bool // on its rank's list of active operations (rankOps.reqs; written under its lock)
	// persist runs one instance of a persistent request at each Start; nil for a one-shot request.
	persist starter
}

// starter is what a persistent request holds to run its operation again: a point-to-point send or receive
// recipe (persistent.go), or a persistent collective (NewPersistentRequest).
type starter interface {
	// start begins one run on r, which Start has reset; an error means nothing was started.
	start(r *request) error
	// release lets go of what the recipe holds, once, when the request is released.
	release()
}

// mem returns the receive buffer.
func (r *request) mem() Mem {
	if r.vview {
		return Mem{Type: r.vtyp, N: r.vn, view: (*viewData)(r.vptr), off: r.voff}
	}
	return Mem{Type: r.vtyp, Ptr: r.vptr, N: r.vn}
}

// setMem sets the receive buffer.
func (r *request) setMem(v Mem) {
	r.vtyp, r.vptr, r.vn, r.vview = v.Type, v.Ptr, v.N, v.view != nil
	if v.view != nil {
		r.vptr, r.voff = unsafe.Pointer(v.view), v.off
	}
}

// setStatus records what was received: a sender's rank and tag, the payload size and its type.
func (r *request) setStatus(src, tag int32, bytes int64, typ Type) {
	r.src.Store(uint64(uint32(src)))
	r.tag.Store(tag)
	r.bytes, r.styp = bytes, typ
}

// status returns the outcome set by setStatus. The element count follows from bytes and type.
func (r *request) status() Status {
	st := Status{Source: int(int32(uint32(r.src.Load()))), Tag: int(r.tag.Load()), bytes: int(r.bytes), typ: r.styp,
		canceled: r.canceled}
	switch {
	case r.styp == TypeObject:
		if r.bytes > 0 { // 0: an object truncated into nil, of which nothing was delivered
			st.count = 1
		}
	case r.styp.Valid():
		n, _ := r.styp.elems(uint64(r.bytes))
		st.count = int(n)
	}
	return st
}

// itemRequest returns the request whose item it is.
func itemRequest(it *queues.Item) *request {
	return (*request)(unsafe.Add(unsafe.Pointer(it), -int(unsafe.Offsetof(request{}.item))))
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
	reqs [reqChunkLen]request
	used atomic.Int32
}

const chunkPad = 64 - 8

// chunksAligned is cleared if a chunk's requests ever turn out not to start on a line.
var chunksAligned atomic.Bool

func init() { chunksAligned.Store(true) }

// newReq returns a new request of rank rk for a nonblocking call. Requests are carved from per-rank chunks: one
// allocation per reqChunkLen calls instead of one per call, and, like the pooled ones, they never move between
// ranks. A chunk lives as long as any of its requests is referenced.
func (rk *Rank) newReq(kind reqKind) *request {
	for chunksAligned.Load() {
		ch := rk.chunk.Load()
		if ch != nil {
			if i := ch.used.Add(1) - 1; i < reqChunkLen {
				r := &ch.reqs[i]
				r.w, r.kind, r.owner = rk.w, kind, rk
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
	return &request{w: rk.w, kind: kind, owner: rk} // 256 bytes, no header: aligned (TestRequestLayout)
}

// maxFree bounds a rank's list of recycled requests beyond the spare: as many as its goroutines block in
// concurrent calls, typically none, or as its nonblocking calls had outstanding at once (OSU's window: 64); more
// are left to the garbage collector.
const maxFree = 64

// getReq returns a request for a blocking call of rank rk: its spare one if free, else one from its free list.
// Requests never move between ranks: a sender may still hold a stale pointer to a rank's slotted request (see
// Rank.slot), and must never find it slotted at another rank. Internal requests stay lifeActive: no completion
// call ever sees them.
func (rk *Rank) getReq(kind reqKind) *request {
	r := rk.pooled()
	if r == nil {
		r = &request{w: rk.w, owner: rk}
	}
	r.kind, r.internal = kind, true
	return r
}

// pooled returns one of rk's recycled requests, its first line reset, or nil if it has none.
func (rk *Rank) pooled() *request {
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
			return nil
		}
	}
	// The first line is reset here rather than in putReq: the waiter recycles a request right after the match, and
	// writing the line then would pull it back from the sender before the waiter's next send. claim is kept.
	r.done.Reset()
	r.src.Store(0)
	r.tag.Store(0)
	r.vtyp, r.vptr, r.vn, r.vview, r.styp, r.bytes, r.canceled = 0, nil, 0, false, 0, 0, false
	return r
}

// nbReq returns a state for a one-shot nonblocking send or receive of rank rk: a recycled one, under its next
// generation (see Request), or a new one from the rank's block. A blocking call's request and a reported
// nonblocking one's state go round the same pool: neither is seen once its flag is set and its waiter has looked,
// but through a stale pointer that checks (a slot's claim word, a handle's generation). Internal use leaves the
// life word alone, so a handle whose state served a blocking call since still reads as reported.
func (rk *Rank) nbReq(kind reqKind) *request {
	r := rk.pooled()
	if r == nil {
		return rk.newReq(kind)
	}
	r.life.Store(lifeOf(r.life.Load()>>genShift+1, lifeActive))
	r.kind, r.internal = kind, false
	return r
}

// putReq recycles a request of a blocking call that nobody else can still see.
func (rk *Rank) putReq(r *request) {
	r.item = queues.Item{}
	r.kind, r.target, r.held, r.scratch, r.rk = 0, nil, nil, nil, nil
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

// devDone is a request seen by a device: its Complete is device.Completer's, called once when the device has
// finished the request's transfer. It is a distinct type so that Request itself, which users hold, has no
// Complete method.
type devDone request

// completer returns r as the device's Completer.
func (r *request) completer() device.Completer { return (*devDone)(r) }

// Complete implements device.Completer.
func (d *devDone) Complete(err error) {
	r := (*request)(d)
	switch {
	case err != nil:
		// Nothing reliable arrived: even a truncation already noted is now a failure of the transfer.
		r.err = fmt.Errorf("%w: %w", ErrAborted, err)
	case r.scratch != nil && r.kind == kindRecv:
		// The payload (what fits of it: r.err is ErrTruncate if that is not all) came into scratch, for a View that
		// the device could not fill in place.
		m := r.mem()
		r.bytes = min(r.bytes, int64(m.Size()))
		m.CopyFrom(r.scratch[:min(len(r.scratch), m.Size())])
	}
	// A send's scratch is its packed View, which the device no longer reads.
	unbounce(r.box)
	r.scratch, r.box = nil, nil
	if r.held != nil && r.kind == kindRecv {
		r.completeObject()
		return
	}
	r.done.Complete()
}

// CompletionOf returns a request's completion flag, for gompj's own packages: a nonblocking collective parks on
// its child requests' flags (Operation.Blocker). It is not a method, so that users' Request has no such call.
func CompletionOf(r *Request) *queues.Completion { return &r.s.done }

// Finished reports whether r's run is over, without moving anything on or reporting it (a test's look, from a
// goroutine that computes): its flag, or a barrier's gate (GateRequest), whose flag only completion calls set.
func Finished(r *Request) bool { return r.s.over() }

// opRequest is an operation's request and its extension in one allocation.
type opRequest struct {
	r   request
	x   reqExt
	pop PersistentOp // a persistent collective's operation (opRequest is then its starter)
	h   Request      // the handle: an operation's state is never reused (see Request), so it has only this one
}

// NewOpRequest returns an active request that completes when op does (a nonblocking collective).
func (w *World) NewOpRequest(op Operation) *Request {
	o := new(opRequest)
	r := &o.r
	r.w, r.kind, r.remote, r.ext = w, kindOp, w.dev != nil, &o.x
	o.x.op = op
	o.h.s = r
	return &o.h
}

// finish runs on the reporting side once the request is done: decodes an object and releases held buffers.
func (r *request) finish() {
	if r.finished {
		return
	}
	r.finished = true
	if m := r.held; m != nil && r.kind == kindRecv {
		r.held = nil
		if r.err == nil {
			r.err = decodeInto(r.target, m.payload())
		}
		m.release()
	}
	r.target = nil
	// The request lives on in its rank's block of requests (newReq) while any other request of the block is held,
	// or the rank still hands them out: up to reqChunkLen-1 calls later. Holding its buffer, it kept a program's
	// freed buffer alive that long (a gigabyte Irecv, until 14 more nonblocking calls). Nobody reads the buffer of a
	// done request that is not persistent: a stale sender that still sees it in its rank's slot fails its claim.
	if r.ext == nil || r.ext.persist == nil {
		r.vptr = nil
	}
}

// completeObject completes an object receive. Its owner may have freed it while it was active, and then no
// completion call will ever report it: the completer decodes it itself (settle). Free makes the same check the other
// way round (the flag first, then the state), so one of them sees the other; settle lets only one act. Only object
// receives need this: other requests have nothing left to do once their flag is set.
func (r *request) completeObject() {
	r.done.Complete()
	if lifeState(r.life.Load()) == lifeFreeing {
		r.settle()
	}
}

// settle releases a request that was freed while active, once it is done: it finishes it (an object receive is
// decoded into its target) and lets its recipe go. Whoever calls it first after both happened wins; it reports
// whether this call did it.
func (r *request) settle() bool {
	v := r.life.Load()
	if !r.done.Done() || lifeState(v) != lifeFreeing || !r.life.CompareAndSwap(v, v&^lifeMask|lifeFreed) {
		return false
	}
	r.finish()
	r.release()
	return true
}

// release drops what a freed request holds.
func (r *request) release() {
	if x := r.ext; x != nil && x.persist != nil {
		x.persist.release()
	}
	r.target = nil
}

// pollOp advances an operation request; it reports whether it is done.
func (r *request) pollOp() bool {
	if r.done.Done() {
		return true
	}
	if done, err := r.ext.op.Progress(); done {
		r.completeOp(err)
	}
	return r.done.Done()
}

func errFreed() error { return fmt.Errorf("%w: the request was freed", ErrRequest) }

func errZeroRequest() error {
	return fmt.Errorf("%w: a Request that no call made (the zero value)", ErrRequest)
}

func errNilRequest() error { return fmt.Errorf("%w: nil request", ErrRequest) }

// Wait blocks until the request completes and returns its status. On a request that is not active (already
// reported complete, or persistent and not started) it returns at once, with an empty Status and a nil error.
func (r *Request) Wait() (Status, error) {
	if r == nil {
		return Status{}, errNilRequest()
	}
	if s := r.s; s != nil && s.collRun() {
		if st, ok, err := r.waitColl(); ok {
			return st, err
		}
	}
	defer leave(r.enter())
	if ok, err := r.pending(); !ok {
		return Status{}, err
	}
	if s := r.s; !s.done.Done() { // done already (a nonblocking collective's child): nothing to wait for or move on
		// A persistent barrier's run (StartGate) spins on its gate first, as waitColl does for a one-shot one: the
		// general way watches the gate (a lock, and the member's look) before it spins, which made a Start and Wait
		// of a persistent barrier on 2 ranks cost 3x an Ibarrier and Wait.
		if g, at := s.gateOf(); g != nil && s.w.waitPolicy(s.remote).SpinFor(func() bool { return g.Reached(at) }) {
			s.pollGate(g, at)
		} else if err := r.await(nil); err != nil {
			return Status{}, err
		}
	}
	return r.reportOnce()
}

// waitColl is Wait's way for a small collective's run (CollRequest) that is done already (its member's part was
// over at its start, or the run ended while the member computed): it reports the run with the one CAS, without
// counting itself into the rank (enter); ok false sends Wait the general way. That count is what keeps a reported
// state from being taken again (collReqs) while a completion call still reads it (see reuse). This one reads the
// outcome before its CAS, and nothing after: the state is taken again only after a report, and a report by another
// call (several goroutines completing the same request) fails this one's CAS, which then leaves what it read
// unused. A loop of a done run's start and Wait (BenchmarkCollRequestDone): 51 -> 34 ns.
func (r *Request) waitColl() (Status, bool, error) {
	s := r.s
	active := lifeOf(r.gen, lifeActive)
	if r.gone() || s.life.Load() != active {
		return Status{}, false, nil
	}
	if !s.done.Done() {
		// A barrier's run (GateRequest) is done once its gate is: spin on that, as the blocking barrier spins on
		// the count, and report the run without its flag, which nothing reads once it is reported, and which the
		// state's next run resets (collReqs). Past the spin, the general way parks.
		g, at := s.gateOf()
		if g == nil || !s.w.waitPolicy(s.remote).SpinFor(func() bool { return g.Reached(at) }) {
			return Status{}, false, nil
		}
	}
	err := s.err
	if !s.life.CompareAndSwap(active, lifeOf(nextGen(r.gen), lifeActive)) {
		return Status{}, false, nil
	}
	// A collective's run received nothing: its status is empty. Building one from the state's fields cost a
	// store-forwarding stall at each copy of the result (the fields stored one by one, the struct read 16 bytes at
	// a time).
	return Status{}, true, err
}

// Test reports whether the request has completed, without blocking; when it has, it returns the status. A request
// that is not active counts as complete, with an empty Status.
func (r *Request) Test() (Status, bool, error) {
	if r == nil {
		return Status{}, false, errNilRequest()
	}
	defer leave(r.enter())
	if ok, err := r.pending(); !ok {
		return Status{}, err == nil, err
	}
	pollFor(r)
	s := r.s
	s.sweep()
	if !s.poll() {
		if s.w.aborted.Load() {
			return Status{}, false, s.w.abortError()
		}
		s.owner.missed()
		return Status{}, false, nil
	}
	if st, ok, err := r.report(); ok {
		return st, true, err
	}
	_, err := r.pending() // another goroutine reported it: inactive (complete) for this call, unless freed since
	return Status{}, err == nil, err
}

// pending classifies r for a completion call: active (true), or not, with ErrRequest if it was freed.
func (r *Request) pending() (bool, error) {
	if r.gone() {
		return false, errFreed()
	}
	if r.s == nil {
		return false, errZeroRequest()
	}
	v := r.s.life.Load()
	if v>>genShift != r.gen {
		return false, nil // reported, and its state reused since
	}
	switch lifeState(v) {
	case lifeActive:
		return true, nil
	case lifeFreeing, lifeFreed:
		return false, errFreed()
	}
	return false, nil
}

// reportOnce reports a done request to this completion call; if another got there first (several goroutines
// completing the same request) it is inactive for this one.
func (r *Request) reportOnce() (Status, error) {
	if st, ok, err := r.report(); ok {
		return st, err
	}
	_, err := r.pending()
	return Status{}, err
}
