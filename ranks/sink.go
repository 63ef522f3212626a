package ranks

import (
	"fmt"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// Hooks are what a World forwards from its devices that is not rank traffic.
type Hooks struct {
	// PeerLost is told of a node a device can no longer reach (it aborts the job naming the node); without it
	// the World aborts with a plain error.
	PeerLost func(node int, err error)
}

// SetHooks installs the node's handlers; call before the devices start delivering.
func (w *World) SetHooks(h Hooks) { w.hooks = h }

var _ device.Sink = (*World)(nil)

// inbound checks a delivered header and returns the destination rank, envelope and element count.
func (w *World) inbound(h *device.Header) (*Rank, queues.Envelope, int, error) {
	if h.Context == checkCtx {
		return nil, queues.Envelope{}, 0, fmt.Errorf("frame from rank %d on the call check's context is not eager", h.Source)
	}
	r := w.local(int(h.Dest))
	if r == nil {
		return nil, queues.Envelope{}, 0, fmt.Errorf("frame from rank %d for rank %d, which is not on this node", h.Source, h.Dest)
	}
	t := Type(h.Type)
	empty := t == TypeNone && h.Length == 0 // a nil message: no elements, no type
	if !empty && !t.Valid() {
		return nil, queues.Envelope{}, 0, fmt.Errorf("frame from rank %d with unknown element type %d", h.Source, h.Type)
	}
	count := 0
	if !empty {
		n, whole := t.elems(h.Length)
		if !whole {
			return nil, queues.Envelope{}, 0, fmt.Errorf("frame from rank %d: %d bytes is not a whole number of %s elements", h.Source, h.Length, t)
		}
		count = int(n)
		if t == TypeObject {
			count = 1
		}
	}
	if h.Tag < 0 || h.SrcRank < 0 || int(h.SrcRank) >= w.size {
		return nil, queues.Envelope{}, 0, fmt.Errorf("frame from rank %d with tag %d, source rank %d", h.Source, h.Tag, h.SrcRank)
	}
	return r, queues.Envelope{Ctx: h.Context, Src: h.SrcRank, Tag: h.Tag}, count, nil
}

// DeliverEager implements device.Sink.
func (w *World) DeliverEager(in *device.Inbound) {
	if in.Header.Context == checkCtx {
		cl, err := decodeClaim(in.Payload, w.size)
		src := in.Header.Source
		in.Done()
		if err != nil {
			w.Abort(fmt.Errorf("%w: frame from rank %d: %v", ErrInternal, src, err))
			return
		}
		w.chk.take(cl)
		return
	}
	r, env, count, err := w.inbound(&in.Header)
	if err != nil {
		in.Done()
		w.Abort(fmt.Errorf("%w: %v", ErrInternal, err))
		return
	}
	m := getMsg()
	m.item.Env, m.typ, m.count, m.proto, m.in = env, Type(in.Header.Type), count, eagerRemote, in
	w.arrive(r, m)
}

var _ device.EagerClaimer = (*World)(nil)

// ClaimEager implements device.EagerClaimer: the earliest receive posted at the destination rank that matches the
// message, if it takes the payload as it is (same element type and room for all of it; a message of no elements
// fits any buffer), is matched now, under the rank's lock as any delivery, and the device moves the payload
// straight into its buffer: a slice's bytes, or a View's blocks, which the device scatters into. Anything else
// waits for DeliverEager: no receive yet (the message becomes unexpected), an object (its bytes are decoded, not
// copied), a type error or a truncation (the usual path reports them), a header that DeliverEager will reject.
func (w *World) ClaimEager(h *device.Header) (device.Payload, device.Completer, bool) {
	if Type(h.Type) == TypeObject {
		return device.Payload{}, nil, false
	}
	r, env, _, err := w.inbound(h)
	if err != nil {
		return device.Payload{}, nil, false
	}
	t := Type(h.Type)
	takes := func(rr *request) bool {
		return h.Length == 0 || rr.vtyp == t && uint64(rr.vn)*uint64(t.Size()) >= h.Length
	}
	r.mu.Lock()
	var rr *request
	if s, g, recv := r.peekSlot(); s != nil && envMatches(recv, env) {
		// The slotted receive is the earliest posted (see post): it matches, or nothing does.
		if !takes(s) {
			r.mu.Unlock()
			return device.Payload{}, nil, false
		}
		if s.claim.CompareAndSwap(g, g+1) {
			rr = s
		} // else a sender of this node claimed it a moment ago: the next one is in posted
	}
	if rr == nil {
		it := r.posted.Find(env)
		if it == nil || !takes(itemRequest(it)) {
			r.mu.Unlock()
			return device.Payload{}, nil, false
		}
		r.posted.Remove(it)
		rr = itemRequest(it)
	}
	r.mu.Unlock()
	rr.setStatus(env.Src, env.Tag, int64(h.Length), t)
	if h.Flags&device.FlagSync != 0 {
		if err := w.dev.Ack(h); err != nil {
			w.Abort(fmt.Errorf("acknowledging a synchronous send from rank %d: %w", h.Source, err))
		}
	}
	if h.Length == 0 { // nothing to move: a receive into nil, or into an empty View, takes it too
		return device.Payload{}, rr.completer(), true
	}
	// inbound checked that the length is whole elements, takes that the receive holds them all.
	n, _ := t.elems(h.Length)
	return rr.mem().Window(0, int(n)).payload(), rr.completer(), true
}

// DeliverRTS implements device.Sink.
func (w *World) DeliverRTS(h *device.Header) {
	r, env, count, err := w.inbound(h)
	if err != nil {
		w.Abort(fmt.Errorf("%w: %v", ErrInternal, err))
		return
	}
	m := getMsg()
	m.item.Env, m.typ, m.count, m.proto, m.rts = env, Type(h.Type), count, rendezvousRemote, *h
	w.arrive(r, m)
}

func (w *World) arrive(r *Rank, m *msg) {
	r.mu.Lock()
	if rr := r.takePosted(m.item.Env); rr != nil {
		r.mu.Unlock()
		w.consume(r, rr, m)
		return
	}
	r.pushUnexpected(m)
	r.mu.Unlock()
}

// PeerLost implements device.Sink.
func (w *World) PeerLost(node int, err error) {
	if w.hooks.PeerLost != nil {
		w.hooks.PeerLost(node, err)
		return
	}
	w.Abort(fmt.Errorf("lost node %d: %v", node, err))
}
