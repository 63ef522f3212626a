package ranks

import (
	"fmt"
	"reflect"
	"runtime"
)

// Persistent requests. A persistent request is created inactive, holding a recipe (starter) for its operation;
// Start runs the recipe once on the same request, which is then active until a completion call reports it, as any
// request. Point-to-point recipes live here; a persistent collective is just another recipe (NewPersistentRequest).
// Start, Startall, Free and the life cycle are the same for every kind.

// p2pRecipe is a persistent send or receive: its extension and its arguments, in one allocation.
type p2pRecipe struct {
	x    reqExt
	c    *Comm
	buf  any // a send's buffer; a receive's object target (nil when it receives into a slice or into nil)
	mem  Mem // a receive's buffer; a send's, when sendMem (SendInitMem)
	peer int // dest or source
	tag  int
	mode sendMode
	// sendMem: a send of mem rather than of buf
	sendMem bool
	h       Request // the request's handle: a persistent request's state is never reused, so it has only this one
}

func (p *p2pRecipe) start(r *request) error {
	if err := p.c.check(); err != nil {
		return err
	}
	if r.kind == kindSend {
		if p.peer == ProcNull {
			r.done.Complete()
			return nil
		}
		var sreq *request
		var err error
		if p.mode == buffered {
			if err := p.c.bsend(&p.buf, p.peer, p.tag); err != nil {
				return err
			}
			r.done.Complete()
			return nil
		}
		if p.sendMem {
			sreq, err = p.c.startSendMem(p.mem, nil, p.peer, p.tag, p.mode, false, r)
		} else {
			sreq, err = p.c.startSend(&p.buf, p.peer, p.tag, p.mode, false, r)
		}
		if err != nil {
			return err
		}
		if sreq == nil { // done at once (eager): r was not needed to wait on
			r.done.Complete()
		}
		return nil
	}
	if p.peer == ProcNull {
		r.setStatus(ProcNull, AnyTag, 0, 0)
		r.done.Complete()
		return nil
	}
	r.target = p.buf
	r.setMem(p.mem)
	p.c.postRecv(r, p.peer, p.tag)
	return nil
}

func (p *p2pRecipe) release() { p.buf, p.mem = nil, Mem{} }

// newPersistent returns an inactive persistent request of rank rk following recipe p.
func (rk *Rank) newPersistent(kind reqKind, p *p2pRecipe) *Request {
	r := rk.newReq(kind)
	p.x.persist = p
	r.ext = &p.x
	r.life.Store(lifeInactive)
	p.h.s = r
	return &p.h
}

// SendInit creates a persistent standard-mode send of buf to dest with tag: an inactive request that each Start
// sends again. A primitive slice is read at each Start (its elements then, not now); any other value is encoded at
// each Start, so pass a pointer for a persistent send of an object that changes between runs.
func (c *Comm) SendInit(buf any, dest, tag int) (*Request, error) {
	return c.sendInit(buf, dest, tag, standard)
}

// SsendInit creates a persistent synchronous send: each run completes once the matching receive has started.
func (c *Comm) SsendInit(buf any, dest, tag int) (*Request, error) {
	return c.sendInit(buf, dest, tag, synchronous)
}

// BsendInit creates a persistent buffered send: each run copies buf into the attached buffer (BufferAttach) and
// completes at once, as Ibsend; a run whose message does not fit, or with no buffer attached, fails at its Start with
// ErrBuffer.
func (c *Comm) BsendInit(buf any, dest, tag int) (*Request, error) {
	return c.sendInit(buf, dest, tag, buffered)
}

// RsendInit creates a persistent ready send. The receive must already be posted at each Start, as for Rsend; gompj
// sends it as SendInit does, which MPI allows.
func (c *Comm) RsendInit(buf any, dest, tag int) (*Request, error) {
	return c.sendInit(buf, dest, tag, standard)
}

func (c *Comm) sendInit(buf any, dest, tag int, mode sendMode) (*Request, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.checkDest(dest, tag); err != nil {
		return nil, err
	}
	if v, prim := MemOf(buf); !prim && buf != nil {
		if err := encodable(reflect.TypeOf(buf)); err != nil {
			return nil, err
		}
	} else if prim && v.Type == TypeNone {
		// A nil or zero *View: refused here, as by Send, rather than at every Start.
		return nil, fmt.Errorf("%w: a nil or zero *View", ErrBuffer)
	}
	return c.r.newPersistent(kindSend, &p2pRecipe{c: c, buf: buf, peer: dest, tag: tag, mode: mode}), nil
}

// SendInitMem is SendInit of memory (see IsendMem): package nbc's persistent collectives send typed blocks and
// windows of Views this way.
func (c *Comm) SendInitMem(m Mem, dest, tag int) (*Request, error) {
	if err := c.checkSendMem(m, dest, tag); err != nil {
		return nil, err
	}
	return c.r.newPersistent(kindSend, &p2pRecipe{c: c, mem: m, sendMem: true, peer: dest, tag: tag}), nil
}

// RecvInitMem is RecvInit into memory (see IrecvMem).
func (c *Comm) RecvInitMem(m Mem, source, tag int) (*Request, error) {
	if err := c.checkRecvMem(m, source, tag); err != nil {
		return nil, err
	}
	return c.r.newPersistent(kindRecv, &p2pRecipe{c: c, mem: m, peer: source, tag: tag}), nil
}

// StartMem starts an inactive persistent send or receive of memory (SendInitMem, RecvInitMem) on m under tag, in
// place of the memory and tag it was made with; it keeps them for its later runs. Its peer stays the one it was
// made for. The blocking collectives keep one such request per message of a pattern that repeats from call to call
// (a neighbourhood collective's edges) and run it on each call's blocks and operation tag: the messages of a
// nonblocking send and receive, without a request to allocate, check and release per message. Like Start, it is
// ErrRequest on an active or freed request. It is a function, not a method, so that users' Request has no such
// call.
func StartMem(h *Request, m Mem, tag int) error {
	if err := h.claimStart(); err != nil {
		return err
	}
	r := h.s
	p, ok := r.ext.persist.(*p2pRecipe)
	var err error
	switch {
	case !ok || p.mode != standard || (r.kind == kindSend && !p.sendMem) || (r.kind == kindRecv && p.buf != nil):
		err = fmt.Errorf("%w: StartMem of a request not made by SendInitMem or RecvInitMem", ErrRequest)
	case tag < 0 || tag > MaxTag:
		err = errTag(tag)
	default:
		err = checkMem(m, r.kind == kindRecv)
	}
	if err != nil {
		h.set(lifeInactive)
		return err
	}
	p.mem, p.tag = m, tag
	r.reset() // launch, with the recipe's start called directly
	if err := p.start(r); err != nil {
		h.set(lifeInactive)
		return err
	}
	h.set(lifeActive)
	return nil
}

// WaitMem waits for runs that StartMem started and makes their requests inactive again, as Waitall does, but
// without making a Status for each, which a collective does not report. It returns the first error of theirs.
func WaitMem(reqs []*Request) error {
	var first error
	for _, h := range reqs {
		var err error
		r := h.s
		if !r.done.Done() {
			err = h.await(nil)
		}
		if err == nil && h.cas(lifeActive, lifeBusy) {
			r.finish()
			err = r.err
			h.set(lifeInactive)
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// RecvInit creates a persistent receive into buf from source with tag (wildcards allowed): an inactive request
// that each Start posts again.
func (c *Comm) RecvInit(buf any, source, tag int) (*Request, error) {
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
	return c.r.newPersistent(kindRecv, &p2pRecipe{c: c, buf: target, mem: v, peer: source, tag: tag}), nil
}

// PersistentOp is an operation that a persistent request runs once per Start: a persistent collective. Between
// runs its request is inactive, and no method is called.
type PersistentOp interface {
	Operation
	// Start begins a run. It is called only while no run is in flight. An error means nothing was started: the
	// request stays inactive and Start returns the error.
	Start() error
}

// Releaser is implemented by a PersistentOp that holds resources (shared-memory slots, buffers): Release is called
// once when its request is freed, after the run in flight, if any, has completed.
type Releaser interface {
	Release()
}

// NewPersistentRequest returns an inactive persistent request that runs op at each Start: the constructor of
// persistent collectives (nbc), which then share Start, Startall, Free and the completion calls with persistent
// point-to-point requests.
func (w *World) NewPersistentRequest(op PersistentOp) *Request {
	o := new(opRequest)
	r := &o.r
	r.w, r.kind, r.remote, r.ext = w, kindOp, w.dev != nil, &o.x
	o.x.op, o.x.persist, o.pop = op, o, op
	r.life.Store(lifeInactive)
	o.h.s = r
	return &o.h
}

func (o *opRequest) start(r *request) error {
	if err := o.pop.Start(); err != nil {
		return err
	}
	if rk := r.owner; rk != nil {
		rk.ops.add(r)
	}
	return nil
}

func (o *opRequest) release() {
	if rel, ok := o.pop.(Releaser); ok {
		rel.Release()
	}
}

// reset readies an inactive persistent request for its next run. Nobody else can see it: it is busy (claimed by
// this Start), and its previous run's completer finished with it when it set done.
func (r *request) reset() {
	r.done.Reset()
	r.err, r.finished, r.canceled = nil, false, false
	if r.kind == kindOp {
		r.ext.opDone.Store(false)
		return
	}
	r.src.Store(0)
	r.tag.Store(0)
	r.bytes, r.styp = 0, 0
	r.held, r.scratch, r.rk, r.remote = nil, nil, nil, false
}

// claimStart takes an inactive persistent request for a Start (lifeBusy), or says why it cannot be started.
func (h *Request) claimStart() error {
	if h == nil {
		return errNilRequest()
	}
	if h.gone() {
		return errFreed()
	}
	if h.s == nil {
		return errZeroRequest()
	}
	if r := h.s; r.ext == nil || r.ext.persist == nil {
		return fmt.Errorf("%w: Start of a request that is not persistent", ErrRequest)
	}
	if h.cas(lifeInactive, lifeBusy) {
		return nil
	}
	switch lifeState(h.s.life.Load()) {
	case lifeFreeing, lifeFreed:
		return errFreed()
	}
	return fmt.Errorf("%w: Start of an active request (wait for it first)", ErrRequest)
}

// launch runs one instance of a claimed request.
func (h *Request) launch() error {
	r := h.s
	r.reset()
	if err := r.ext.persist.start(r); err != nil {
		h.set(lifeInactive)
		return err
	}
	h.set(lifeActive)
	return nil
}

// Start starts a persistent request: ErrRequest if it is active, freed, or not persistent.
func (r *Request) Start() error {
	if err := r.claimStart(); err != nil {
		return err
	}
	return r.launch()
}

// Startall starts every request, as Start does each. They are all checked first: if one cannot be started (nil,
// active, freed, not persistent, or listed twice), none is, and the error is ErrRequest. If a run then fails to
// start (the communicator was freed, the job aborted), the requests before it have started and the rest have not.
func Startall(reqs ...*Request) error {
	for i, r := range reqs {
		if err := r.claimStart(); err != nil {
			for j, s := range reqs[:i] {
				if s == r {
					err = fmt.Errorf("%w: it is also request %d", ErrRequest, j)
				}
			}
			for _, s := range reqs[:i] {
				s.set(lifeInactive)
			}
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	for i, r := range reqs {
		if err := r.launch(); err != nil {
			for _, s := range reqs[i+1:] {
				s.set(lifeInactive)
			}
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}

// Free releases a request; any later use is ErrRequest. An inactive request is released at once. An active one
// still completes: a receive still takes its message, a send still delivers, a collective still runs to its end;
// then it is released (MPI_Request_free). Free itself never waits.
func (h *Request) Free() error {
	if h == nil {
		return errNilRequest()
	}
	if h.gone() {
		return errFreed()
	}
	if h.s == nil {
		return errZeroRequest()
	}
	r := h.s
	for {
		if h.stale() {
			// Reported, and its state serves another run now: the handle alone is released.
			h.freed.Store(true)
			return nil
		}
		switch s := lifeState(r.life.Load()); s {
		case lifeInactive:
			if r.ext == nil || r.ext.persist == nil {
				// Reported: its state may be its rank's again (Request.reuse), and holds nothing of the run any more
				// (finish let go of it), so the handle alone is released.
				h.freed.Store(true)
				return nil
			}
			if h.cas(s, lifeFreed) {
				r.unlist()
				r.release()
				return nil
			}
		case lifeActive:
			if h.cas(s, lifeFreeing) {
				h.freed.Store(true) // the handle's later uses fail, even once the state serves another run
				// If it is done, release it now. If not: a point-to-point request needs nobody once its flag is set,
				// except an object receive, whose completer sees the state (completeObject); an operation must be
				// progressed to its end.
				if r.settle() {
					r.unlist()
				} else if r.kind == kindOp {
					r.w.adopt(r)
				}
				return nil
			}
		case lifeBusy:
			runtime.Gosched() // another goroutine is reporting or starting it, which takes no time
		default:
			return errFreed()
		}
	}
}

// unlist takes a freed operation request that has finished off its rank's list of operations (rankOps.drop).
func (r *request) unlist() {
	if r.kind == kindOp && r.owner != nil {
		r.owner.ops.drop(r)
	}
}

// CollStarter is a persistent collective that its rank runs no operation for (package nbc's small calls inside a
// node): each Start hands it the request, and another rank completes it with CompletePersistentColl. Its waiters
// wait on the request's flag, as for a point-to-point request of the node.
type CollStarter interface {
	// StartColl begins a run on r. An error means nothing was started.
	StartColl(r *Request) error
}

// collRecipe is a CollStarter's recipe: its extension, the starter, and what Free calls, in one allocation.
type collRecipe struct {
	x    reqExt
	s    CollStarter
	rel  func()
	gate *gateRef // the gate its runs wait on, if the starter gives them one (StartGate)
	h    Request  // the request's handle: a persistent request's state is never reused, so it has only this one
}

func (p *collRecipe) start(*request) error { return p.s.StartColl(&p.h) }

func (p *collRecipe) release() {
	if p.rel != nil {
		p.rel()
	}
}

// PersistentCollRequest returns an inactive persistent request of c's rank that runs s at each Start; rel, if not
// nil, is called once when the request is freed, after its run in flight, if any, has completed.
func (c *Comm) PersistentCollRequest(s CollStarter, rel func()) *Request {
	p := &collRecipe{s: s, rel: rel}
	p.x.persist = p
	r := &request{w: c.w, kind: kindColl, owner: c.r, ext: &p.x}
	r.life.Store(lifeInactive)
	p.h.s = r
	return &p.h
}

// CompletePersistentColl completes r, a request of PersistentCollRequest, with err, as CompleteColl does; if its
// owner freed it while the run was in flight, it releases it (Free could not: the run still used what it holds).
func CompletePersistentColl(h *Request, err error) { completePersistentColl(h.s, err) }

// completePersistentColl is CompletePersistentColl on the state.
func completePersistentColl(r *request, err error) {
	completeColl(r, err)
	if lifeState(r.life.Load()) == lifeFreeing {
		r.settle()
	}
}
