package ranks

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// Wildcards and special ranks.
const (
	AnySource = queues.AnySource
	AnyTag    = queues.AnyTag
	ProcNull  = -2 // a send or receive with ProcNull completes at once and moves nothing
	Undefined = -32766
	MaxTag    = math.MaxInt32
)

// Comm is a communicator as seen by one rank: a group of ranks, this rank's place in it, and a context that keeps
// its traffic apart from every other communicator's. A Comm may be used by several goroutines of its rank at once.
type Comm struct {
	r     *Rank
	w     *World
	rank  int
	size  int
	group []int32   // comm rank -> world rank; nil means the identity (the world communicator)
	ctx   uint32    // point-to-point context; collectives use ctx+1
	coll  *Comm     // the same group on the collective context
	topo  *topology // the virtual topology, if any (topo.go); read-only, shared by Dup
	freed atomic.Bool
	// An intercommunicator (inter.go) has a remote group, which point-to-point ranks name, and its local group as
	// an intracommunicator of its own, for the local phases of its collectives. Both nil on an intracommunicator.
	remote []int32 // remote rank -> world rank
	local  *Comm
	ext    atomic.Value            // the collective layer's state for this handle (Ext)
	calls  atomic.Pointer[callLog] // its collective calls, once it has made one (callcheck.go)
	nolog  atomic.Bool             // calls is unlogged: NoteCall's test, which inlines
	colls  *collReqs               // its small-collective requests (CollRequest), made on first use
}

// Ext holds the collective layer's state for this communicator handle (package collectives), which ranks never
// looks into. Collective calls find it with one load: a map keyed by the handle cost every call a weak pointer's
// dereference (runtime.makeStrongFromWeak: a span lookup and a sweep check), several times per nonblocking one.
func (c *Comm) Ext() *atomic.Value { return &c.ext }

// Rank is this rank's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.size }

// Context is the communicator's point-to-point context id.
func (c *Comm) Context() uint32 { return c.ctx }

// World returns the node's World.
func (c *Comm) World() *World { return c.w }

// WorldRank maps a rank of this communicator (of its local group, on an intercommunicator) to its world rank.
func (c *Comm) WorldRank(r int) int {
	if c.group == nil {
		return r
	}
	return int(c.group[r])
}

// Coll returns the communicator on its collective context: the same group, traffic apart from point-to-point.
func (c *Comm) Coll() *Comm {
	if c.coll == nil {
		c.coll = &Comm{r: c.r, w: c.w, rank: c.rank, size: c.size, group: c.group, ctx: c.ctx + 1, remote: c.remote,
			local: c.local}
		c.coll.coll = c.coll
	}
	return c.coll
}

func (c *Comm) check() error {
	if c == nil || c.freed.Load() {
		return fmt.Errorf("%w: nil or freed", ErrComm)
	}
	if c.w.aborted.Load() {
		return c.w.abortError()
	}
	return nil
}

func (c *Comm) checkDest(dest, tag int) error {
	if (dest < 0 || dest >= c.peers()) && dest != ProcNull {
		return errRank(dest, c.peers())
	}
	// The tag of a send to ProcNull is checked too, as a receive's is: it used to pass unseen, any value.
	if tag < 0 || tag > MaxTag {
		return errTag(tag)
	}
	return nil
}

func (c *Comm) checkSource(src, tag int) error {
	if (src < 0 || src >= c.peers()) && src != AnySource && src != ProcNull {
		return errRank(src, c.peers())
	}
	if (tag < 0 || tag > MaxTag) && tag != AnyTag {
		return errTag(tag)
	}
	return nil
}

type sendMode uint8

const (
	standard sendMode = iota
	synchronous
	buffered // a persistent Bsend's runs (BsendInit): each copies into the attached buffer
)

// Send sends buf to dest. It returns once buf may be reused: at once for small messages (eager), after the
// receiver copied the data for large ones (rendezvous).
func (c *Comm) Send(buf any, dest, tag int) error { return c.send(buf, dest, tag, standard) }

// Ssend sends buf to dest and returns only once the matching receive has started.
func (c *Comm) Ssend(buf any, dest, tag int) error { return c.send(buf, dest, tag, synchronous) }

func (c *Comm) send(buf any, dest, tag int, mode sendMode) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := c.checkDest(dest, tag); err != nil || dest == ProcNull {
		return err
	}
	req, err := c.startSend(&buf, dest, tag, mode, true, nil)
	if err != nil || req == nil {
		return err
	}
	return c.r.waitInternal(req)
}

// Isend starts a send and returns its request.
func (c *Comm) Isend(buf any, dest, tag int) (*Request, error) {
	r, err := c.isend(buf, dest, tag, standard)
	return r.handle(), err
}

// Issend starts a synchronous send: its request completes once the matching receive has started.
func (c *Comm) Issend(buf any, dest, tag int) (*Request, error) {
	r, err := c.isend(buf, dest, tag, synchronous)
	return r.handle(), err
}

func (c *Comm) isend(buf any, dest, tag int, mode sendMode) (*request, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.checkDest(dest, tag); err != nil {
		return nil, err
	}
	if dest == ProcNull {
		return c.r.completed(kindSend), nil
	}
	req, err := c.startSend(&buf, dest, tag, mode, false, nil)
	if err != nil {
		return nil, err
	}
	if req == nil {
		return c.r.completed(kindSend), nil
	}
	return req, nil
}

// completed returns a new request of rank rk that has already completed.
func (rk *Rank) completed(k reqKind) *request {
	r := rk.nbReq(k)
	r.finished = true
	r.done.Complete()
	return r
}

// waitInternal waits for a pooled request of a blocking call and recycles it.
func (rk *Rank) waitInternal(req *request) error {
	w := rk.w
	if !req.done.WaitHelp(w.waitPolicy(req.remote), w.abortCh, rk.helper(req.remote)) {
		// Someone may still complete req later: never recycle it.
		return w.abortError()
	}
	err := req.err
	rk.putReq(req)
	return err
}

// startSend starts a send of *buf. It returns nil when the send is already complete, or a request to wait on:
// pr if given (a persistent request's run), else a pooled one if internal, else a new one. buf is a pointer to the
// caller's parameter, which must not escape (see buffer.go). A nil buf is a message of no elements.
func (c *Comm) startSend(buf *any, dest, tag int, mode sendMode, internal bool, pr *request) (*request, error) {
	v, prim := MemOf(*buf)
	var enc []byte
	switch {
	case *buf == nil:
		v = Mem{Type: TypeNone}
	case prim && v.Type == TypeNone:
		return nil, fmt.Errorf("%w: a nil or zero *View", ErrBuffer)
	case !prim:
		var err error
		if enc, err = encodeObject(buf); err != nil {
			return nil, err
		}
		v = Mem{Type: TypeObject, Ptr: unsafe.Pointer(unsafe.SliceData(enc)), N: len(enc)}
	}
	return c.startSendMem(v, enc, dest, tag, mode, internal, pr)
}

// sendReq returns the request a send waits on: pr if given, else a pooled one if internal, else a new one.
func (rk *Rank) sendReq(internal bool, pr *request) *request {
	switch {
	case pr != nil:
		return pr
	case internal:
		return rk.getReq(kindSend)
	}
	return rk.nbReq(kindSend)
}

// startSendMem is startSend of memory: primitive, or enc's encoded object (v then describes enc).
func (c *Comm) startSendMem(v Mem, enc []byte, dest, tag int, mode sendMode, internal bool, pr *request) (*request, error) {
	prim := enc == nil
	env := queues.Envelope{Ctx: c.ctx, Src: int32(c.rank), Tag: int32(tag)}
	wdest := c.peerWorld(dest)
	r := c.w.local(wdest)
	if r == nil {
		return c.sendRemote(env, wdest, v, mode, internal, pr)
	}

	rr := r.claimSlot(env)
	if rr == nil {
		r.mu.Lock()
		if rr = r.takePosted(env); rr == nil {
			goto unexpected
		}
		r.mu.Unlock()
	}
	{
		if prim {
			rr.fill(env, v, r)
		} else {
			m := getMsg()
			m.item.Env, m.typ, m.count, m.proto, m.data, m.class = env, TypeObject, 1, eagerOwned, enc, -1
			rr.takeObject(m)
			rr.completeObject()
			return nil, nil
		}
		rr.done.Complete()
		return nil, nil
	}
unexpected:
	m := r.takeMsg()
	m.item.Env, m.typ, m.count = env, v.Type, v.N
	if !prim {
		m.count = 1
	}
	if mode == standard && (!prim || v.Size() <= c.w.eager) {
		// Eager if it fits the receiver's bound (see Rank.reserve), else on to rendezvous below.
		cost := eagerCost(v.Size(), enc)
		if r == c.r {
			cost = 0
		}
		if r.reserve(cost) {
			if prim {
				v.CopyTo(m.own(v.Size())) // a View is packed here: the eager copy is made anyway
			} else {
				m.data, m.class = enc, -1
			}
			m.proto, m.held = eagerOwned, cost
			r.pushUnexpected(m)
			r.mu.Unlock()
			return nil, nil
		}
	}
	sreq := c.r.sendReq(internal, pr)
	sreq.rk, sreq.held = r, m // until a receive takes m, Cancel may withdraw it (see msg.taken)
	m.proto, m.data, m.sview, m.soff, m.class, m.sreq, m.from = rendezvousLocal, v.Bytes(), v.view, v.off, -1, sreq, c.r
	if !prim {
		m.proto, m.data = eagerOwned, enc // an encoded object is ours; a synchronous send still waits for the match
	}
	r.pushUnexpected(m)
	r.mu.Unlock()
	return sreq, nil
}

// fill completes a posted primitive receive with the message src (one copy, block by block where either side is
// a View), checking type and size. A large copy is shared with waiter's rank, the receiver or the sender that waits
// for it, if it spins meanwhile (coop.go); nil copies alone.
func (rr *request) fill(env queues.Envelope, src Mem, waiter *Rank) {
	rv := rr.mem()
	n := src.Size()
	rr.setStatus(env.Src, env.Tag, int64(n), src.Type)
	if n == 0 {
		return // a message of no elements fits any buffer, nil included
	}
	if rv.Type == TypeNone {
		rr.err = fmt.Errorf("%w: %d elements from rank %d (tag %d) into nil", ErrTruncate, src.N, env.Src, env.Tag)
		rr.bytes = 0
		return
	}
	if rv.Type != src.Type {
		rr.err = fmt.Errorf("%w: message of %s from rank %d (tag %d) received into %s", ErrType, src.Type,
			env.Src, env.Tag, rv.Type)
		return
	}
	if n > rv.Size() {
		rr.err = fmt.Errorf("%w: %d elements from rank %d (tag %d) into a buffer of %d", ErrTruncate, src.N,
			env.Src, env.Tag, rv.N)
		n = rv.Size()
		rr.bytes = int64(n)
	}
	copyShared(rv, src, n, waiter)
}

// bytesMem is the memory of count elements of typ held contiguously in data.
func bytesMem(typ Type, count int, data []byte) Mem {
	return Mem{Type: typ, Ptr: unsafe.Pointer(unsafe.SliceData(data)), N: count}
}

// takeObject hands an object message to a posted receive: the waiter decodes it.
func (rr *request) takeObject(m *msg) {
	env := m.item.Env
	rr.setStatus(env.Src, env.Tag, int64(len(m.payload())), TypeObject)
	if rr.vtyp == TypeNone {
		rr.err = fmt.Errorf("%w: object message from rank %d (tag %d) into nil", ErrTruncate, env.Src, env.Tag)
		rr.bytes = 0
		m.release()
		return
	}
	if rr.vtyp != TypeObject {
		rr.err = fmt.Errorf("%w: object message from rank %d (tag %d) received into %s", ErrType, env.Src,
			env.Tag, rr.vtyp)
		m.release()
		return
	}
	rr.held = m
}

// consume matches a dequeued message to receive rr and completes both sides (or hands a remote rendezvous to the
// device, which completes rr later). It runs on the receiving rank or on the device's progress loop.
func (w *World) consume(rk *Rank, rr *request, m *msg) {
	env := m.item.Env
	switch m.proto {
	case rendezvousRemote:
		w.clearToSend(rr, m)
		return
	case eagerRemote:
		if m.in.Header.Flags&device.FlagSync != 0 {
			if err := w.dev.Ack(&m.in.Header); err != nil {
				w.Abort(fmt.Errorf("acknowledging a synchronous send from rank %d: %w", m.in.Header.Source, err))
			}
		}
	}
	sreq := m.sreq
	if m.typ == TypeObject {
		rr.takeObject(m) // m now belongs to rr (or was released on a type error)
	} else {
		var waiter *Rank // the sender, waiting for its rendezvous
		if m.proto == rendezvousLocal {
			waiter = m.from
		}
		rr.fill(env, m.src(), waiter)
		rk.recycle(m)
	}
	if sreq != nil {
		sreq.done.Complete()
	}
	if rr.held != nil {
		rr.completeObject()
		return
	}
	rr.done.Complete()
}

// clearToSend answers a remote request-to-send matched by rr. The device reads the RTS from m, which goes back to
// its pool only after: a copy of the header handed to the device behind its interface would escape, an allocation
// per rendezvous (the device keeps what it needs of it).
func (w *World) clearToSend(rr *request, m *msg) {
	h := &m.rts
	defer func() {
		*m = msg{class: -1}
		msgPool.Put(m)
	}()
	env := m.item.Env
	rr.setStatus(env.Src, env.Tag, int64(h.Length), m.typ)
	rv := rr.mem()
	var dst []byte
	switch {
	case h.Length == 0: // a message of no elements fits any buffer, nil included
	// A receive that takes less than the message clears it with a shorter buffer (device.Device, ClearToSend): the
	// device moves what fits and drops the rest without receiving it, so a huge message into a small buffer, or
	// into none, costs no memory of its size here.
	case rv.Type == TypeNone:
		rr.err = fmt.Errorf("%w: %d elements from rank %d (tag %d) into nil", ErrTruncate, m.count, env.Src,
			env.Tag)
		rr.bytes = 0
	case m.typ != rv.Type:
		rr.err = fmt.Errorf("%w: message of %s from rank %d (tag %d) received into %s", ErrType, m.typ,
			env.Src, env.Tag, rv.Type)
	case m.typ == TypeObject:
		hm := getMsg()
		hm.item.Env, hm.typ, hm.count, hm.proto = env, TypeObject, 1, eagerOwned
		hm.own(int(h.Length))
		rr.held = hm
		dst = hm.data
	case rv.view != nil && w.segs != nil && w.segs.Segments(int(h.Source)):
		// The device reads the payload straight into the view's blocks (those that fit).
		n := truncRemote(rr, rv, m, h.Length)
		if err := w.segs.ClearToSendv(h, rv.Window(0, n/rv.Type.Size()).payload(), rr.completer()); err != nil {
			rr.completer().Complete(err)
		}
		return
	case rv.view != nil:
		n := truncRemote(rr, rv, m, h.Length)
		rr.scratch, rr.box = bounce(n) // unpacked into the view when the payload is in (Complete)
		dst = rr.scratch
	default:
		dst = rv.Bytes()[:truncRemote(rr, rv, m, h.Length)]
	}
	if err := w.dev.ClearToSend(h, dst, rr.completer()); err != nil {
		rr.completer().Complete(err)
	}
}

// truncRemote returns how many bytes of a remote rendezvous message of length bytes the receive rr, into rv, takes:
// all of them, or, into a shorter buffer, the whole elements that fit, with ErrTruncate noted on rr.
func truncRemote(rr *request, rv Mem, m *msg, length uint64) int {
	if length <= uint64(rv.Size()) {
		return int(length)
	}
	env := m.item.Env
	rr.err = fmt.Errorf("%w: %d elements from rank %d (tag %d) into a buffer of %d", ErrTruncate, m.count,
		env.Src, env.Tag, rv.N)
	rr.bytes = int64(rv.Size())
	return rv.Size()
}

func (c *Comm) sendRemote(env queues.Envelope, wdest int, v Mem, mode sendMode, internal bool, pr *request) (*request, error) {
	// The header comes from the rank, not the stack: behind the device's interface it would escape, an allocation
	// per message. The device reads it during the call only (device.Device, memory).
	h := c.r.header()
	defer c.r.putHeader(h)
	*h = device.Header{Kind: device.KindEager, Type: uint8(v.Type), Context: env.Ctx, Source: int32(c.r.id),
		Dest: int32(wdest), SrcRank: env.Src, Tag: env.Tag, Length: uint64(v.Size())}
	dev := c.w.sendDev(wdest)
	// EagerLimit 0 means "no credit toward that node": rendezvous, even for an empty message.
	lim := dev.EagerLimit(wdest)
	eager := lim > 0 && v.Size() <= lim
	if v.view != nil {
		return c.sendRemoteView(h, wdest, v, eager, mode, internal, pr)
	}
	if mode == standard && eager {
		if err := dev.SendEager(h, v.Bytes(), nil); err != nil {
			return nil, c.w.deviceError(err)
		}
		return nil, nil
	}
	sreq := c.r.sendReq(internal, pr)
	sreq.remote = true
	var err error
	if eager {
		h.Flags |= device.FlagSync
		err = dev.SendEager(h, v.Bytes(), sreq.completer())
	} else {
		h.Kind = device.KindRTS
		err = dev.SendRendezvous(h, v.Bytes(), sreq.completer())
	}
	if err != nil {
		return nil, c.w.deviceError(err)
	}
	return sreq, nil
}

// sendRemoteView is sendRemote of a View: its blocks go to the device as pieces where the device serving dest
// moves them itself (device.Segmented), else packed into a pooled buffer (given back once the device is done).
func (c *Comm) sendRemoteView(h *device.Header, wdest int, v Mem, eager bool, mode sendMode, internal bool, pr *request) (*request, error) {
	var sreq *request
	var done device.Completer
	if mode != standard || !eager {
		sreq = c.r.sendReq(internal, pr)
		sreq.remote = true
		done = sreq.completer()
	}
	if eager && sreq != nil {
		h.Flags |= device.FlagSync
	}
	if !eager {
		h.Kind = device.KindRTS
	}
	var err error
	if segs := c.w.segs; segs != nil && segs.Segments(wdest) {
		p := v.payload()
		if eager {
			err = segs.SendEagerv(h, p, done)
		} else {
			err = segs.SendRendezvousv(h, p, done)
		}
	} else {
		b, box := bounce(v.Size())
		v.CopyTo(b)
		if eager {
			err = c.w.dev.SendEager(h, b, done)
			unbounce(box) // an eager payload may be reused once SendEager returns
		} else {
			sreq.scratch, sreq.box = b, box
			if err = c.w.dev.SendRendezvous(h, b, done); err != nil {
				sreq.scratch, sreq.box = nil, nil
				unbounce(box)
			}
		}
	}
	if err != nil {
		return nil, c.w.deviceError(err)
	}
	return sreq, nil
}

func (w *World) deviceError(err error) error {
	if w.aborted.Load() {
		return w.abortError()
	}
	return fmt.Errorf("%w: network device: %w", ErrAborted, err)
}

// Recv receives into buf a message from source with tag (wildcards allowed).
func (c *Comm) Recv(buf any, source, tag int) (Status, error) {
	if err := c.check(); err != nil {
		return Status{}, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return Status{}, err
	}
	if source == ProcNull {
		return Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	v, prim := MemOf(buf)
	var target any
	switch {
	case buf == nil:
		v = Mem{Type: TypeNone} // receives a message of no elements; any other is ErrTruncate
	case prim:
		if err := checkMem(v, true); err != nil {
			return Status{}, err
		}
	case !prim:
		target = hide(&buf) // written through only, synchronously, by decodeInto below
		if err := checkTarget(target); err != nil {
			return Status{}, err
		}
		v = Mem{Type: TypeObject}
	}
	rr := c.r.getReq(kindRecv)
	rr.setMem(v)
	c.postRecv(rr, source, tag)
	if !rr.done.WaitHelp(c.w.waitPolicy(rr.remote), c.w.abortCh, c.r.helper(rr.remote)) {
		return Status{}, c.w.abortError() // rr may still be matched later: never recycle it
	}
	st, err := rr.status(), rr.err
	if m := rr.held; m != nil {
		if err == nil {
			err = decodeInto(target, m.payload())
		}
		m.release()
	}
	c.r.putReq(rr)
	return st, err
}

// Irecv starts a receive into buf and returns its request. An object receive keeps buf (a pointer) until the
// request completes.
func (c *Comm) Irecv(buf any, source, tag int) (*Request, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return nil, err
	}
	v, target, err := recvBuffer(buf)
	if err != nil {
		return nil, err
	}
	return c.irecv(v, target, source, tag).handle(), nil
}

// recvBuffer returns the view a receive into buf fills and, for an object receive, the pointer it decodes into.
// nil takes only a message of no elements; any other is ErrTruncate.
func recvBuffer(buf any) (Mem, any, error) {
	if buf == nil {
		return Mem{Type: TypeNone}, nil, nil
	}
	if v, ok := MemOf(buf); ok {
		return v, nil, checkMem(v, true)
	}
	if err := checkTarget(buf); err != nil {
		return Mem{}, nil, err
	}
	return Mem{Type: TypeObject}, buf, nil
}

// IrecvBytes is Irecv into a byte slice, given as itself rather than boxed in an interface: Irecv's argument
// escapes (an object receive keeps its target), so boxing a slice for it allocates. The collectives use this.
func (c *Comm) IrecvBytes(b []byte, source, tag int) (*Request, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return nil, err
	}
	return c.irecv(sliceMem(TypeByte, b), nil, source, tag).handle(), nil
}

// irecv posts a checked receive into v (an object receive decodes into target when it completes).
func (c *Comm) irecv(v Mem, target any, source, tag int) *request {
	if source == ProcNull {
		r := c.r.completed(kindRecv)
		r.setStatus(ProcNull, AnyTag, 0, 0)
		return r
	}
	rr := c.r.nbReq(kindRecv)
	rr.target = target
	rr.setMem(v)
	c.postRecv(rr, source, tag)
	return rr
}

// remoteSource reports whether a message from source (a rank of c, or AnySource) may come through the device.
func (c *Comm) remoteSource(source int) bool {
	return c.w.dev != nil && (source == AnySource || c.w.local(c.peerWorld(source)) == nil)
}

// postRecv matches rr against the unexpected queue or posts it.
func (c *Comm) postRecv(rr *request, source, tag int) {
	r := c.r
	r.mu.Lock()
	if m := r.takeUnexpected(c.ctx, int32(source), int32(tag)); m != nil {
		if m.inPlace {
			// A small local eager message is consumed under the lock, which it then returns to the rank's list
			// for the next sender to this rank: the copy is a few words, and no pool is touched.
			rr.fill(m.item.Env, bytesMem(m.typ, m.count, m.data), nil)
			r.keepMsg(m)
			r.mu.Unlock()
			rr.done.Complete()
			return
		}
		r.mu.Unlock()
		// A remote rendezvous completes only as the device moves its payload: the wait must drive the device (the
		// progress loop may be standing down for the rank, which drove it a moment ago, for up to 10 ms). Traced:
		// 4.6 % of 64 KiB round trips between two node processes of a host took 0.3-12 ms, most of the time in
		// all, when the RTS came in during the Send before the Recv and was matched from the unexpected queue.
		rr.remote = m.proto == rendezvousRemote
		c.w.consume(r, rr, m)
		return
	}
	rr.remote = c.remoteSource(source)
	rr.rk = r
	r.post(rr, queues.Envelope{Ctx: c.ctx, Src: int32(source), Tag: int32(tag)})
	r.mu.Unlock()
}

// Sendrecv sends sendBuf to dest and receives into recvBuf from source, without deadlocking against a matching
// Sendrecv on the other side.
func (c *Comm) Sendrecv(sendBuf any, dest, sendTag int, recvBuf any, source, recvTag int) (Status, error) {
	if err := c.check(); err != nil {
		return Status{}, err
	}
	if err := c.checkDest(dest, sendTag); err != nil {
		return Status{}, err
	}
	if err := c.checkSource(source, recvTag); err != nil {
		return Status{}, err
	}
	// The receive buffer is checked before anything is sent: a buffer Recv refuses (an object into a non-pointer,
	// an overlapping View) used to fail the call after its message had gone, left for the peer to receive although
	// the call reported an error.
	if err := checkRecvBuf(&recvBuf, source); err != nil {
		return Status{}, err
	}
	var sreq *request
	if dest != ProcNull {
		var err error
		if sreq, err = c.startSend(&sendBuf, dest, sendTag, standard, true, nil); err != nil {
			return Status{}, err
		}
	}
	st, rerr := c.Recv(recvBuf, source, recvTag)
	if sreq != nil {
		if err := c.r.waitInternal(sreq); err != nil && rerr == nil {
			rerr = err
		}
	}
	return st, rerr
}

// checkRecvBuf checks *buf as Recv does before it posts a receive from source, without letting buf escape.
func checkRecvBuf(buf *any, source int) error {
	if source == ProcNull || *buf == nil {
		return nil
	}
	if v, prim := MemOf(*buf); prim {
		return checkMem(v, true)
	}
	return checkTarget(hide(buf))
}

// Iprobe reports whether a message from source with tag could be received now, and its status.
func (c *Comm) Iprobe(source, tag int) (Status, bool, error) {
	if err := c.check(); err != nil {
		return Status{}, false, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return Status{}, false, err
	}
	if source == ProcNull {
		return Status{Source: ProcNull, Tag: AnyTag}, true, nil
	}
	c.pollProbe(source)
	r := c.r
	r.mu.Lock()
	st, ok := c.peek(source, tag)
	r.mu.Unlock()
	if !ok {
		r.missed()
	}
	return st, ok, nil
}

// pollProbe is a nonblocking probe's progress: it polls the network device once (pollNet) if the message may come
// through it.
func (c *Comm) pollProbe(source int) {
	if c.w.net != nil && c.remoteSource(source) {
		c.w.pollNet()
	}
}

func (c *Comm) peek(source, tag int) (Status, bool) {
	it := c.r.unexp.Find(c.ctx, int32(source), int32(tag))
	if it == nil {
		return Status{}, false
	}
	return (*msg)(unsafe.Pointer(it)).status(), true
}

// status is what a probe of m reports.
func (m *msg) status() Status {
	n := len(m.data)
	if m.sview != nil {
		n = m.count * m.typ.Size()
	}
	switch m.proto {
	case eagerRemote:
		n = len(m.in.Payload)
	case rendezvousRemote:
		n = int(m.rts.Length)
	}
	return Status{Source: int(m.item.Env.Src), Tag: int(m.item.Env.Tag), count: m.count, bytes: n, typ: m.typ}
}

// Probe waits until a message from source with tag could be received and returns its status.
func (c *Comm) Probe(source, tag int) (Status, error) {
	if err := c.check(); err != nil {
		return Status{}, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return Status{}, err
	}
	if source == ProcNull {
		return Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	r := c.r
	var st Status
	var ok bool
	found := func() bool {
		r.mu.Lock()
		st, ok = c.peek(source, tag)
		r.mu.Unlock()
		return ok
	}
	if c.w.waitPolicy(c.remoteSource(source)).SpinFor(found) {
		return st, nil
	}
	wk := queues.GetWaker()
	defer queues.PutWaker(wk)
	for {
		r.mu.Lock()
		if st, ok = c.peek(source, tag); ok {
			r.mu.Unlock()
			return st, nil
		}
		r.probers = append(r.probers, wk)
		r.mu.Unlock()
		if !wk.Park(c.w.abortCh) {
			r.mu.Lock()
			for i, p := range r.probers {
				if p == wk {
					r.probers = append(r.probers[:i], r.probers[i+1:]...)
					break
				}
			}
			r.mu.Unlock()
			return Status{}, c.w.abortError()
		}
	}
}

// Abort ends the whole job: every rank's blocked call returns ErrAborted, and the job's exit code is code. It
// does not return.
func (c *Comm) Abort(code int) {
	c.w.Abort(fmt.Errorf("%w", &AbortError{Rank: c.r.id, Code: code}))
	abortExit()
}
