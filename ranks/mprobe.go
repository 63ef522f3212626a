package ranks

import (
	"fmt"
	"sync/atomic"

	"github.com/gompj/gompj/queues"
)

// Matched probe. Probe then Recv races when several goroutines of a rank receive: another one may take the probed
// message between the two calls. Mprobe and Improbe take the message out of matching under the rank's lock, as a
// receive does, and hand it over as a Message that only its own Recv or Irecv can receive.

// Message is a message that a matched probe took out of matching (MPI_Message): no receive, probe or other
// goroutine can see it any more. Receive it with its Recv or Irecv, once.
type Message struct {
	c    *Comm
	m    *msg // nil: the message of ProcNull (MPI_MESSAGE_NO_PROC), received at once as nothing
	used atomic.Bool
}

// Improbe is Iprobe that takes the message it finds: with true, the returned Message holds it.
func (c *Comm) Improbe(source, tag int) (*Message, Status, bool, error) {
	if err := c.check(); err != nil {
		return nil, Status{}, false, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return nil, Status{}, false, err
	}
	if source == ProcNull {
		return &Message{c: c}, Status{Source: ProcNull, Tag: AnyTag}, true, nil
	}
	c.pollProbe(source)
	if m := c.takeProbed(source, tag); m != nil {
		return &Message{c: c, m: m}, m.status(), true, nil
	}
	c.r.missed()
	return nil, Status{}, false, nil
}

// Mprobe is Probe that takes the message it finds: the returned Message holds it.
func (c *Comm) Mprobe(source, tag int) (*Message, Status, error) {
	if err := c.check(); err != nil {
		return nil, Status{}, err
	}
	if err := c.checkSource(source, tag); err != nil {
		return nil, Status{}, err
	}
	if source == ProcNull {
		return &Message{c: c}, Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	var m *msg
	found := func() bool {
		m = c.takeProbed(source, tag)
		return m != nil
	}
	if !c.w.waitPolicy(c.remoteSource(source)).SpinFor(found) {
		if err := c.parkProbe(source, tag, &m); err != nil {
			return nil, Status{}, err
		}
	}
	return &Message{c: c, m: m}, m.status(), nil
}

// takeProbed takes the earliest unexpected message that a receive for (source, tag) would match, or nil.
func (c *Comm) takeProbed(source, tag int) *msg {
	r := c.r
	r.mu.Lock()
	m := r.takeUnexpected(c.ctx, int32(source), int32(tag))
	r.mu.Unlock()
	return m
}

// parkProbe blocks until a message for (source, tag) arrives and takes it into *m, as Probe parks: on a waker that
// every message queued at this rank wakes.
func (c *Comm) parkProbe(source, tag int, m **msg) error {
	r := c.r
	wk := queues.GetWaker()
	defer queues.PutWaker(wk)
	for {
		r.mu.Lock()
		if *m = r.takeUnexpected(c.ctx, int32(source), int32(tag)); *m != nil {
			r.mu.Unlock()
			return nil
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
			return c.w.abortError()
		}
	}
}

// claim checks a Message for its receive and marks it received.
func (mm *Message) claim() error {
	if mm == nil {
		return fmt.Errorf("%w: nil message", ErrRequest)
	}
	if !mm.used.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: the message was already received", ErrRequest)
	}
	return nil
}

// Recv receives the message into buf, with Recv's rules (type, truncation, objects into a pointer, nil only for a
// message of no elements). A buffer that cannot receive anything (an object into a non-pointer) is ErrBuffer and
// leaves the message to receive; any other outcome consumes it.
func (mm *Message) Recv(buf any) (Status, error) {
	if mm == nil {
		return Status{}, mm.claim()
	}
	v, prim := MemOf(buf)
	var target any
	switch {
	case buf == nil:
		v = Mem{Type: TypeNone}
	case prim:
		if err := checkMem(v, true); err != nil {
			return Status{}, err // a buffer that cannot receive: the message stays to receive
		}
	case !prim:
		target = hide(&buf) // written through only, synchronously, by decodeInto below
		if err := checkTarget(target); err != nil {
			return Status{}, err
		}
		v = Mem{Type: TypeObject}
	}
	if err := mm.claim(); err != nil {
		return Status{}, err
	}
	if mm.m == nil {
		return Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	c := mm.c
	rr := c.r.getReq(kindRecv)
	rr.setMem(v)
	rr.remote = mm.m.proto == rendezvousRemote
	c.w.consume(c.r, rr, mm.m)
	mm.m = nil
	if !rr.done.Wait(c.w.waitPolicy(rr.remote), c.w.abortCh) {
		return Status{}, c.w.abortError() // rr may still be completed later: never recycle it
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

// Irecv starts receiving the message into buf and returns its request, with Irecv's rules. The message is already
// matched, so the request cannot be cancelled.
func (mm *Message) Irecv(buf any) (*Request, error) {
	if mm == nil {
		return nil, mm.claim()
	}
	v, target, err := recvBuffer(buf)
	if err != nil {
		return nil, err
	}
	if err := mm.claim(); err != nil {
		return nil, err
	}
	c := mm.c
	if mm.m == nil {
		r := c.r.completed(kindRecv)
		r.setStatus(ProcNull, AnyTag, 0, 0)
		return r.handle(), nil
	}
	rr := c.r.nbReq(kindRecv)
	rr.target = target
	rr.setMem(v)
	rr.remote = mm.m.proto == rendezvousRemote
	c.w.consume(c.r, rr, mm.m)
	mm.m = nil
	return rr.handle(), nil
}
