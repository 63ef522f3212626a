package ranks

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"
)

// Send modes beyond standard and synchronous: buffered (Bsend, Ibsend, with BufferAttach and BufferDetach),
// ready (Rsend, Irsend), and SendrecvReplace.

// BsendOverhead is what each buffered message takes in the attached buffer beyond its payload (MPI_BSEND_OVERHEAD):
// size the buffer as the sum, over the messages that may be in flight at once, of their bytes plus BsendOverhead.
// It is the charge for each message's bookkeeping, so that messages of no elements use up the buffer too.
const BsendOverhead = 32

// bsendState is a rank's attached buffer. Buffered messages take regions of it, first fit; a region is free again
// once its message's send has completed (at once for an eager send: its bytes were copied on to the receiver).
type bsendState struct {
	mu      sync.Mutex
	buf     []byte    // the attached buffer; nil when none is
	pending []bregion // regions in use, by offset
}

// bregion is a region of the attached buffer and the send that reads it (nil once done).
type bregion struct {
	off, n int
	req    *request
}

func (rk *Rank) bufferState() *bsendState {
	if s := rk.bsend.Load(); s != nil {
		return s
	}
	rk.bsend.CompareAndSwap(nil, new(bsendState))
	return rk.bsend.Load()
}

// BufferAttach gives the rank a buffer for its buffered sends (Bsend, Ibsend), on every communicator: one buffer
// per rank, as MPI has one per process. ErrBuffer if one is attached already. The buffer belongs to gompj until
// BufferDetach returns it.
func (c *Comm) BufferAttach(buf []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	if buf == nil {
		return fmt.Errorf("%w: attaching a nil buffer", ErrBuffer)
	}
	s := c.r.bufferState()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf != nil {
		return fmt.Errorf("%w: a buffer of %d bytes is already attached (detach it first)", ErrBuffer, len(s.buf))
	}
	s.buf = buf
	return nil
}

// BufferDetach waits until every buffered message has been delivered (its send has completed), then returns the
// attached buffer. Buffered sends started meanwhile find no buffer (ErrBuffer). ErrBuffer if none is attached.
func (c *Comm) BufferDetach() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	s := c.r.bufferState()
	s.mu.Lock()
	buf, pending := s.buf, s.pending
	s.buf, s.pending = nil, nil
	s.mu.Unlock()
	if buf == nil {
		return nil, fmt.Errorf("%w: no buffer is attached", ErrBuffer)
	}
	for _, g := range pending {
		if g.req == nil {
			continue
		}
		if !g.req.done.Wait(c.w.waitPolicy(g.req.remote), c.w.abortCh) {
			return nil, c.w.abortError()
		}
	}
	return buf, nil
}

// reclaim frees the regions whose sends have completed. Called with s.mu held.
func (s *bsendState) reclaim() {
	keep := s.pending[:0]
	for _, g := range s.pending {
		if g.req == nil || g.req.done.Done() {
			continue
		}
		keep = append(keep, g)
	}
	clear(s.pending[len(keep):])
	s.pending = keep
}

// alloc returns the offset of the first free region of n bytes, or false. Called with s.mu held.
func (s *bsendState) alloc(n int) (int, bool) {
	at := 0
	for _, g := range s.pending {
		if g.off-at >= n {
			return at, true
		}
		at = g.off + g.n
	}
	return at, len(s.buf)-at >= n
}

// free is the free space left, in total (it may be split between regions). Called with s.mu held.
func (s *bsendState) free() int {
	n := len(s.buf)
	for _, g := range s.pending {
		n -= g.n
	}
	return n
}

// Bsend sends buf in buffered mode: it copies the message into the attached buffer and returns at once, never
// waiting for the receiver. ErrBuffer when no buffer is attached or the message (its bytes plus BsendOverhead) does
// not fit in the buffer's free space. An object's encoding is kept on the heap, but its size is charged to the
// buffer all the same until it is delivered.
func (c *Comm) Bsend(buf any, dest, tag int) error {
	return c.bsend(&buf, dest, tag)
}

// Ibsend is Bsend returning a request, which is already complete: the message is in the attached buffer.
func (c *Comm) Ibsend(buf any, dest, tag int) (*Request, error) {
	if err := c.bsend(&buf, dest, tag); err != nil {
		return nil, err
	}
	return c.r.completed(kindSend).handle(), nil
}

func (c *Comm) bsend(buf *any, dest, tag int) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := c.checkDest(dest, tag); err != nil || dest == ProcNull {
		return err
	}
	v, prim := MemOf(*buf)
	var enc []byte
	switch {
	case *buf == nil:
		v = Mem{Type: TypeNone}
	case prim && v.Type == TypeNone:
		return fmt.Errorf("%w: a nil or zero *View", ErrBuffer)
	case !prim:
		var err error
		if enc, err = encodeObject(buf); err != nil {
			return err
		}
		v = Mem{Type: TypeObject, Ptr: unsafe.Pointer(unsafe.SliceData(enc)), N: len(enc)}
	}
	s := c.r.bsend.Load()
	if s == nil {
		return fmt.Errorf("%w: Bsend with no buffer attached", ErrBuffer)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		return fmt.Errorf("%w: Bsend with no buffer attached", ErrBuffer)
	}
	s.reclaim()
	need := v.Size() + BsendOverhead
	off, ok := s.alloc(need)
	if !ok {
		return fmt.Errorf("%w: a buffered message of %d bytes needs %d of the attached buffer, which has %d free of %d",
			ErrBuffer, v.Size(), need, s.free(), len(s.buf))
	}
	if prim && v.N > 0 {
		// Send from the copy: v now describes the region (a View is packed into it). An object's encoding is
		// already a copy of its own.
		v = v.copyInto(s.buf[off : off+v.Size()])
	}
	req, err := c.startSendMem(v, enc, dest, tag, standard, false, nil)
	if err != nil {
		return err
	}
	if req == nil || req.done.Done() {
		return nil // delivered already: the region is free again
	}
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].off > off })
	s.pending = append(s.pending, bregion{})
	copy(s.pending[i+1:], s.pending[i:])
	s.pending[i] = bregion{off: off, n: need, req: req}
	return nil
}

// Rsend sends buf in ready mode. MPI lets a ready send assume that the matching receive is already posted (it is
// erroneous otherwise), and lets an implementation send it as a standard send: gompj does, so an Rsend is always
// delivered, posted receive or not.
func (c *Comm) Rsend(buf any, dest, tag int) error { return c.send(buf, dest, tag, standard) }

// Irsend is the nonblocking Rsend: a standard Isend.
func (c *Comm) Irsend(buf any, dest, tag int) (*Request, error) {
	r, err := c.isend(buf, dest, tag, standard)
	return r.handle(), err
}

// SendrecvReplace sends buf to dest and receives into the same buf from source, without deadlocking against a
// matching call on the other side. The outgoing message is copied first, so the incoming one may overwrite buf at
// once; it may be of another length (up to len(buf)) and comes with Recv's rules.
func (c *Comm) SendrecvReplace(buf any, dest, sendTag, source, recvTag int) (Status, error) {
	if err := c.check(); err != nil {
		return Status{}, err
	}
	if err := c.checkDest(dest, sendTag); err != nil {
		return Status{}, err
	}
	if err := c.checkSource(source, recvTag); err != nil {
		return Status{}, err
	}
	// As in Sendrecv: a buffer that cannot be received into (an overlapping View) fails before the send goes.
	if err := checkRecvBuf(&buf, source); err != nil {
		return Status{}, err
	}
	v, prim := MemOf(buf)
	if !prim || dest == ProcNull || v.N == 0 {
		// An object is encoded, and a message of no elements has nothing to copy, before the receive starts:
		// Sendrecv is already safe.
		return c.Sendrecv(buf, dest, sendTag, buf, source, recvTag)
	}
	if v.Type == TypeNone {
		return Status{}, fmt.Errorf("%w: a nil or zero *View", ErrBuffer)
	}
	tmp := getScratch(v.Size())
	sv := v.copyInto(tmp.data) // a View is packed: the reply lands in its blocks while this copy goes out
	sreq, err := c.startSendMem(sv, nil, dest, sendTag, standard, true, nil)
	if err != nil {
		putScratch(tmp)
		return Status{}, err
	}
	st, rerr := c.Recv(buf, source, recvTag)
	if sreq != nil {
		if err := c.r.waitInternal(sreq); err != nil {
			return st, err // the job aborted: the send may still read tmp, which is left to the collector
		}
	}
	putScratch(tmp)
	return st, rerr
}

// scratch is a pooled byte buffer (msg's size classes), for a copy that lives as long as one call.
type scratch struct {
	m    msg
	data []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch(n int) *scratch {
	s := scratchPool.Get().(*scratch)
	s.m = msg{class: -1}
	s.data = s.m.own(n)
	return s
}

func putScratch(s *scratch) {
	s.m.disown()
	s.m, s.data = msg{class: -1}, nil
	scratchPool.Put(s)
}
