package ranks

import "fmt"

// Cancel.
//
// A receive can be cancelled until a message matches it: it is then still in its rank's slot or posted queue, and
// Cancel takes it out under the rank's lock (a sender claiming the slot without the lock races on the claim word,
// and only one of them wins). This holds for every path: a message from this node, eager or rendezvous, or from
// the network device, whose deliveries match under the same lock.
//
// A send can be cancelled only while no part of its message has reached the receiver's matching, which in gompj
// means: a send to a rank of this node that waits for its receive, namely a rendezvous (over the intra-node eager
// limit) or a synchronous send, whose message sits in the receiver's unexpected queue untaken. Cancel withdraws it
// from there under the receiver's lock; a receive or matched probe that took it first wins, and the send then
// completes normally. Every other send cannot be cancelled, and Cancel leaves it to complete normally:
//   - an eager send on this node is complete when the call returns (the data were copied to the receiver);
//   - a send over the network (eager or rendezvous) was handed to the device, whose frame (the payload, or the
//     request to send) travels to the receiving node at once and may be matched there at any moment: withdrawing
//     it would need a round trip to that node, which the device protocol does not have;
//   - a buffered send (Bsend, Ibsend) is complete once copied into the attached buffer.

// Cancel asks for an active request to be cancelled. If it could be, the request completes at once with
// Status.Canceled true and nothing delivered; if not, it completes normally, with Canceled false. Either way the
// request must still be completed with Wait, Test or another completion call, as in MPI. Cancel of an inactive
// request does nothing; of a freed one, or of a collective, it is ErrRequest.
func (h *Request) Cancel() error {
	if h == nil {
		return errNilRequest()
	}
	defer leave(h.enter())
	if ok, err := h.pending(); !ok {
		return err
	}
	r := h.s
	if r.kind == kindOp || r.kind == kindColl {
		return fmt.Errorf("%w: a collective cannot be cancelled", ErrRequest)
	}
	rk := r.rk
	if rk == nil || r.done.Done() {
		return nil // never queued (eager, remote, ProcNull), or already matched
	}
	var m *msg
	ok := false
	rk.mu.Lock()
	if r.kind == kindRecv {
		ok = rk.withdraw(r)
	} else if m = r.held; m != nil {
		rk.unexp.Remove(&m.item)
		rk.held -= m.held // what takeUnexpected does when a receive takes it (a waiting send is not counted)
		m.held = 0
		r.held, ok = nil, true
	}
	rk.mu.Unlock()
	if !ok {
		return nil
	}
	if m != nil {
		m.release() // a rendezvous message refers to the sender's memory; a synchronous object's bytes are its own
	}
	r.canceled, r.bytes = true, 0
	r.done.Complete()
	return nil
}

// withdraw takes receive rr out of rk's matching if no message has matched it yet. Called with rk.mu held.
func (rk *Rank) withdraw(rr *request) bool {
	if rk.slot.Load() == rr {
		if g := rr.claim.Load(); g&1 == 1 && rr.claim.CompareAndSwap(g, g+1) {
			// src and tag still hold the envelope (the context in src's high half), as status reads them.
			return true
		}
	}
	if rr.item.Queued() {
		rk.posted.Remove(&rr.item)
		rr.src.Store(uint64(uint32(rr.item.Env.Src)))
		rr.tag.Store(rr.item.Env.Tag)
		return true
	}
	return false
}

// taken records that a receive or a matched probe took m from its receiver's unexpected queue: from now on, the
// send that left it there can no longer be cancelled. Called with the receiver's lock held.
func (m *msg) taken() {
	if m.sreq != nil {
		m.sreq.held = nil
	}
}
