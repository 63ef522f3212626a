package collectives

import (
	"fmt"

	"github.com/gompj/gompj/ranks"
)

// Views in the blocking collectives. Their algorithms combine, forward and publish contiguous bytes, so a *View
// argument is packed once, on entry, into scratch memory this rank keeps for the communicator, and the call runs
// on that; a receive buffer is unpacked into its View when the call ends. The receive side is packed on entry
// too, so that whatever the collective leaves untouched (gaps of the v variants, Exscan's rank 0, blocks past the
// data) keeps its value, and InPlace finds its data. One copy each way, no allocation once the scratch has grown.
// The neighbourhood collectives, built for halo exchanges, move views without packing (neighbor.go).
//
// The packed argument travels through the collective as *packed, a pointer into the state, so boxing it in the
// interface argument allocates nothing; viewOf recognises it.

// packed is a View argument of the call in progress, held in scratch.
type packed struct {
	v    vec
	src  ranks.Mem // the View's elements
	view bool
}

// Argument positions, each with a scratch slot of its own.
const (
	argSend = iota
	argRecv
	numArgs
)

// packArgs replaces View arguments by their packed copies; it reports whether unpackArgs must run when the call
// ends. send or recv may be nil (an argument the collective does not have).
func (st *commState) packArgs(send, recv *any) bool {
	a := st.packArg(argSend, send)
	b := st.packArg(argRecv, recv)
	return a || b
}

func (st *commState) packArg(i int, arg *any) bool {
	if arg == nil {
		return false
	}
	v, ok := (*arg).(*ranks.View)
	if !ok || v == nil {
		return false // a nil *View is refused by viewOf
	}
	if i == argRecv && v.Overlaps() {
		return false // refused by viewOf where the receive buffer counts (see viewArg)
	}
	m, _ := ranks.MemOf(v)
	if m.Type == ranks.TypeNone {
		return false // a zero View: refused by viewOf
	}
	sz := m.Type.Size()
	b := st.scratch(scrViewSend+scratchSlot(i), m.N*sz)
	m.CopyTo(b)
	p := &st.packs[i]
	p.v, p.src, p.view = vec{k: kind(m.Type), b: b, n: m.N, sz: sz}, m, true
	*arg = p
	return true
}

// unpackArgs copies the packed receive buffer back into its View and forgets the packed arguments.
func (st *commState) unpackArgs() {
	if p := &st.packs[argRecv]; p.view {
		p.src.CopyFrom(p.v.b)
	}
	st.packs = [numArgs]packed{}
}

// viewArg is viewOfRole's answer for the View-related arguments: a packed one, or a nil *View.
func viewArg(buf any, what, role string) (vec, bool, error) {
	switch b := buf.(type) {
	case *packed:
		return b.v, true, nil
	case *ranks.View:
		if m, _ := ranks.MemOf(b); m.Type == ranks.TypeNone {
			return vec{}, true, fmt.Errorf("%w: a nil or zero *View as the %s%s buffer", ranks.ErrBuffer, what, role)
		}
		if b.Overlaps() {
			// Left unpacked (packArg, packedCopy): unpacking into blocks that overlap used to let later elements
			// overwrite earlier ones without a word, where a point-to-point receive into the same View fails.
			// b.String(), not b: the handle may be on the caller's stack (hideArg), and fmt would call String
			// through its heap copy of the pointer, after the stack may have moved (see buf.go).
			return vec{}, true, fmt.Errorf("%w: receiving into %s, whose blocks overlap (%s%s buffer)", ranks.ErrBuffer, b.String(), what, role)
		}
		return vec{}, true, fmt.Errorf("%w: a *View reached the %s%s buffer unpacked (internal)", ranks.ErrInternal, what, role)
	}
	return vec{}, false, nil
}

// withViews packs the View arguments of a blocking call on c (see packArgs) and returns the state whose
// unpackArgs the call must defer, or nil when there is nothing to unpack. Without View arguments it costs two type
// assertions. An invalid communicator is left to the call to report.
func withViews(c *ranks.Comm, send, recv *any) *commState {
	if !isViewArg(send) && !isViewArg(recv) {
		return nil
	}
	if c == nil || c.Check() != nil {
		return nil
	}
	st := stateOf(c)
	if st.packArgs(send, recv) {
		return st
	}
	return nil
}

func isViewArg(arg *any) bool {
	if arg == nil {
		return false
	}
	_, ok := (*arg).(*ranks.View)
	return ok
}

// Views in the nonblocking and persistent collectives (package nbc), whose buffers outlive the call: the operation
// owns a packed copy of each View argument. Pack fills them (when the operation starts, at every Start for a
// persistent one): the send View's elements, and the receive View's, so that what the collective leaves alone
// keeps its value; Unpack copies the receive copy back into its View before the request completes.

// ViewArgs holds the packed copies of an operation's View arguments.
type ViewArgs struct {
	send, recv     ranks.Mem // the Views (Type none: not a View)
	sendBuf, recvB []byte
}

// PackViews returns the arguments to resolve in place of send and recv, slices over fresh copies for View ones,
// and the ViewArgs that keeps them (nil when neither is a View). A nil or zero *View is passed on, for the call to
// refuse.
func PackViews(send, recv any) (*ViewArgs, any, any) {
	send, sm, sb := packedCopy(send, false)
	recv, rm, rb := packedCopy(recv, true)
	if sm.Type == ranks.TypeNone && rm.Type == ranks.TypeNone {
		return nil, send, recv // no ViewArgs made: a call without Views allocates nothing here
	}
	return &ViewArgs{send: sm, sendBuf: sb, recv: rm, recvB: rb}, send, recv
}

func packedCopy(arg any, recv bool) (any, ranks.Mem, []byte) {
	v, ok := arg.(*ranks.View)
	if !ok || (recv && v.Overlaps()) { // an overlapping receive View: refused where it counts (viewArg)
		return arg, ranks.Mem{}, nil
	}
	m, _ := ranks.MemOf(v)
	if m.Type == ranks.TypeNone {
		return arg, ranks.Mem{}, nil
	}
	b := make([]byte, m.Size())
	return ranks.SliceOf(m.Type, b), m, b
}

// Pack copies the Views into their packed copies.
func (va *ViewArgs) Pack() {
	if va.send.Type != ranks.TypeNone {
		va.send.CopyTo(va.sendBuf)
	}
	if va.recv.Type != ranks.TypeNone {
		va.recv.CopyTo(va.recvB)
	}
}

// Unpack copies the receive copy back into its View.
func (va *ViewArgs) Unpack() {
	if va.recv.Type != ranks.TypeNone {
		va.recv.CopyFrom(va.recvB)
	}
}

// isView reports whether buf is a *View (nil or not).
func isView(buf any) bool {
	_, ok := buf.(*ranks.View)
	return ok
}
